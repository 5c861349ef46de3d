"""Running a contained subprocess: skill scripts and the native bash tool.

* argv is passed literally (``execv``, never a shell unless argv itself names one);
* a fresh working directory, the environment given (empty for scripts);
* CPU-time, address-space and file-size limits set by a tiny launcher right before
  ``execv`` (no ``preexec_fn``, which is unsafe with threads);
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
cpu, mem, fsize = (int(v) for v in sys.argv[1:4])
if cpu > 0:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
if mem > 0:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
if fsize > 0:
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.execv(sys.argv[4], sys.argv[4:])
"""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one contained process."""

    timeout_seconds: float = 60.0
    cpu_seconds: int = 30
    memory_bytes: int = 512 * 1024 * 1024
    max_output_bytes: int = 1024 * 1024
    max_file_bytes: int = 64 * 1024 * 1024


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
