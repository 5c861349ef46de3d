"""The runner as PID 1 (the runtime image's entrypoint, no tini): in a real PID namespace, as
uid 65532 without capabilities (``unshare --pid --fork`` + ``setpriv``, as a container runtime
would start it), it forwards SIGTERM to the run, reaps orphans, exits with the run's code,
and no process the run starts can read a secret from PID 1's or the run's environment or
memory. Needs root to create the namespace (skipped otherwise)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SECRET = "sk-pid1-" + os.urandom(8).hex()
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
    reason="needs root, unshare and setpriv to make a PID namespace",
)

#: What the runner's main does first (seal, then become init), then a "run" that starts a
#: child probing its ancestors' /proc files, leaves an orphan, and waits for SIGTERM.
WORKER = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    from swarmkit_runner.secrets import seal_process
    from swarmkit_runner.init import become_init
    seal_process()
    become_init()
    probe = "for p in 1 $PPID; do for f in environ mem; do "
    probe += "if (exec 3< /proc/$p/$f) 2>/dev/null; then echo $p-$f-open; "
    probe += "else echo $p-$f-denied; fi; done; done; sleep 30 & echo control-"
    probe += "$( (exec 3< /proc/$!/environ) 2>/dev/null && echo open || echo denied); kill $!"
    out = subprocess.run(["bash", "-c", probe], env={"PATH": os.environ["PATH"]},
                         capture_output=True, text=True).stdout.split()
    print("probe", os.getpid(), " ".join(out), flush=True)
    first = os.fork()
    if first == 0:  # an orphan: its parent exits at once, it re-parents to PID 1
        if os.fork() == 0:
            time.sleep(0.2)
            os._exit(0)
        os._exit(0)
    os.waitpid(first, 0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
    print("ready", flush=True)
    time.sleep(60)
    """
)


def test_pid_one_seals_forwards_sigterm_reaps_and_exits_with_the_runs_code(
    tmp_path: Path,
) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join(sys.path),
        "SWARMKIT_SECRET_TOKEN": SECRET,
    }
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
            "setpriv", "--reuid", "65532", "--regid", "65532", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all",
            sys.executable, "-c", WORKER]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True, cwd="/")
    assert proc.stdout is not None
    lines = [proc.stdout.readline().split(), proc.stdout.readline().split()]
    assert lines[1] == ["ready"], lines
    _, worker_pid, *seen = lines[0]
    assert worker_pid != "1"  # the run is PID 1's child, PID 1 stayed the reaper
    # PID 1 and the run: neither environment block nor memory opens for their child's child
    pid1 = ["1-environ-denied", "1-mem-denied"]
    run = [f"{worker_pid}-environ-denied", f"{worker_pid}-mem-denied"]
    assert seen[:4] == [*pid1, *run], seen
    assert seen[4] == "control-open", seen  # a same-uid process not sealed: readable
    unshare_child = _child_of(proc.pid)
    time.sleep(0.5)  # the orphan has exited by now: PID 1 reaped it (no zombie)
    assert _zombies_of(unshare_child) == []
    os.kill(unshare_child, signal.SIGTERM)  # what the kubelet sends PID 1
    assert proc.wait(10) == 7  # forwarded to the run, its exit code is the container's


def _zombies_of(pid: int) -> list[int]:
    """Children of ``pid`` (host pids) that exited and were not reaped."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == pid and state == "Z":
                found.append(int(entry.name))
    return found


def _child_of(pid: int) -> int:
    """The PID-1 process (the child ``unshare --fork`` made), as the host sees it."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise AssertionError(f"unshare {pid} has no child")
