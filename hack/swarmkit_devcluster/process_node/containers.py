"""A container as a local process group in its own mount namespace.

:class:`ContainerRun` is one container's run state. :func:`prepare_container` turns its spec
into a :class:`Launch`: the command, the environment and the launcher's spec (root
filesystem, bind mounts at the real mountPaths, user, limits; see :mod:`.sandbox`);
:func:`start_container` runs the launcher with stdout+stderr appended to
``<pod dir>/<container>.log``; :func:`stop_container` and :func:`kill_containers` end process
groups (SIGTERM, then SIGKILL after the grace period); :func:`termination_message` reads what
the container left behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
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
from swarmkit_devcluster.process_node.env import ConfigError, PodSources, apply_env, expand_vars
from swarmkit_devcluster.process_node.images import (
    PYTHON_ALIASES,
    ImageRule,
    LocalImage,
    build_argv,
    image_argv,
    subst_python,
)
from swarmkit_devcluster.process_node.limits import (
    Limits,
    container_limits,
    make_cgroup,
    rlimits,
)
from swarmkit_devcluster.process_node.times import now_rfc3339

log = logging.getLogger("process-node")

MARKER_ENV = "SWARMKIT_DEVCLUSTER_ID"
#: How much nicer than the node every container process runs (its children inherit it). On
#: a real cluster workloads run on worker nodes, apart from the control plane and the
#: operator; here they share the same cores, so they yield to them instead of starving them
#: (docs/development/local-control-plane.md).
CONTAINER_NICENESS = 10
TERMINATION_LOG = "/dev/termination-log"


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
    """How to start a prepared container: the launcher (:mod:`.sandbox`) with its spec."""

    argv: list[str]  # the container's command, for the log
    env: dict[str, str]
    spec_file: Path  # the launcher's spec (no env in it: env goes through the process)
    scratch: Path  # the container's writable layer, emptied before each start
    tfile: Path  # the host file behind terminationMessagePath
    error_file: Path  # why the launcher could not exec, if it could not
    cgroup: Path | None
    limits: Limits


SANDBOX = str(Path(__file__).with_name("sandbox.py"))
#: Host paths a host-command container needs even under a volume mounted over them: the
#: interpreter's prefixes and the checkout (a clone in /tmp with an emptyDir at /tmp).
_HOST_NEEDS = tuple(
    dict.fromkeys(
        p for p in (sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parents[3])) if p
    )
)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class NodeInfo:
    """What a container needs to know about its node."""

    api_host: str
    api_port: int
    marker: str
    cgroup_parent: Path | None = None


def volume_mounts(c: ContainerRun, volumes: dict[str, Path]) -> list[JSON]:
    """The launcher's bind mounts for ``c``'s ``volumeMounts`` (outermost first)."""
    out: list[JSON] = []
    for m in sorted(c.spec.get("volumeMounts") or [], key=lambda m: len(m["mountPath"])):
        src = volumes.get(m["name"])
        if src is None:
            raise ConfigError(f'volume "{m["name"]}" not found')
        if m.get("subPath"):
            src = src / m["subPath"]
            if not src.exists():
                src.mkdir(parents=True, exist_ok=True)
        src = src.resolve()
        out.append(
            {
                "source": str(src),
                "target": "/" + m["mountPath"].strip("/"),
                "readOnly": bool(m.get("readOnly")),
                "file": src.is_file(),
            }
        )
    return out


def _run_as(pod_sc: JSON, sc: JSON, image: LocalImage) -> tuple[int, int, list[int]] | None:
    """runAsUser/runAsGroup (container over pod over the image's USER); fsGroup and
    supplementalGroups become the supplementary groups."""
    uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
    gid = sc.get("runAsGroup", pod_sc.get("runAsGroup"))
    img_uid, _, img_gid = image.user.partition(":")
    if uid is None and img_uid.isdigit():
        uid = int(img_uid)
    if gid is None and img_gid.isdigit():
        gid = int(img_gid)
    if uid is None:
        return None
    groups = [int(g) for g in pod_sc.get("supplementalGroups") or []]
    if pod_sc.get("fsGroup") is not None:
        groups.append(int(pod_sc["fsGroup"]))
    return int(uid), int(gid if gid is not None else 0), sorted(set(groups))


def _hosts_files(pod_dir: Path, hostname: str) -> list[JSON]:
    """/etc/hosts and /etc/hostname of the pod (as the kubelet writes them), the node's
    /etc/resolv.conf."""
    hosts = pod_dir / "etc-hosts"
    hosts.write_text(
        "# Kubernetes-managed hosts file (process node).\n127.0.0.1\tlocalhost\n"
        f"::1\tlocalhost ip6-localhost ip6-loopback\n127.0.0.1\t{hostname}\n"
    )
    name = pod_dir / "etc-hostname"
    name.write_text(hostname + "\n")
    out = [
        {"source": str(hosts), "target": "/etc/hosts", "file": True},
        {"source": str(name), "target": "/etc/hostname", "file": True},
    ]
    if Path("/etc/resolv.conf").is_file():
        resolv = str(Path("/etc/resolv.conf").resolve())
        out.append({"source": resolv, "target": "/etc/resolv.conf", "file": True})
    return out


def prepare_container(
    c: ContainerRun,
    rule: ImageRule | None,
    image: LocalImage | None,
    volumes: dict[str, Path],
    sources: PodSources,
    *,
    pod_dir: Path,
    node: NodeInfo,
) -> Launch:
    """Resolve ``c``'s command, environment, mounts, user and limits into a :class:`Launch`.

    ``image`` set: the container runs in that root filesystem with the pod's environment
    exactly (image env, then envFrom/env, plus HOSTNAME and the KUBERNETES_SERVICE_* vars the
    kubelet adds). Otherwise ``rule`` maps the image to a host command (see the package
    docstring): the host's filesystem with the pod's volumes at their mountPaths."""
    scratch = pod_dir / "rw" / c.name
    env: dict[str, str] = {}
    k8s_env = {
        "KUBERNETES_SERVICE_HOST": node.api_host,
        "KUBERNETES_SERVICE_PORT": str(node.api_port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(node.api_port),
        "KUBERNETES_PORT": f"tcp://{node.api_host}:{node.api_port}",
    }
    mounts = volume_mounts(c, volumes)
    pod_spec = sources.pod["spec"]
    pod_sc = pod_spec.get("securityContext") or {}
    sc = c.spec.get("securityContext") or {}
    if image is not None:
        env["PATH"] = DEFAULT_PATH
        env.update(image.env)
        env["HOSTNAME"] = sources.name
        env.update(k8s_env)
        apply_env(env, c.spec, sources)
        argv = [expand_vars(a, env) for a in image_argv(image, c.spec)]
        cwd = c.spec.get("workingDir") or image.working_dir or "/"
        user = _run_as(pod_sc, sc, image)
        mounts = _hosts_files(pod_dir, sources.name) + mounts
    else:
        assert rule is not None
        home, tmp = pod_dir / "home" / c.name, pod_dir / "tmp" / c.name
        for d in (home, tmp):
            d.mkdir(parents=True, exist_ok=True)
        env.update(
            {
                "PATH": os.path.dirname(sys.executable)
                + os.pathsep
                + os.environ.get("PATH", "/usr/bin:/bin"),
                "HOSTNAME": sources.name,
                "HOME": str(home),
                "TMPDIR": str(tmp),
                "LANG": os.environ.get("LANG", "C.UTF-8"),
                **k8s_env,
            }
        )
        if node.marker:
            env[MARKER_ENV] = node.marker
        env.update({k: subst_python(v) for k, v in rule.env})
        apply_env(env, c.spec, sources)
        # Only what the pod spec wrote gets $(VAR) expansion; the rule's entrypoint and the
        # substituted interpreter are host paths.
        command = list(c.spec.get("command") or [])
        args = list(c.spec.get("args") or [])
        argv = build_argv(rule, c.spec)
        from_spec = len(command) + len(args) if command else len(args)
        host_part = len(argv) - from_spec
        argv = argv[:host_part] + [expand_vars(a, env) for a in argv[host_part:]]
        if command and PYTHON_ALIASES.match(command[0]):
            argv[0] = sys.executable
        cwd = c.spec.get("workingDir") or str(home)
        user = None
        targets = [m["target"] for m in mounts]
        for need in _HOST_NEEDS:
            if any(need.startswith(t.rstrip("/") + "/") for t in targets):
                mounts.append({"source": need, "target": need})
    tpath = c.spec.get("terminationMessagePath") or TERMINATION_LOG
    tfile = pod_dir / f"{c.name}.termination-log"
    mounts.append({"source": str(tfile), "target": tpath, "file": True})
    limits = container_limits(c.spec)
    cgroup = None
    if node.cgroup_parent is not None and (limits.memory or limits.cpu_millis):
        cgroup = node.cgroup_parent / f"{sources.pod['metadata']['uid']}-{c.name}"
    spec: JSON = {
        "root": str(pod_dir / "root" / c.name),
        "image": str(image.rootfs) if image is not None else None,
        "upper": str(scratch),
        "readOnlyRoot": image is not None and bool(sc.get("readOnlyRootFilesystem")),
        "hostname": sources.name if image is not None else None,
        "mounts": mounts,
        "cwd": cwd,
        "user": list(user) if user is not None else None,
        "noNewPrivs": sc.get("allowPrivilegeEscalation") is False,
        "rlimits": rlimits(limits) if cgroup is None else {},
        "cgroup": str(cgroup) if cgroup is not None else None,
        "argv": argv,
        "envKeys": sorted(env),
        "errorFile": str(pod_dir / f"{c.name}.start-error"),
    }
    spec_file = pod_dir / f"{c.name}.launch.json"
    spec_file.write_text(json.dumps(spec, indent=1))
    return Launch(argv, env, spec_file, scratch, tfile, Path(spec["errorFile"]), cgroup, limits)


def start_container(
    c: ContainerRun,
    launch: Launch,
    pod_dir: Path,
    wake: threading.Event,
    label: str,
) -> None:
    """Start ``c`` through the launcher in a new session (its own process group); ``wake``
    is set when it exits. A launcher that cannot start at all becomes an exit with code 128
    (RunContainerError); one that cannot create the container exits 128 with the reason in
    ``launch.error_file`` (StartError)."""
    for f in (launch.tfile, launch.error_file):
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
    launch.tfile.touch(mode=0o666)
    os.chmod(launch.tfile, 0o666)  # written by the container's user, whoever that is
    shutil.rmtree(launch.scratch, ignore_errors=True)
    launch.scratch.mkdir(parents=True, exist_ok=True)
    if launch.cgroup is not None:
        make_cgroup(launch.cgroup.parent, launch.cgroup.name, launch.limits)
    logf = open(pod_dir / f"{c.name}.log", "ab")  # noqa: SIM115
    c.started_at = now_rfc3339()
    helper = [sys.executable, "-I", "-S", SANDBOX, str(launch.spec_file)]
    try:
        c.proc = subprocess.Popen(
            helper,
            cwd="/",
            env=launch.env,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        logf.write(f"process node: cannot start {helper!r}: {exc}\n".encode())
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
    (pod_dir / f"{c.name}.pid").write_text(f"{c.proc.pid} {proc_start_time(c.proc.pid) or ''}")
    c.exit_event.clear()
    proc = c.proc

    def waiter() -> None:
        proc.wait()
        c.exit_event.set()
        wake.set()

    threading.Thread(target=waiter, name=f"wait-{c.name}", daemon=True).start()
    log.info("%s: started %s pid %d: %s", label, c.name, proc.pid, launch.argv)


def start_error(launch: Launch) -> str | None:
    """Why the launcher could not create the container (None: it did exec)."""
    try:
        return launch.error_file.read_text(errors="replace").strip() or None
    except OSError:
        return None


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


def proc_start_time(pid: int) -> int | None:
    """A process's start time (clock ticks since boot): a pid plus it names one process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def is_ours(pidfile_text: str, marker: str) -> int | None:
    """The pid a container pid file names if that process is still the one we started (same
    start time; or, for files without one, it carries this cluster's marker), else None."""
    parts = pidfile_text.split()
    try:
        pid = int(parts[0])
    except (IndexError, ValueError):
        return None
    if len(parts) > 1:
        return pid if str(proc_start_time(pid)) == parts[1] else None
    if not marker:
        return None
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    return pid if f"{MARKER_ENV}={marker}".encode() in environ.split(b"\0") else None
