"""The operator limits glibc's malloc to two arenas (runtime/allocator.py): a process whose
threads allocate at once keeps two heaps, not one per thread, however it was started (its
entry point or a plain ``kopf run``); $MALLOC_ARENA_MAX wins."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from swarmkit_operator.runtime.allocator import ARENAS, limit_malloc_arenas

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="arenas are glibc's malloc"
)

# Eight threads allocate while all are alive (glibc gives each a new arena up to its limit),
# then glibc's malloc_info counts the heaps (one per arena).
PROBE = """
import ctypes, gc, os, sys, tempfile, threading
from swarmkit_operator.runtime.allocator import limit_malloc_arenas
if sys.argv[1] == "kopf-run":  # the settings a plain `kopf run` start takes (no __main__)
    import kopf
    from swarmkit_operator.handlers.root import settings_of
    memo = kopf.Memo()
    settings = settings_of(memo)
    limited = settings_of(memo) is settings and gc.get_freeze_count() > 0
else:
    limited = limit_malloc_arenas(dict(os.environ)) if sys.argv[1] == "limit" else False
barrier, held = threading.Barrier(8), []
def allocate():
    barrier.wait()
    held.append([bytearray(2000) for _ in range(50)])
    barrier.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
path = tempfile.mktemp()
out = libc.fopen(path.encode(), b"w"); libc.malloc_info(0, out); libc.fclose(out)
print(limited, open(path).read().count("<heap nr="))
os.unlink(path)
"""


def heaps(mode: str, **env: str) -> tuple[str, int]:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    operator = Path(__file__).resolve().parents[3] / "operator"
    environ["PYTHONPATH"] = str(operator)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        env={**environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    return out[0], int(out[1])


def test_threads_allocating_at_once_share_two_arenas_once_limited() -> None:
    assert heaps("limit") == ("True", ARENAS)
    # Without the limit the same threads get an arena each (the test shows a difference).
    limited, unlimited = heaps("none")
    assert limited == "False" and unlimited > ARENAS + 2


def test_a_plain_kopf_run_start_limits_the_arenas_and_freezes_the_imports_once() -> None:
    # ``kopf run -m swarmkit_operator.handlers`` never runs __main__: its settings come from
    # the environment, parsed once (the memo keeps them), with the same memory settings.
    assert heaps("kopf-run") == ("True", ARENAS)


def test_malloc_arena_max_in_the_environment_wins() -> None:
    assert not limit_malloc_arenas({"MALLOC_ARENA_MAX": "4"})
    assert heaps("limit", MALLOC_ARENA_MAX="6") == ("False", 6)
