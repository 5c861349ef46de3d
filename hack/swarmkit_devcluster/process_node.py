"""The process node: a kubelet stand-in that runs pods as local processes.

Run it with ``python -m swarmkit_devcluster.process_node --kubeconfig K --state-dir D``
(``swarmkit_devcluster up`` and the pytest fixtures start it for you). It registers a Ready
``Node`` (default name ``process-node``), keeps its ``Lease`` in ``kube-node-lease`` fresh,
watches the pods bound to it and runs each container as a local process group.

Images
------
There are no images: each container's ``image`` is mapped to a local command by a table.
The built-in table (override with ``--image-map FILE`` or ``$SWARMKIT_NODE_IMAGE_MAP``, a
YAML/JSON file ``{"images": [{"match": GLOB, "entrypoint": [...], "cmd": [...],
"env": {...}}]}``; rules are matched in order against the image repository, i.e. the reference
without ``:tag``/``@digest``, and then against the full reference):

* ``*swarmkit-runtime`` → entrypoint ``[<python>, -m, swarmkit_runner]``
* ``*swarmkit-operator`` → entrypoint ``[<python>, -m, swarmkit_operator]``
* ``python``, ``*/python`` (e.g. ``docker.io/library/python:3.12``) → cmd ``[<python>]``

``<python>`` (written ``{python}`` in a table) is the interpreter running the node, i.e. this
venv's python. The container's ``command``, if set, replaces the entrypoint (and the image's cmd)
exactly as in Kubernetes, with ``args`` appended; ``args`` alone replace the image's cmd.
A leading ``python``/``python3``/``python3.N`` (bare or as an absolute path) is always the node's
python. An unknown image leaves the pod ``Pending`` with waiting reason ``ErrImagePull``.

Filesystem: the path rule
-------------------------
Processes see the host filesystem, so every container gets its own *root directory*
``<state>/pods/<namespace>_<pod>/root/<container>/``. A volume mounted at ``mountPath`` is a
symlink ``<root><mountPath>`` pointing at the materialized volume
(``<state>/pods/<namespace>_<pod>/volumes/<volume>``). **The rule: inside a process-node pod,
the absolute container path P is the host path ``$SWARMKIT_PATH_PREFIX + P``**
(``SWARMKIT_PATH_PREFIX`` is the container root; it is unset on a real cluster, so the
helper below is a no-op there)::

    def pod_path(p: str) -> str:
        prefix = os.environ.get("SWARMKIT_PATH_PREFIX", "").rstrip("/")
        if not prefix or not p.startswith("/") or p == prefix or p.startswith(prefix + "/"):
            return p
        return prefix + p

To make most programs work unchanged, the node also rewrites ``command``/``args`` elements,
``env`` values and ``workingDir`` that start with a volume ``mountPath`` (also after a
``--flag=``/``KEY=`` prefix) to the host path; the helper is idempotent, so applying it to an
already-rewritten path is harmless. Hard-coded paths need the helper:

* the termination message: write to ``pod_path(<terminationMessagePath>)``; the default
  ``/dev/termination-log`` is ``$SWARMKIT_PATH_PREFIX/dev/termination-log`` (the directory
  exists); it is read after exit (max 4096 bytes; ``FallbackToLogsOnError`` supported);
* the service-account token, CA and namespace:
  ``pod_path("/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}")``
  (projected token refreshed at 80 % of its lifetime, like the kubelet);
* in-cluster config: ``KUBERNETES_SERVICE_HOST=127.0.0.1`` and ``KUBERNETES_SERVICE_PORT`` (the
  apiserver's port) are set; the CA is the cluster CA, valid for 127.0.0.1. With the Python
  ``kubernetes`` client::

      from kubernetes.config.incluster_config import (
          SERVICE_CERT_FILENAME, SERVICE_TOKEN_FILENAME, InClusterConfigLoader)
      InClusterConfigLoader(token_filename=pod_path(SERVICE_TOKEN_FILENAME),
                            cert_filename=pod_path(SERVICE_CERT_FILENAME)).load_and_set()

  (kopf: an ``@kopf.on.login`` handler returning ``kopf.ConnectionInfo(server=..., ca_path=...,
  token=...)`` from those paths).

Other env: ``HOSTNAME`` (pod name), ``HOME`` (``<root>/root``), ``TMPDIR`` (``<root>/tmp``),
``PATH`` (node's, venv first), ``SWARMKIT_POD_DIR``; ``workingDir`` defaults to the
container root (a relative ``workingDir`` or a non-mount absolute one lives under the root).
Image-map env (e.g. ``PYTHONUNBUFFERED=1`` for the built-in python rules) comes first, then
``envFrom`` then ``env`` (with ``$(VAR)`` expansion); ``valueFrom`` supports ``secretKeyRef``,
``configMapKeyRef``, ``fieldRef`` (``metadata.name|namespace|uid|labels['k']|annotations['k']``,
``spec.nodeName``, ``spec.serviceAccountName``, ``status.podIP``, ``status.hostIP``) and
``resourceFieldRef``.

Volumes: ``configMap``, ``secret``, ``emptyDir``, ``downwardAPI``, ``projected``
(``serviceAccountToken`` via the TokenRequest API, ``configMap``, ``secret``, ``downwardAPI``) and
``hostPath`` (symlinked); they are materialized once at pod start (no live updates). Other volume
types become empty directories (with a warning in the node log).

Lifecycle: init containers run first, one at a time (sidecars with ``restartPolicy: Always``
are started and kept running); ``restartPolicy`` Never/OnFailure/Always honoured with a short
backoff; pod ``activeDeadlineSeconds`` → kill, phase ``Failed`` reason ``DeadlineExceeded``;
deletion → SIGTERM to every process group, SIGKILL after ``min(grace, 5 s)``, then the pod
object is deleted with grace 0. Logs: ``<state>/pods/<namespace>_<pod>/<container>.log``
(stdout+stderr), served on the node's kubelet port so ``kubectl logs [-f]`` works. Resource
limits are not enforced; probes are ignored (a running container is ready).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import fnmatch
import json
import logging
import math
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from swarmkit_devcluster.kubeapi import JSON, ApiError, KubeClient, pod_path

log = logging.getLogger("process-node")

DEFAULT_NODE_NAME = "process-node"
KUBELET_VERSION = "v1.36.3"
GRACE_CAP_SECONDS = 5.0
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
MARKER_ENV = "SWARMKIT_DEVCLUSTER_ID"
PYTHON_ALIASES = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
NOT_READY_TAINTS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(s: str | None) -> float | None:
    if not s:
        return None
    return dt.datetime.strptime(s[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC).timestamp()


# -- images -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRule:
    match: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


BUILTIN_IMAGE_RULES: tuple[ImageRule, ...] = (
    ImageRule(
        "*swarmkit-runtime",
        entrypoint=("{python}", "-m", "swarmkit_runner"),
        env=(("PYTHONUNBUFFERED", "1"),),
    ),
    ImageRule(
        "*swarmkit-operator",
        entrypoint=("{python}", "-m", "swarmkit_operator"),
        env=(("PYTHONUNBUFFERED", "1"),),
    ),
    ImageRule("python", cmd=("{python}",), env=(("PYTHONUNBUFFERED", "1"),)),
    ImageRule("*/python", cmd=("{python}",), env=(("PYTHONUNBUFFERED", "1"),)),
)


def image_repository(image: str) -> str:
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        ref = ref[: len(ref) - len(last)] + last.split(":", 1)[0]
    return ref


class ImageMap:
    def __init__(self, rules: tuple[ImageRule, ...], source: str) -> None:
        self.rules = rules
        self.source = source

    @classmethod
    def load(cls, path: str | None) -> ImageMap:
        if not path:
            return cls(BUILTIN_IMAGE_RULES, "the built-in image table")
        data = yaml.safe_load(Path(path).read_text()) or {}
        rules = []
        for r in data.get("images", []):
            rules.append(
                ImageRule(
                    match=str(r["match"]),
                    entrypoint=tuple(str(x) for x in r.get("entrypoint", r.get("command", []))),
                    cmd=tuple(str(x) for x in r.get("cmd", r.get("args", []))),
                    env=tuple((str(k), str(v)) for k, v in (r.get("env") or {}).items()),
                )
            )
        if data.get("includeBuiltins", True):
            rules += BUILTIN_IMAGE_RULES
        return cls(tuple(rules), f"image table {path}")

    def resolve(self, image: str) -> ImageRule | None:
        repo = image_repository(image)
        for rule in self.rules:
            if fnmatch.fnmatchcase(repo, rule.match) or fnmatch.fnmatchcase(image, rule.match):
                return rule
        return None


def _subst(s: str) -> str:
    return s.replace("{python}", sys.executable)


def build_argv(rule: ImageRule, container: JSON) -> list[str]:
    command = container.get("command") or []
    args = container.get("args") or []
    if command:
        argv = list(command) + list(args)
    elif args:
        argv = [_subst(x) for x in rule.entrypoint] + list(args)
    else:
        argv = [_subst(x) for x in rule.entrypoint + rule.cmd]
    if argv and PYTHON_ALIASES.match(argv[0]):
        argv[0] = sys.executable
    return argv


# -- quantities and env -------------------------------------------------------------------------

_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip


def parse_quantity(q: str | int | float) -> Decimal:
    s = str(q).strip()
    m = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?\d+)?)([a-zA-Z]*)", s)
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"bad quantity {q!r}")
    return Decimal(m.group(1)) * Decimal(_SUFFIX[m.group(2)])


_VAR_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand_vars(value: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined vars are replaced, ``$$`` is a literal ``$``."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR_RE.sub(repl, value)


class ConfigError(Exception):
    """A referenced Secret/ConfigMap/key is missing: CreateContainerConfigError."""


# -- the node -----------------------------------------------------------------------------------


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


class ProcessNode:
    def __init__(
        self,
        client: KubeClient,
        *,
        name: str,
        state_dir: Path,
        image_map: ImageMap,
        api_host: str,
        api_port: int,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        pods: int = 110,
    ) -> None:
        self.client = client
        self.name = name
        self.state_dir = state_dir
        self.pods_dir = state_dir / "pods"
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        self.image_map = image_map
        self.api_host = api_host
        self.api_port = api_port
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.max_pods = pods
        self.marker = os.environ.get(MARKER_ENV, "")
        self.workers: dict[str, PodWorker] = {}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.kubelet_port = 0
        self._httpd: ThreadingHTTPServer | None = None

    # -- node object -----------------------------------------------------------------------

    def _node_status(self) -> JSON:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        cpu = str(os.cpu_count() or 1)
        res = {
            "cpu": cpu,
            "memory": str(mem),
            "pods": str(self.max_pods),
            "ephemeral-storage": "100Gi",
        }
        ts = now_rfc3339()

        def cond(t: str, status: str, reason: str, msg: str) -> JSON:
            return {
                "type": t,
                "status": status,
                "reason": reason,
                "message": msg,
                "lastHeartbeatTime": ts,
                "lastTransitionTime": self._transition.get(t, ts),
            }

        return {
            "capacity": res,
            "allocatable": res,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "ok"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "ok"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "ok"),
                cond("Ready", "True", "KubeletReady", "process node is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": os.uname().release,
                "osImage": "swarmkit process node",
                "containerRuntimeVersion": "process://0.1.0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                    os.uname().machine, os.uname().machine
                ),
            },
        }

    _transition: dict[str, str] = {}

    def register(self) -> None:
        self._transition = {}
        arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": arch,
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": arch,
            "swarmkit.dev/process-node": "true",
        }
        try:
            node = self.client.get(f"/api/v1/nodes/{self.name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            node = self.client.create(
                "/api/v1/nodes",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": self.name, "labels": labels},
                },
            )
            log.info("registered node %s", self.name)
        for c in node.get("status", {}).get("conditions") or []:
            if c.get("type") == "Ready" and c.get("status") == "True":
                self._transition["Ready"] = c.get("lastTransitionTime") or now_rfc3339()
        self.client.merge_patch(
            f"/api/v1/nodes/{self.name}/status", {"status": self._node_status()}
        )
        taints = node.get("spec", {}).get("taints") or []
        kept = [t for t in taints if t.get("key") not in NOT_READY_TAINTS]
        patch: JSON = {"metadata": {"labels": labels}}
        if len(kept) != len(taints):
            patch["spec"] = {"taints": kept or None}
        self.client.merge_patch(f"/api/v1/nodes/{self.name}", patch)
        self._renew_lease()

    def _renew_lease(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}"
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": 40, "renewTime": now_micro()}
        try:
            self.client.merge_patch(path, {"spec": spec})
        except ApiError as exc:
            if exc.status != 404:
                raise
            self.client.create(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": "kube-node-lease"},
                    "spec": spec,
                },
            )

    def _heartbeat_loop(self) -> None:
        last_status = time.monotonic()
        while not self.stop_event.wait(10):
            try:
                self._renew_lease()
                if time.monotonic() - last_status > 40:
                    self.client.merge_patch(
                        f"/api/v1/nodes/{self.name}/status", {"status": self._node_status()}
                    )
                    last_status = time.monotonic()
            except Exception as exc:  # keep beating
                log.warning("heartbeat failed: %s", exc)

    # -- pod watch -------------------------------------------------------------------------

    def _dispatch(self, pod: JSON) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            w = self.workers.get(uid)
            if w is None:
                w = PodWorker(self, pod)
                self.workers[uid] = w
                w.start()
            else:
                w.update(pod)

    def _gone(self, uid: str) -> None:
        with self.lock:
            w = self.workers.pop(uid, None)
        if w is not None:
            w.gone()

    def _watch_loop(self) -> None:
        selector = f"spec.nodeName={self.name}"
        rv: str | None = None
        while not self.stop_event.is_set():
            try:
                if rv is None:
                    lst = self.client.get("/api/v1/pods", fieldSelector=selector)
                    rv = lst["metadata"]["resourceVersion"]
                    seen = set()
                    for pod in lst.get("items", []):
                        seen.add(pod["metadata"]["uid"])
                        self._dispatch(pod)
                    with self.lock:
                        stale = [u for u in self.workers if u not in seen]
                    for u in stale:
                        self._gone(u)
                for ev in self.client.watch(
                    "/api/v1/pods", resource_version=rv, timeout_seconds=55, fieldSelector=selector
                ):
                    if self.stop_event.is_set():
                        return
                    typ, obj = ev.get("type"), ev.get("object") or {}
                    if typ == "ERROR":
                        if obj.get("code") == 410:
                            rv = None
                        else:
                            log.warning("watch error: %s", obj.get("message"))
                            rv = None
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if typ in ("ADDED", "MODIFIED"):
                        self._dispatch(obj)
                    elif typ == "DELETED":
                        self._gone(obj["metadata"]["uid"])
            except ApiError as exc:
                if exc.status == 410:
                    rv = None
                    continue
                log.warning("pod watch failed: %s", exc)
                rv = None
                self.stop_event.wait(1)
            except Exception as exc:
                log.warning("pod watch failed: %s", exc)
                rv = None
                self.stop_event.wait(1)

    # -- logs endpoint ---------------------------------------------------------------------

    def _start_log_server(self) -> None:
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("kubelet-api: " + format, *args)

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(url.query)
                parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
                if parts == ["healthz"]:
                    self._send(200, b"ok")
                    return
                if len(parts) != 4 or parts[0] != "containerLogs":
                    self._send(404, b"not found")
                    return
                ns, pod, container = parts[1:]
                path = node.pods_dir / f"{ns}_{pod}" / f"{container}.log"
                if not path.exists():
                    self._send(404, f"no logs for {ns}/{pod}/{container}".encode())
                    return
                follow = q.get("follow", ["false"])[0] == "true"
                tail = q.get("tailLines", [None])[0]
                limit = q.get("limitBytes", [None])[0]
                data = path.read_bytes()
                if tail is not None:
                    lines = data.splitlines(keepends=True)
                    data = b"".join(lines[-int(tail) :]) if int(tail) > 0 else b""
                if limit is not None:
                    data = data[: int(limit)]
                if not follow:
                    self._send(200, data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                offset = path.stat().st_size
                try:
                    self._chunk(data)
                    idle = 0.0
                    while not node.stop_event.is_set():
                        size = path.stat().st_size
                        if size > offset:
                            with open(path, "rb") as fh:
                                fh.seek(offset)
                                chunk = fh.read(size - offset)
                            offset = size
                            self._chunk(chunk)
                            idle = 0.0
                            continue
                        if not node.container_running(ns, pod, container):
                            idle += 0.2
                            if idle > 1.0:
                                break
                        time.sleep(0.2)
                    self._chunk(b"")
                except (BrokenPipeError, ConnectionError):
                    pass

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        if self.tls_cert and self.tls_key:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.tls_cert, self.tls_key)
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        self.kubelet_port = httpd.server_address[1]
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, name="kubelet-api", daemon=True).start()

    def container_running(self, ns: str, pod: str, container: str) -> bool:
        with self.lock:
            workers = list(self.workers.values())
        for w in workers:
            md = w.pod["metadata"]
            if md["namespace"] == ns and md["name"] == pod:
                c = w.containers.get(container)
                return bool(c and (c.running or not c.done))
        return False

    # -- main ------------------------------------------------------------------------------

    def run(self) -> None:
        self._start_log_server()
        deadline = time.monotonic() + 60
        while True:
            try:
                self.register()
                break
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise
                log.info("waiting for the apiserver to register the node: %s", exc)
                time.sleep(1)
        log.info("node %s ready (kubelet port %d)", self.name, self.kubelet_port)
        threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True).start()
        self._watch_loop()

    def shutdown(self) -> None:
        self.stop_event.set()
        with self.lock:
            workers = list(self.workers.values())
        for w in workers:
            w.kill_all(grace=2.0)
        if self._httpd is not None:
            self._httpd.shutdown()


# -- pods ---------------------------------------------------------------------------------------


class PodWorker(threading.Thread):
    def __init__(self, node: ProcessNode, pod: JSON) -> None:
        md = pod["metadata"]
        super().__init__(name=f"pod-{md['namespace']}/{md['name']}", daemon=True)
        self.node = node
        self.client = node.client
        self.pod = pod
        self.ns: str = md["namespace"]
        self.pod_name: str = md["name"]
        self.uid: str = md["uid"]
        self.wake = threading.Event()
        self.removed = False
        self.dir = node.pods_dir / f"{self.ns}_{self.pod_name}"
        self.containers: dict[str, ContainerRun] = {}
        spec = pod.get("spec", {})
        for c in spec.get("initContainers") or []:
            sidecar = c.get("restartPolicy") == "Always"
            self.containers[c["name"]] = ContainerRun(c["name"], c, init=True, sidecar=sidecar)
        for c in spec.get("containers") or []:
            self.containers[c["name"]] = ContainerRun(c["name"], c)
        self.phase = "Pending"
        self.reason: str | None = None
        self.message: str | None = None
        self.start_time = (pod.get("status") or {}).get("startTime") or now_rfc3339()
        self.conditions: dict[str, JSON] = {}
        self.tokens: list[tuple[float, JSON, Path]] = []  # (refresh_at, source, file)
        self.prepared: dict[str, tuple[list[str], dict[str, str], str, Path]] = {}
        self.finished = False
        self.initialized = not any(c.init for c in self.containers.values())
        self.stopping = False  # no more restarts
        self._deleting = bool(md.get("deletionTimestamp"))

    # -- events from the node --------------------------------------------------------------

    def update(self, pod: JSON) -> None:
        self._set_pod(pod)
        self.wake.set()

    def _set_pod(self, pod: JSON) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            self._deleting = True
        self.pod = pod

    def gone(self) -> None:
        self.removed = True
        self.wake.set()

    @property
    def deleting(self) -> bool:
        return self.removed or self._deleting

    # -- status ----------------------------------------------------------------------------

    def _cond(self, typ: str, status: bool, reason: str | None = None) -> None:
        s = "True" if status else "False"
        old = self.conditions.get(typ)
        if old and old["status"] == s and old.get("reason") == reason:
            return
        c: JSON = {
            "type": typ,
            "status": s,
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
        if reason:
            c["reason"] = reason
        self.conditions[typ] = c

    def _container_status(self, c: ContainerRun) -> JSON:
        st: JSON = {
            "name": c.name,
            "image": c.spec.get("image", ""),
            "imageID": "",
            "ready": c.running,
            "restartCount": c.restart_count,
            "started": c.running,
            "state": c.state,
        }
        if c.proc is not None:
            st["containerID"] = f"process://{c.proc.pid}"
        if c.last_state:
            st["lastState"] = c.last_state
        return st

    def push_status(self) -> None:
        if self.removed:
            return
        regular = [c for c in self.containers.values() if not c.init]
        inits = [c for c in self.containers.values() if c.init]
        self._cond("PodScheduled", True)
        self._cond("Initialized", self.initialized)
        ready = self.phase == "Running" and all(c.running for c in regular)
        terminal = self.phase in ("Succeeded", "Failed")
        self._cond("ContainersReady", ready, "PodCompleted" if terminal else None)
        self._cond("Ready", ready, "PodCompleted" if terminal else None)
        self._cond("PodReadyToStartContainers", True)
        existing = (self.pod.get("status") or {}).get("conditions") or []
        conds = [c for c in existing if c.get("type") not in self.conditions]
        conds += list(self.conditions.values())
        status: JSON = {
            "phase": self.phase,
            "conditions": conds,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.start_time,
            "containerStatuses": [self._container_status(c) for c in regular],
            "reason": self.reason,
            "message": self.message,
        }
        if inits:
            status["initContainerStatuses"] = [self._container_status(c) for c in inits]
        try:
            self._set_pod(
                self.client.merge_patch(
                    pod_path(self.ns, self.pod_name, "status"), {"status": status}
                )
            )
        except ApiError as exc:
            if exc.status == 404:
                self.removed = True
            else:
                log.warning("%s/%s: status update failed: %s", self.ns, self.pod_name, exc)
        except Exception as exc:
            log.warning("%s/%s: status update failed: %s", self.ns, self.pod_name, exc)

    # -- main loop -------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except Exception:
            log.exception("%s/%s: worker crashed", self.ns, self.pod_name)
            self.kill_all(grace=0.5)
            if not self.deleting:
                self.phase = "Failed"
                self.reason = "ProcessNodeError"
                self.message = "the process node failed to run this pod; see the node log"
                self.push_status()
            self._finalize_delete()
        finally:
            self.finished = True

    def _run(self) -> None:
        phase = (self.pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            self.finished = True
            return
        if phase == "Running" and not self.deleting:
            # A previous incarnation of the node ran this pod; its processes are gone.
            self._kill_orphans()
            policy = self.pod["spec"].get("restartPolicy", "Always")
            if policy == "Never":
                self.phase = "Failed"
                self.reason = "ProcessNodeRestarted"
                self.message = "the process node restarted; the pod's processes were lost"
                self.push_status()
                return
        if self.deleting:
            self._kill_orphans()
            self._finalize_delete()
            return
        self._setup_dir()
        self.push_status()
        # Images.
        unknown = []
        for c in self.containers.values():
            rule = self.node.image_map.resolve(c.spec.get("image", ""))
            if rule is None:
                unknown.append(c)
        if unknown:
            for c in unknown:
                c.state = {
                    "waiting": {
                        "reason": "ErrImagePull",
                        "message": (
                            f'image "{c.spec.get("image")}" is not known to the process node '
                            f"({self.node.image_map.source}); add a rule with "
                            "--image-map/$SWARMKIT_NODE_IMAGE_MAP"
                        ),
                    }
                }
            self.push_status()
            while not self.deleting:
                self.wake.wait(5)
                self.wake.clear()
            self._finalize_delete()
            return
        # Volumes and env (retried like the kubelet until they resolve).
        attempts = 0
        while True:
            if self.deleting:
                self._finalize_delete()
                return
            try:
                self._prepare()
                break
            except (ConfigError, ApiError) as exc:
                attempts += 1
                log.info("%s/%s: not ready to start (%s); retrying", self.ns, self.pod_name, exc)
                for c in self.containers.values():
                    c.state = {
                        "waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}
                    }
                self.push_status()
                self.wake.wait(min(2.0, 0.2 * attempts))
                self.wake.clear()
        self._lifecycle()

    def _setup_dir(self) -> None:
        uid_file = self.dir / ".uid"
        if self.dir.exists() and (not uid_file.exists() or uid_file.read_text() != self.uid):
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        uid_file.write_text(self.uid)

    def _kill_orphans(self) -> None:
        for pidfile in self.dir.glob("*.pid") if self.dir.exists() else []:
            try:
                pid = int(pidfile.read_text())
                if _has_marker(pid, self.node.marker):
                    os.killpg(pid, signal.SIGKILL)
            except (ValueError, OSError):
                pass

    # -- lifecycle -------------------------------------------------------------------------

    def _deadline(self) -> float | None:
        ads = self.pod["spec"].get("activeDeadlineSeconds")
        start = parse_time(self.start_time)
        if ads is None or start is None:
            return None
        return start + float(ads)

    def _lifecycle(self) -> None:
        policy = self.pod["spec"].get("restartPolicy", "Always")
        inits = [c for c in self.containers.values() if c.init]
        regular = [c for c in self.containers.values() if not c.init]
        stage = "init"
        init_idx = 0
        while True:
            self.wake.clear()
            if self.deleting:
                self.kill_all(self._grace())
                self._settle_after_kill(policy)
                self._finalize_delete()
                return
            deadline = self._deadline()
            if deadline is not None and time.time() >= deadline:
                self.kill_all(0.5)
                self._settle_after_kill(policy)
                self.phase = "Failed"
                self.reason = "DeadlineExceeded"
                self.message = "Pod was active on the node longer than the specified deadline"
                self.push_status()
                self._wait_for_deletion()
                return
            self._refresh_tokens()
            changed = self._reap()
            if stage == "init":
                if init_idx >= len(inits):
                    stage = "main"
                    self.initialized = True
                    continue
                c = inits[init_idx]
                if c.sidecar:
                    if not c.running:
                        self._start(c)
                        changed = True
                    init_idx += 1
                    continue
                if c.done:
                    init_idx += 1
                    continue
                if c.proc is None or not c.running:
                    if c.proc is not None:  # exited non-zero
                        code = c.state.get("terminated", {}).get("exitCode", 1)
                        if policy == "Never":
                            c.done = True
                            self.kill_all(0.5)
                            self.phase = "Failed"
                            self.push_status()
                            self._wait_for_deletion()
                            return
                        if code == 0:
                            c.done = True
                            continue
                    if time.monotonic() >= c.next_start:
                        self._start(c)
                        changed = True
            else:
                for c in regular:
                    if c.proc is None and not c.done and time.monotonic() >= c.next_start:
                        self._start(c)
                        changed = True
                if self.phase == "Pending" and all(c.proc is not None for c in regular):
                    self.phase = "Running"
                    changed = True
                if all(c.done for c in regular):
                    for c in inits:
                        if c.sidecar:
                            self._stop(c, 1.0)
                            c.done = True
                    failed = any(
                        c.state.get("terminated", {}).get("exitCode", 0) != 0 for c in regular
                    )
                    self.phase = "Failed" if failed else "Succeeded"
                    self.push_status()
                    self._cleanup_tokens()
                    self._wait_for_deletion()
                    return
            if changed:
                self.push_status()
            wait = 1.0
            pending = [
                c.next_start for c in self.containers.values() if c.proc is None and not c.done
            ]
            if pending:
                wait = max(0.05, min(wait, min(pending) - time.monotonic()))
            if deadline is not None:
                wait = max(0.05, min(wait, deadline - time.time()))
            self.wake.wait(wait)

    def _reap(self) -> bool:
        """Record exits; schedule restarts per restartPolicy. True when something changed."""
        policy = self.pod["spec"].get("restartPolicy", "Always")
        changed = False
        for c in self.containers.values():
            if c.proc is None or c.proc.returncode is None:
                continue
            if "terminated" in c.state:
                continue
            code = c.proc.returncode
            if code < 0:
                code = 128 - code
            with contextlib.suppress(OSError):
                os.killpg(c.proc.pid, signal.SIGKILL)  # leftovers of the container's group
            c.state = {
                "terminated": {
                    "exitCode": code,
                    "reason": "Completed" if code == 0 else "Error",
                    "message": self._termination_message(c, code),
                    "startedAt": c.started_at,
                    "finishedAt": now_rfc3339(),
                    "containerID": f"process://{c.proc.pid}",
                }
            }
            if c.state["terminated"]["message"] is None:
                del c.state["terminated"]["message"]
            changed = True
            restart = (
                c.sidecar
                or (policy == "Always" and not c.init)
                or (policy == "OnFailure" and code != 0)
                or (c.init and policy != "Never" and code != 0)
            )
            if self.deleting or self.stopping:
                restart = False
            if restart:
                c.last_state = c.state
                c.restart_count += 1
                c.proc = None
                c.next_start = time.monotonic() + min(10.0, 0.5 * 2 ** (c.restart_count - 1))
                c.state = {"waiting": {"reason": "CrashLoopBackOff" if code else "Completed"}}
            elif (c.init and code == 0) or not c.init:
                c.done = True
        return changed

    def _settle_after_kill(self, policy: str) -> None:
        for c in self.containers.values():
            if c.proc is not None:
                c.proc.wait()
        self._reap()
        for c in self.containers.values():
            c.done = True
        regular = [c for c in self.containers.values() if not c.init]
        ran = [c for c in regular if "terminated" in c.state]
        if ran:
            failed = any(c.state["terminated"]["exitCode"] != 0 for c in ran)
            self.phase = "Failed" if failed or len(ran) != len(regular) else "Succeeded"
        elif self.phase != "Pending":
            self.phase = "Failed"
        self._cleanup_tokens()

    def _wait_for_deletion(self) -> None:
        while not self.deleting:
            self.wake.wait(5)
            self.wake.clear()
        self._finalize_delete()

    def _finalize_delete(self) -> None:
        if self.removed:
            return
        md = self.pod["metadata"]
        if not md.get("deletionTimestamp"):
            return
        if any(c.proc is not None for c in self.containers.values()):
            self.push_status()
        try:
            self.client.delete(
                pod_path(self.ns, self.pod_name),
                {
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": self.uid},
                },
            )
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("%s/%s: delete failed: %s", self.ns, self.pod_name, exc)

    def _grace(self) -> float:
        md = self.pod["metadata"]
        g = md.get("deletionGracePeriodSeconds")
        if g is None:
            g = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        return min(float(g), GRACE_CAP_SECONDS)

    def _stop(self, c: ContainerRun, grace: float) -> None:
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

    def kill_all(self, grace: float) -> None:
        self.stopping = True
        procs = [c for c in self.containers.values() if c.running and c.proc is not None]
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

    # -- preparing containers ---------------------------------------------------------------

    def _prepare(self) -> None:
        vol_dir = self.dir / "volumes"
        vol_dir.mkdir(exist_ok=True)
        self.tokens = []
        volumes: dict[str, Path] = {}
        for v in self.pod["spec"].get("volumes") or []:
            volumes[v["name"]] = self._materialize(v, vol_dir / v["name"])
        self.prepared = {}
        for c in self.containers.values():
            self.prepared[c.name] = self._prepare_container(c, volumes)

    def _materialize(self, vol: JSON, target: Path) -> Path:
        if target.is_symlink():
            target.unlink()
        if "hostPath" in vol:
            host = Path(vol["hostPath"]["path"])
            if vol["hostPath"].get("type") in ("DirectoryOrCreate",):
                host.mkdir(parents=True, exist_ok=True)
            if target.exists():
                shutil.rmtree(target)
            target.symlink_to(host)
            return target
        target.mkdir(parents=True, exist_ok=True)
        if "emptyDir" in vol:
            return target
        if "configMap" in vol:
            self._project_configmap(vol["configMap"], target, vol["configMap"].get("defaultMode"))
        elif "secret" in vol:
            self._project_secret(vol["secret"], target, vol["secret"].get("defaultMode"))
        elif "downwardAPI" in vol:
            self._project_downward(
                vol["downwardAPI"], target, vol["downwardAPI"].get("defaultMode")
            )
        elif "projected" in vol:
            mode = vol["projected"].get("defaultMode")
            for src in vol["projected"].get("sources") or []:
                if "serviceAccountToken" in src:
                    self._project_token(src["serviceAccountToken"], target, mode)
                elif "configMap" in src:
                    self._project_configmap(src["configMap"], target, mode)
                elif "secret" in src:
                    self._project_secret(src["secret"], target, mode)
                elif "downwardAPI" in src:
                    self._project_downward(src["downwardAPI"], target, mode)
                else:
                    log.warning(
                        "%s/%s: unsupported projected source %s", self.ns, self.pod_name, list(src)
                    )
        else:
            log.warning(
                "%s/%s: volume %s has an unsupported type; using an empty directory",
                self.ns,
                self.pod_name,
                vol["name"],
            )
        return target

    def _write_items(
        self,
        target: Path,
        data: dict[str, bytes],
        items: list[JSON] | None,
        mode: int | None,
        what: str,
    ) -> None:
        default_mode = 0o644 if mode is None else int(mode)
        if items:
            for it in items:
                if it["key"] not in data:
                    raise ConfigError(f'{what}: key "{it["key"]}" not found')
                _write_file(target / it["path"], data[it["key"]], int(it.get("mode", default_mode)))
        else:
            for k, v in data.items():
                _write_file(target / k, v, default_mode)

    def _get(self, kind: str, name: str, optional: bool) -> JSON | None:
        try:
            return self.client.get(f"/api/v1/namespaces/{self.ns}/{kind}/{name}")
        except ApiError as exc:
            if exc.status == 404:
                if optional:
                    return None
                raise ConfigError(f'{kind[:-1]} "{name}" not found') from exc
            raise

    def _configmap_data(self, name: str, optional: bool) -> dict[str, bytes] | None:
        cm = self._get("configmaps", name, optional)
        if cm is None:
            return None
        data = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
        return data

    def _secret_data(self, name: str, optional: bool) -> dict[str, bytes] | None:
        s = self._get("secrets", name, optional)
        if s is None:
            return None
        return {k: base64.b64decode(v) for k, v in (s.get("data") or {}).items()}

    def _project_configmap(self, src: JSON, target: Path, mode: int | None) -> None:
        data = self._configmap_data(src["name"], bool(src.get("optional")))
        if data is not None:
            self._write_items(target, data, src.get("items"), mode, f'configmap "{src["name"]}"')

    def _project_secret(self, src: JSON, target: Path, mode: int | None) -> None:
        name = src.get("secretName") or src.get("name") or ""
        data = self._secret_data(name, bool(src.get("optional")))
        if data is not None:
            self._write_items(target, data, src.get("items"), mode, f'secret "{name}"')

    def _project_downward(self, src: JSON, target: Path, mode: int | None) -> None:
        for it in src.get("items") or []:
            if "fieldRef" in it:
                value = self._field_value(it["fieldRef"]["fieldPath"], multiline=True)
            else:
                value = self._resource_value(it["resourceFieldRef"], None)
            m = int(it.get("mode", 0o644 if mode is None else mode))
            _write_file(target / it["path"], value.encode(), m)

    def _project_token(self, src: JSON, target: Path, mode: int | None) -> None:
        path = target / src.get("path", "token")
        self._issue_token(src, path, 0o600 if mode is None else int(mode))

    def _issue_token(self, src: JSON, path: Path, mode: int) -> None:
        sa = self.pod["spec"].get("serviceAccountName") or "default"
        exp = int(src.get("expirationSeconds") or 3600)
        body: JSON = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [src["audience"]] if src.get("audience") else [],
                "expirationSeconds": exp,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": self.pod_name,
                    "uid": self.uid,
                },
            },
        }
        res = self.client.create(f"/api/v1/namespaces/{self.ns}/serviceaccounts/{sa}/token", body)
        _write_file(path, res["status"]["token"].encode(), mode)
        expires = parse_time(res["status"].get("expirationTimestamp")) or time.time() + exp
        refresh_at = time.time() + 0.8 * max(60.0, expires - time.time())
        self.tokens = [t for t in self.tokens if t[2] != path] + [
            (refresh_at, {**src, "_mode": mode}, path)
        ]

    def _refresh_tokens(self) -> None:
        for refresh_at, src, path in list(self.tokens):
            if time.time() >= refresh_at:
                try:
                    self._issue_token(src, path, int(src["_mode"]))
                except Exception as exc:
                    log.warning("%s/%s: token refresh failed: %s", self.ns, self.pod_name, exc)

    def _cleanup_tokens(self) -> None:
        self.tokens = []

    def _field_value(self, field_path: str, multiline: bool = False) -> str:
        md = self.pod["metadata"]
        spec = self.pod["spec"]
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", field_path)
        if m:
            return str((md.get(m.group(1)) or {}).get(m.group(2), ""))
        simple = {
            "metadata.name": md.get("name", ""),
            "metadata.namespace": md.get("namespace", ""),
            "metadata.uid": md.get("uid", ""),
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "status.podIP": "127.0.0.1",
            "status.podIPs": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
            "status.hostIPs": "127.0.0.1",
        }
        if field_path in simple:
            return str(simple[field_path])
        if field_path in ("metadata.labels", "metadata.annotations") and multiline:
            items = sorted((md.get(field_path.split(".")[1]) or {}).items())
            return "\n".join(f"{k}={json.dumps(v)}" for k, v in items)
        raise ConfigError(f"unsupported fieldRef {field_path!r}")

    def _resource_value(self, ref: JSON, container: str | None) -> str:
        cname = ref.get("containerName") or container
        c = next(
            (x for x in self.pod["spec"].get("containers", []) if x["name"] == cname),
            None,
        )
        if c is None:
            raise ConfigError(f"resourceFieldRef: container {cname!r} not found")
        kind, _, res = ref["resource"].partition(".")
        value = ((c.get("resources") or {}).get(kind) or {}).get(res)
        if value is None:
            status = self.node._node_status()["allocatable"]
            value = status.get(res, "0")
        divisor = parse_quantity(ref.get("divisor") or "1")
        return str(math.ceil(parse_quantity(value) / divisor))

    def _prepare_container(
        self, c: ContainerRun, volumes: dict[str, Path]
    ) -> tuple[list[str], dict[str, str], str, Path]:
        root = self.dir / "root" / c.name
        for sub in ("tmp", "root", "dev"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        mounts: list[tuple[str, Path]] = []
        for m in sorted(c.spec.get("volumeMounts") or [], key=lambda m: len(m["mountPath"])):
            src = volumes.get(m["name"])
            if src is None:
                raise ConfigError(f'volume "{m["name"]}" not found')
            if m.get("subPath"):
                src = src / m["subPath"]
                if not src.exists():
                    src.mkdir(parents=True, exist_ok=True)
            mount_path = "/" + m["mountPath"].strip("/")
            link = Path(str(root) + mount_path)
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.is_file():
                link.unlink()
            elif link.is_dir():
                shutil.rmtree(link)
            link.symlink_to(src.resolve())
            mounts.append((mount_path, link))
        mount_paths = sorted((mp for mp, _ in mounts), key=len, reverse=True)

        def rewrite(value: str) -> str:
            for candidate_start in _path_starts(value):
                tail = value[candidate_start:]
                for mp in mount_paths:
                    if tail == mp or tail.startswith(mp + "/"):
                        return value[:candidate_start] + str(root) + tail
            return value

        rule = self.node.image_map.resolve(c.spec.get("image", ""))
        assert rule is not None
        env: dict[str, str] = {
            "PATH": os.path.dirname(sys.executable)
            + os.pathsep
            + os.environ.get("PATH", "/usr/bin:/bin"),
            "HOSTNAME": self.pod_name,
            "HOME": str(root / "root"),
            "TMPDIR": str(root / "tmp"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "KUBERNETES_SERVICE_HOST": self.node.api_host,
            "KUBERNETES_SERVICE_PORT": str(self.node.api_port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(self.node.api_port),
            "KUBERNETES_PORT": f"tcp://{self.node.api_host}:{self.node.api_port}",
            "SWARMKIT_PATH_PREFIX": str(root),
            "SWARMKIT_POD_DIR": str(self.dir),
        }
        if self.node.marker:
            env[MARKER_ENV] = self.node.marker
        env.update({k: _subst(v) for k, v in rule.env})
        for ef in c.spec.get("envFrom") or []:
            prefix = ef.get("prefix", "")
            if "configMapRef" in ef:
                ref = ef["configMapRef"]
                data = self._configmap_data(ref["name"], bool(ref.get("optional")))
            else:
                ref = ef["secretRef"]
                data = self._secret_data(ref["name"], bool(ref.get("optional")))
            for k, v in (data or {}).items():
                env[prefix + k] = v.decode(errors="replace")
        for e in c.spec.get("env") or []:
            if "valueFrom" in e:
                value = self._env_from(e["valueFrom"], c.name)
                if value is None:
                    continue
            else:
                value = expand_vars(e.get("value", ""), env)
            env[e["name"]] = rewrite(value)
        argv = build_argv(rule, c.spec)
        argv = [rewrite(expand_vars(a, env)) for a in argv]
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
        return argv, env, cwd, tfile

    def _env_from(self, vf: JSON, container: str) -> str | None:
        if "secretKeyRef" in vf:
            ref = vf["secretKeyRef"]
            data = self._secret_data(ref["name"], bool(ref.get("optional")))
            kind = "secret"
        elif "configMapKeyRef" in vf:
            ref = vf["configMapKeyRef"]
            data = self._configmap_data(ref["name"], bool(ref.get("optional")))
            kind = "configmap"
        elif "fieldRef" in vf:
            return self._field_value(vf["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in vf:
            return self._resource_value(vf["resourceFieldRef"], container)
        else:
            raise ConfigError(f"unsupported valueFrom {list(vf)}")
        if data is None:
            return None
        if ref["key"] not in data:
            if ref.get("optional"):
                return None
            raise ConfigError(f"couldn't find key {ref['key']} in {kind} {self.ns}/{ref['name']}")
        return data[ref["key"]].decode(errors="replace")

    # -- processes -------------------------------------------------------------------------

    def _start(self, c: ContainerRun) -> None:
        argv, env, cwd, tfile = self.prepared[c.name]
        with contextlib.suppress(FileNotFoundError):
            tfile.unlink()
        logf = open(self.dir / f"{c.name}.log", "ab")  # noqa: SIM115
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
        (self.dir / f"{c.name}.pid").write_text(str(c.proc.pid))
        c.exit_event.clear()
        proc = c.proc

        def waiter() -> None:
            proc.wait()
            c.exit_event.set()
            self.wake.set()

        threading.Thread(target=waiter, name=f"wait-{c.name}", daemon=True).start()
        log.info("%s/%s: started %s pid %d: %s", self.ns, self.pod_name, c.name, proc.pid, argv)

    def _termination_message(self, c: ContainerRun, code: int) -> str | None:
        tfile = self.prepared[c.name][3]
        msg = ""
        with contextlib.suppress(OSError):
            msg = tfile.read_bytes()[:4096].decode(errors="replace")
        if (
            not msg
            and code != 0
            and c.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError"
        ):
            with contextlib.suppress(OSError):
                lines = (self.dir / f"{c.name}.log").read_bytes().splitlines()[-80:]
                msg = b"\n".join(lines)[-2048:].decode(errors="replace")
        return msg or None


def _path_starts(value: str) -> list[int]:
    """Offsets where an absolute path may begin: the start, or right after the first '='."""
    starts = [0]
    eq = value.find("=")
    if eq >= 0:
        starts.append(eq + 1)
    return [s for s in starts if value[s : s + 1] == "/"]


def _write_file(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode & 0o777 | 0o600)
    os.replace(tmp, path)


def _has_marker(pid: int, marker: str) -> bool:
    if not marker:
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in environ.split(b"\0")


# -- entry point --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m swarmkit_devcluster.process_node")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--name", default=os.environ.get("SWARMKIT_NODE_NAME", DEFAULT_NODE_NAME))
    p.add_argument("--state-dir", default=None, help="pod directories go to <state-dir>/pods")
    p.add_argument("--image-map", default=os.environ.get("SWARMKIT_NODE_IMAGE_MAP"))
    p.add_argument("--tls-cert", default=None, help="serving cert for the kubelet (logs) port")
    p.add_argument("--tls-key", default=None)
    p.add_argument("--max-pods", type=int, default=110)
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(threadName)s: %(message)s",
    )
    try:
        image_map = ImageMap.load(args.image_map)
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        log.error("cannot load the image table %s: %s", args.image_map, exc)
        return 2
    client = KubeClient.from_kubeconfig(args.kubeconfig)
    state_dir = Path(args.state_dir or Path(args.kubeconfig).resolve().parent)
    node = ProcessNode(
        client,
        name=args.name,
        state_dir=state_dir,
        image_map=image_map,
        api_host=client.host,
        api_port=client.port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        pods=args.max_pods,
    )

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping pods and exiting", signum)
        node.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    node.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
