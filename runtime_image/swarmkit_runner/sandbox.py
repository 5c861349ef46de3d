"""Running a contained subprocess: skill scripts and the native bash tool.

* argv is passed literally (``execv``, never a shell unless argv itself names one);
* a fresh working directory, the environment given (empty for scripts);
* a tiny launcher (no ``preexec_fn``, which is unsafe with threads) makes itself a child
  subreaper, forks, and sets CPU-time, address-space and file-size limits in the child
  right before ``execv``: the limits bind the script, not the launcher that waits for it;
* optionally (skill scripts) writes confined to the working directory with Landlock, so a
  script cannot change anything outside its scratch directory even where the filesystem
  is writable (the process node, a pod without a read-only root); from Landlock ABI 6 the
  script cannot signal the launcher either;
* stdout/stderr are read up to a cap;
* once the script exits, and on timeout, output cap or cancellation (SIGTERM to the
  launcher), the launcher SIGKILLs every descendant until none is left. An orphan
  re-parents to the launcher, not to init, so a child that left the process group or
  session (``setsid()``, a daemon's double fork) is found all the same, without root or
  namespaces. The runner also kills the launcher's process group, and the launcher itself
  if it has not gone within :data:`SWEEP_GRACE_SECONDS`.

Exit codes are the script's own: a script killed by signal ``n`` reads ``-n``, as if the
runner had started it directly (the launcher dies of the same signal).
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
import _signal as signal  # not signal: its enum import alone costs milliseconds
import ctypes, os, resource, struct, sys, time
cpu, mem, fsize, confine = (int(v) for v in sys.argv[1:5])
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
# A child subreaper: an orphan anywhere below (a daemon's double fork, setsid() or not)
# re-parents to this process instead of init, so the sweep below still finds it. Not
# dumpable: re-raising the script's fatal signal must not dump this process's core.
if libc.prctl(36, 1, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "PR_SET_CHILD_SUBREAPER")
libc.prctl(4, 0, 0, 0, 0)


def descendants():
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/" + name + "/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue  # exited meanwhile
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [me]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def reap():
    reaped = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped[pid] = status


def sweep():
    # SIGKILL every descendant until none is left: one forked while its parent was being
    # killed re-parents here and is found by the next round. No child left means no
    # descendant (an orphan would have re-parented here): the common case skips /proc.
    while True:
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        pids = descendants()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        # Let the killed die before looking again: each /proc scan costs milliseconds.
        settle = time.monotonic() + 0.01
        while not reap() and time.monotonic() < settle:
            time.sleep(0.0005)


def stop(signum, frame):
    if os.getpid() == me:  # not the child between fork and exec
        sweep()
        os.kill(me, signal.SIGKILL)


signal.signal(signal.SIGTERM, stop)
child = os.fork()
if child == 0:
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if cpu > 0:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        if mem > 0:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        if fsize > 0:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if confine:
            # Landlock: from here on the script and its children may create, change or
            # delete files only under the working directory (and write /dev/null); reading
            # is unchanged. From ABI 6 they may not signal processes outside their domain
            # either, so the script cannot stop or kill this launcher to dodge the sweep.
            abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
            if abi < 1:
                sys.stderr.write("sandbox: Landlock unavailable, writes are not confined\\n")
            else:
                write = 1 << 1
                handled = write | sum(1 << b for b in range(4, 13))  # remove/make dir/...
                if abi >= 2:
                    handled |= 1 << 13  # refer
                if abi >= 3:
                    handled |= 1 << 14  # truncate
                if abi >= 6:
                    attr = struct.pack("QQQ", handled, 0, 1 << 1)  # scoped: SIGNAL
                else:
                    attr = struct.pack("Q", handled)
                rfd = libc.syscall(444, ctypes.create_string_buffer(attr), len(attr), 0)
                if rfd < 0:
                    raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
                def allow(path, rights):
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))
                    if libc.syscall(445, rfd, 1, rule, 0) != 0:  # add_rule(PATH_BENEATH)
                        raise OSError(ctypes.get_errno(), "landlock_add_rule " + path)
                    os.close(fd)
                allow(".", handled)
                allow("/dev/null", write | (handled & (1 << 14)))
                if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.syscall(446, rfd, 0) != 0:
                    raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        os.execv(sys.argv[5], sys.argv[5:])
    except BaseException:
        import traceback
        traceback.print_exc()
    os._exit(1)
status = None
while status is None:
    pid, st = os.waitpid(-1, 0)  # reaps orphans re-parented here as they exit
    if pid == child:
        status = st
sweep()  # nothing the script started outlives it
if os.WIFSIGNALED(status):
    # Die of the same signal, so the runner sees what it saw before this launcher forked.
    sig = os.WTERMSIG(status)
    try:
        signal.signal(sig, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    os.kill(me, sig)
    os._exit(128 + sig)
os._exit(os.waitstatus_to_exitcode(status))
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


#: How long the launcher gets to sweep its descendants after SIGTERM before the runner
#: falls back to killing the process group and the launcher itself.
SWEEP_GRACE_SECONDS = 1.0


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """End the launcher and everything below it, whatever state it is in.

    SIGTERM makes the launcher SIGKILL every descendant (sessions and process groups
    notwithstanding) and then itself. The group kill and the final SIGKILL cover a launcher
    that cannot do that in time (stopped, killed, stuck).
    """
    if proc.returncode is None:
        _signal(proc.pid, signal.SIGTERM)
        # returncode, not wait(): on 3.11 wait() also waits for the pipes to close.
        grace = time.monotonic() + SWEEP_GRACE_SECONDS
        while proc.returncode is None and time.monotonic() < grace:
            await asyncio.sleep(0.005)
    _kill_group(proc.pid)  # the launcher leads its own process group
    if proc.returncode is None:
        _signal(proc.pid, signal.SIGKILL)


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
                _signal(proc.pid, signal.SIGTERM)  # the launcher sweeps; _stop makes sure

    pumps = [
        asyncio.create_task(pump("stdout", proc.stdout)),
        asyncio.create_task(pump("stderr", proc.stderr)),
    ]
    timed_out = False
    deadline = start + limits.timeout_seconds
    # wait() wakes as soon as the launcher has exited and its pipes are closed (3.11 waits
    # for both); polling returncode still notices an exit while something else holds the
    # pipes open, and the output cap.
    exited = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None and not state["truncated"]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            await asyncio.wait({exited}, timeout=min(remaining, 0.01))
    finally:
        exited.cancel()
        # Timeout, output cap, cancellation; after a normal exit only the group kill.
        await _stop(proc)
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
