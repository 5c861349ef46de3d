"""run_contained: nothing a contained call starts outlives it, sessions notwithstanding.

Real subprocesses throughout. A "daemon" below double-forks and calls ``setsid()``, so it
leaves the process group (and session) of the call, as a real daemon would; it records its
pid and sleeps forever. Whatever way the call ends (the script exits, times out, floods its
output past the cap), that pid must be gone once ``run_contained`` returns.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from swarmkit_runner.sandbox import Limits, run_contained

# A unique argument marks our processes, so a recycled pid is never mistaken for one.
DAEMON = """\
import os, sys, time
marker, then = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open("daemon.pid.tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.rename("daemon.pid.tmp", "daemon.pid")
        while True:
            time.sleep(60)
    os._exit(0)
while not os.path.exists("daemon.pid"):
    time.sleep(0.005)
print("daemon", open("daemon.pid").read(), flush=True)
if then == "exit":
    sys.exit(0)
if then == "flood":
    while True:
        sys.stdout.write("x" * 65536)
if then == "kill-launcher":
    try:
        os.kill(os.getppid(), 9)
        print("launcher killed", flush=True)
    except OSError as exc:
        print("kill refused", exc.errno, flush=True)
    sys.exit(0)
while True:
    time.sleep(60)
"""

# A hydra: each process forks a child that leaves for a new session, and exits. There is
# always a fresh pid to kill, in a session nobody has seen yet.
HYDRA = """\
import os, sys, time
marker = sys.argv[1]
if os.fork() == 0:
    while True:
        with open("hydra.pids", "a") as fh:
            fh.write(str(os.getpid()) + "\\n")
        if os.fork() != 0:
            os._exit(0)
        os.setsid()
        time.sleep(0.002)
time.sleep(0.3)
print("hydra running", flush=True)
"""


def _ours(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive (not a zombie) and one of this test's processes."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z" and marker.encode() in cmdline


def _survivors(pids: list[int], marker: str, within: float = 2.0) -> list[int]:
    deadline = time.monotonic() + within
    while True:
        alive = [pid for pid in pids if _ours(pid, marker)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    script = tmp_path / name
    script.write_text(text)
    return script


def _daemon_pid(work: Path) -> int:
    return int((work / "daemon.pid").read_text())


def _landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(444, None, 0, 1))


@pytest.mark.parametrize("confine", [False, True], ids=["bash-tool", "skill-script"])
@pytest.mark.parametrize("then", ["exit", "timeout", "flood"])
async def test_a_setsid_daemon_does_not_outlive_the_call(
    tmp_path: Path, then: str, confine: bool
) -> None:
    marker = f"swarmkit-daemon-{os.getpid()}-{then}-{confine}"
    script = _write(tmp_path, "daemon.py", DAEMON)
    work = tmp_path / "work"
    work.mkdir()
    limits = Limits(timeout_seconds=3.0, max_output_bytes=100_000, confine_writes=confine)

    started = time.monotonic()
    result = await run_contained([sys.executable, str(script), marker, then], work, {}, limits)
    elapsed = time.monotonic() - started

    pid = _daemon_pid(work)
    assert f"daemon {pid}" in result.stdout
    assert _survivors([pid], marker) == []
    if then == "exit":
        assert (result.exit_code, result.timed_out, result.truncated) == (0, False, False)
        assert elapsed < 2.5  # no wait for the daemon's inherited pipes
    elif then == "timeout":
        assert (result.exit_code, result.timed_out) == (-signal.SIGKILL, True)
        assert elapsed < 3.0 + 2.5
    else:
        assert (result.exit_code, result.truncated) == (-signal.SIGKILL, True)
        assert len(result.stdout) <= 100_000
        assert elapsed < 2.5


async def test_a_setsid_daemon_does_not_outlive_a_cancelled_call(tmp_path: Path) -> None:
    marker = f"swarmkit-daemon-{os.getpid()}-cancel"
    script = _write(tmp_path, "daemon.py", DAEMON)
    limits = Limits(timeout_seconds=30.0)
    call = asyncio.create_task(
        run_contained([sys.executable, str(script), marker, "sleep"], tmp_path, {}, limits)
    )
    deadline = time.monotonic() + 10
    while not (tmp_path / "daemon.pid").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert _survivors([_daemon_pid(tmp_path)], marker) == []


async def test_a_process_forking_into_new_sessions_while_being_killed_is_caught(
    tmp_path: Path,
) -> None:
    marker = f"swarmkit-hydra-{os.getpid()}"
    script = _write(tmp_path, "hydra.py", HYDRA)
    result = await run_contained(
        [sys.executable, str(script), marker], tmp_path, {}, Limits(timeout_seconds=10.0)
    )
    assert result.exit_code == 0 and "hydra running" in result.stdout
    pids = [int(line) for line in (tmp_path / "hydra.pids").read_text().split()]
    assert len(pids) > 10  # it did fork on, in new sessions, during the call
    assert _survivors(pids, marker) == []
    # and nothing forks on after the call: the file stops growing
    size = (tmp_path / "hydra.pids").stat().st_size
    time.sleep(0.2)
    assert (tmp_path / "hydra.pids").stat().st_size == size


@pytest.mark.skipif(_landlock_abi() < 6, reason="Landlock signal scoping needs ABI 6")
async def test_a_confined_script_cannot_kill_its_launcher_to_dodge_the_sweep(
    tmp_path: Path,
) -> None:
    marker = f"swarmkit-daemon-{os.getpid()}-kill-launcher"
    script = _write(tmp_path, "daemon.py", DAEMON)
    limits = Limits(timeout_seconds=5.0, confine_writes=True)
    result = await run_contained(
        [sys.executable, str(script), marker, "kill-launcher"], tmp_path, {}, limits
    )
    assert "kill refused 1" in result.stdout  # EPERM
    assert result.exit_code == 0
    assert _survivors([_daemon_pid(tmp_path)], marker) == []


@pytest.mark.parametrize(
    ("command", "exit_code"),
    [("exit 3", 3), ("kill -SEGV $$", -signal.SIGSEGV), ("kill -TERM $$", -signal.SIGTERM)],
)
async def test_exit_codes_are_the_scripts_own(tmp_path: Path, command: str, exit_code: int) -> None:
    result = await run_contained(["/bin/sh", "-c", command], tmp_path, {}, Limits())
    assert result.exit_code == exit_code and not result.timed_out


async def test_cpu_limit_binds_the_script(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "while True: pass"]
    result = await run_contained(argv, tmp_path, {}, Limits(timeout_seconds=20, cpu_seconds=1))
    assert result.exit_code == -signal.SIGXCPU and not result.timed_out


async def test_the_runners_other_children_are_left_alone(tmp_path: Path) -> None:
    # MCP stdio servers are the runner's children in their own sessions, as is this one.
    neighbour = await asyncio.create_subprocess_exec("/bin/sleep", "30", start_new_session=True)
    try:
        script = _write(tmp_path, "daemon.py", DAEMON)
        marker = f"swarmkit-daemon-{os.getpid()}-neighbour"
        result = await run_contained(
            [sys.executable, str(script), marker, "exit"], tmp_path, {}, Limits()
        )
        assert result.exit_code == 0
        assert _survivors([_daemon_pid(tmp_path)], marker) == []
        assert neighbour.returncode is None
        os.kill(neighbour.pid, 0)
    finally:
        neighbour.kill()
        await neighbour.wait()
