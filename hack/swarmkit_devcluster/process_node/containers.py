"""A container as a local process group.

:class:`ContainerRun` is one container's run state. :func:`prepare_container` turns its spec
into a :class:`Launch` (argv, env, working directory, termination-message file) under the
container's root directory; :func:`start_container` runs it with stdout+stderr appended to
``<pod dir>/<container>.log``; :func:`stop_container` and :func:`kill_containers` end process
groups (SIGTERM, then SIGKILL after the grace period); :func:`termination_message` reads what
the container left behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from swarmkit_devcluster.kubeapi import JSON
from swarmkit_devcluster.process_node.env import PodSources, apply_env, expand_vars
from swarmkit_devcluster.process_node.images import (
    PYTHON_ALIASES,
    ImageRule,
    build_argv,
    subst_python,
)
from swarmkit_devcluster.process_node.times import now_rfc3339
from swarmkit_devcluster.process_node.volumes import link_mounts, path_rewriter

log = logging.getLogger("process-node")

MARKER_ENV = "SWARMKIT_DEVCLUSTER_ID"
#: How much nicer than the node every container process runs (its children inherit it). On
#: a real cluster workloads run on worker nodes, apart from the control plane and the
#: operator; here they share the same cores, so they yield to them instead of starving them
#: (README, Performance).
CONTAINER_NICENESS = 10


@dataclass
class ContainerRun:
    name: str
    spec: JSON
    init: bool = False
    sidecar: bool = False
    proc: subprocess.Popen[bytes] | None = None
    started_at: str | None = None
    restart_count: int = 0
    state: JSON = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: JSON = field(default_factory=dict)
    next_start: float = 0.0
    done: bool = False  # will not run again
    exit_event: threading.Event = field(default_factory=threading.Event)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None


class Launch(NamedTuple):
    """How to start a prepared container."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    tfile: Path  # the host path of terminationMessagePath


def prepare_container(
    c: ContainerRun,
    rule: ImageRule,
    volumes: dict[str, Path],
    sources: PodSources,
    *,
    pod_dir: Path,
    api_host: str,
    api_port: int,
    marker: str,
) -> Launch:
    """Create the container's root ``<pod dir>/root/<name>`` with its mounts and resolve its
    argv, env, working directory and termination-message file (the path rule)."""
    root = pod_dir / "root" / c.name
    for sub in ("tmp", "root", "dev"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    mount_paths = link_mounts(root, c.spec.get("volumeMounts") or [], volumes)
    rewrite = path_rewriter(root, mount_paths)

    env: dict[str, str] = {
        "PATH": os.path.dirname(sys.executable)
        + os.pathsep
        + os.environ.get("PATH", "/usr/bin:/bin"),
        "HOSTNAME": sources.name,
        "HOME": str(root / "root"),
        "TMPDIR": str(root / "tmp"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "KUBERNETES_SERVICE_HOST": api_host,
        "KUBERNETES_SERVICE_PORT": str(api_port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(api_port),
        "KUBERNETES_PORT": f"tcp://{api_host}:{api_port}",
        "SWARMKIT_PATH_PREFIX": str(root),
        "SWARMKIT_POD_DIR": str(pod_dir),
    }
    if marker:
        env[MARKER_ENV] = marker
    env.update({k: subst_python(v) for k, v in rule.env})
    apply_env(env, c.spec, sources, rewrite)
    # Only what the pod spec wrote is a container path. The image rule's entrypoint and the
    # substituted interpreter are host paths, and the host checkout may itself live under a
    # mounted directory (a clone in /tmp with an emptyDir at /tmp): never rewrite those.
    command = list(c.spec.get("command") or [])
    from_spec = (
        len(command) + len(c.spec.get("args") or []) if command else len(c.spec.get("args") or [])
    )
    argv = build_argv(rule, c.spec)
    host_part = len(argv) - from_spec
    argv = argv[:host_part] + [rewrite(expand_vars(a, env)) for a in argv[host_part:]]
    if command and PYTHON_ALIASES.match(command[0]):
        argv[0] = sys.executable
    wd = c.spec.get("workingDir")
    if wd:
        rewritten = rewrite(wd)
        cwd = rewritten if rewritten != wd else str(root) + "/" + wd.lstrip("/")
    else:
        cwd = str(root)
    Path(cwd).mkdir(parents=True, exist_ok=True)
    tpath = c.spec.get("terminationMessagePath") or "/dev/termination-log"
    tfile = Path(rewrite(tpath) if rewrite(tpath) != tpath else str(root) + tpath)
    tfile.parent.mkdir(parents=True, exist_ok=True)
    return Launch(argv, env, cwd, tfile)


def start_container(
    c: ContainerRun, launch: Launch, pod_dir: Path, wake: threading.Event, label: str
) -> None:
    """Start ``c`` in a new session (its own process group); ``wake`` is set when it exits.
    A command that cannot be started becomes an exit with code 128 (RunContainerError)."""
    argv, env, cwd, tfile = launch
    with contextlib.suppress(FileNotFoundError):
        tfile.unlink()
    logf = open(pod_dir / f"{c.name}.log", "ab")  # noqa: SIM115
    c.started_at = now_rfc3339()
    try:
        c.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        logf.write(f"process node: cannot start {argv!r}: {exc}\n".encode())
        logf.close()
        c.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.exit(128)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        c.state = {"waiting": {"reason": "RunContainerError", "message": str(exc)}}
    else:
        logf.close()
        c.state = {"running": {"startedAt": c.started_at}}
        niceness = min(19, os.getpriority(os.PRIO_PROCESS, 0) + CONTAINER_NICENESS)
        with contextlib.suppress(OSError):  # it may have exited already
            os.setpriority(os.PRIO_PROCESS, c.proc.pid, niceness)
    (pod_dir / f"{c.name}.pid").write_text(str(c.proc.pid))
    c.exit_event.clear()
    proc = c.proc

    def waiter() -> None:
        proc.wait()
        c.exit_event.set()
        wake.set()

    threading.Thread(target=waiter, name=f"wait-{c.name}", daemon=True).start()
    log.info("%s: started %s pid %d: %s", label, c.name, proc.pid, argv)


def stop_container(c: ContainerRun, grace: float) -> None:
    if c.proc is None or c.proc.returncode is not None:
        return
    with contextlib.suppress(OSError):
        os.killpg(c.proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        c.proc.wait(timeout=grace)
    with contextlib.suppress(OSError):
        os.killpg(c.proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        c.proc.wait(timeout=5)


def kill_containers(runs: Iterable[ContainerRun], grace: float) -> None:
    """SIGTERM every running container's group at once, SIGKILL what is left after ``grace``."""
    procs = [c for c in runs if c.running and c.proc is not None]
    for c in procs:
        assert c.proc is not None
        with contextlib.suppress(OSError):
            os.killpg(c.proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    for c in procs:
        assert c.proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(timeout=max(0.0, end - time.monotonic()))
    for c in procs:
        assert c.proc is not None
        with contextlib.suppress(OSError):
            os.killpg(c.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(timeout=5)


def termination_message(c: ContainerRun, tfile: Path, log_file: Path, code: int) -> str | None:
    msg = ""
    with contextlib.suppress(OSError):
        msg = tfile.read_bytes()[:4096].decode(errors="replace")
    if not msg and code != 0 and c.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
        with contextlib.suppress(OSError):
            lines = log_file.read_bytes().splitlines()[-80:]
            msg = b"\n".join(lines)[-2048:].decode(errors="replace")
    return msg or None


def has_marker(pid: int, marker: str) -> bool:
    """Whether process ``pid`` carries this cluster's marker, i.e. is ours to kill (a pid file
    left by a previous node may name a reused pid)."""
    if not marker:
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in environ.split(b"\0")
