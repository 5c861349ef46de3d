"""Running a contained subprocess: skill scripts and the native bash tool.

* argv is passed literally (``execv``, never a shell unless argv itself names one);
* a fresh working directory, the environment given (empty for scripts);
* CPU-time, address-space and file-size limits set by a tiny launcher right before
  ``execv`` (no ``preexec_fn``, which is unsafe with threads);
* optionally (skill scripts) writes confined to the working directory with Landlock, so a
  script cannot change anything outside its scratch directory even where the filesystem
  is writable (the process node, a pod without a read-only root);
* stdout/stderr are read up to a cap; past it the process group is killed;
* on timeout, and always once the main process exits, the whole process group is killed,
  so background children never outlive the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_LAUNCHER = """\
import os, resource, sys
cpu, mem, fsize, confine = (int(v) for v in sys.argv[1:5])
if cpu > 0:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
if mem > 0:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
if fsize > 0:
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
if confine:
    # Landlock: from here on this process and its children may create, change or delete
    # files only under the working directory (and write /dev/null); reading is unchanged.
    import ctypes, struct
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    if abi < 1:
        sys.stderr.write("sandbox: Landlock unavailable, writes are not confined\\n")
    else:
        write = 1 << 1
        handled = write | sum(1 << b for b in range(4, 13))  # remove/make dir/reg/sym/...
        if abi >= 2:
            handled |= 1 << 13  # refer
        if abi >= 3:
            handled |= 1 << 14  # truncate
        attr = ctypes.create_string_buffer(struct.pack("Q", handled))
        rfd = libc.syscall(444, attr, 8, 0)
        if rfd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
        def allow(path, rights):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))
            if libc.syscall(445, rfd, 1, rule, 0) != 0:  # landlock_add_rule(PATH_BENEATH)
                raise OSError(ctypes.get_errno(), "landlock_add_rule " + path)
            os.close(fd)
        allow(".", handled)
        allow("/dev/null", write | (handled & (1 << 14)))
        if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.syscall(446, rfd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
os.execv(sys.argv[5], sys.argv[5:])
"""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one contained process."""

    timeout_seconds: float = 60.0
    cpu_seconds: int = 30
    memory_bytes: int = 512 * 1024 * 1024
    max_output_bytes: int = 1024 * 1024
    max_file_bytes: int = 64 * 1024 * 1024
    #: Confine writes to the working directory (Linux Landlock; skill scripts).
    confine_writes: bool = False


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool
    duration_ms: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def run_contained(
    argv: list[str], cwd: Path, env: dict[str, str], limits: Limits
) -> SandboxResult:
    """Run ``argv`` (argv[0] an absolute path) contained as described above."""
    if not os.path.isabs(argv[0]):
        raise ValueError("argv[0] must be an absolute path")
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        "-c",
        _LAUNCHER,
        str(limits.cpu_seconds),
        str(limits.memory_bytes),
        str(limits.max_file_bytes),
        "1" if limits.confine_writes else "0",
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(cwd),
        env=env,
        start_new_session=True,
    )
    pgid = proc.pid
    budget = limits.max_output_bytes
    buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    state = {"truncated": False}

    async def pump(name: str, stream: asyncio.StreamReader | None) -> None:
        nonlocal budget
        if stream is None:
            return
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                return
            if state["truncated"]:
                continue
            take = chunk[: max(0, budget)]
            buffers[name] += take
            budget -= len(take)
            if len(take) < len(chunk):
                state["truncated"] = True
                _kill_group(pgid)

    pumps = [
        asyncio.create_task(pump("stdout", proc.stdout)),
        asyncio.create_task(pump("stderr", proc.stderr)),
    ]
    timed_out = False
    deadline = start + limits.timeout_seconds
    try:
        while proc.returncode is None:
            if time.monotonic() >= deadline:
                timed_out = True
                break
            await asyncio.sleep(0.01)
    finally:
        _kill_group(pgid)  # timeout, cancellation, or stragglers after a normal exit
        _, pending = await asyncio.wait(pumps, timeout=2.0)
        for task in pending:
            task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), timeout=2.0)
    return SandboxResult(
        exit_code=proc.returncode,
        stdout=buffers["stdout"].decode("utf-8", errors="replace"),
        stderr=buffers["stderr"].decode("utf-8", errors="replace"),
        truncated=state["truncated"],
        timed_out=timed_out,
        duration_ms=round((time.monotonic() - start) * 1000, 1),
    )
