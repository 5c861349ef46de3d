"""Start, find and stop the local control plane (etcd → kube-apiserver → controller-manager →
scheduler → process node), plus the background operator.

Everything lives in a *state directory* (``<repo>/.cluster`` for ``make cluster-up``, a temp dir
for the test fixtures): ``state.json`` (pids, ports), ``kubeconfig`` (admin), ``pki/``,
``logs/<component>.log``, ``pods/<ns>_<pod>/`` (process-node pods), ``bin/`` (kubectl, helm).
Every process started here carries ``SWARMKIT_DEVCLUSTER_ID=<id>`` in its environment, so
``stop()`` can also find and kill strays (e.g. grandchildren that left their process group).

The components' command lines are in :mod:`swarmkit_devcluster.components`; pid, port and log
helpers in :mod:`swarmkit_devcluster.procs`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from swarmkit_devcluster import jaeger
from swarmkit_devcluster import pki as pkimod
from swarmkit_devcluster import realnode as rn
from swarmkit_devcluster import realnode_dns as rn_dns
from swarmkit_devcluster.build import BuildError, ensure_built
from swarmkit_devcluster.components import (
    COMPONENTS,
    CONTROLLERS,
    apiserver_cmd,
    controller_manager_cmd,
    etcd_cmd,
    process_node_cmd,
    scheduler_cmd,
)
from swarmkit_devcluster.kubeapi import ApiError, KubeClient
from swarmkit_devcluster.laps import Laps
from swarmkit_devcluster.locks import exclusive
from swarmkit_devcluster.paths import binary, cache_root, default_state_dir, repo_root
from swarmkit_devcluster.process_node import DEFAULT_NODE_NAME, MARKER_ENV
from swarmkit_devcluster.procs import (
    Proc,
    free_port,
    port_in_use,
    proc_start_time,
    processes_with_marker,
    tail,
)

__all__ = [
    "COMPONENTS",
    "CONTROLLERS",
    "STOP_ORDER",
    "ClusterError",
    "LocalCluster",
    "Proc",
    "free_port",
    "port_in_use",
    "proc_start_time",
    "processes_with_marker",
    "tail",
    "write_kubeconfig",
]

T = TypeVar("T")

STOP_ORDER = (
    "operator",
    "process-node",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
)


class ClusterError(RuntimeError):
    """The cluster could not be started/used; the message says why and what to do."""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class LocalCluster:
    """A local control plane in ``state_dir``.

    >>> c = LocalCluster("/tmp/x").start()   # reuses one already running there
    >>> c.kubectl("get", "nodes").stdout
    >>> c.stop()
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        node_name: str = DEFAULT_NODE_NAME,
        image_map: str | None = None,
        apiserver_port: int | None = None,
        start_timeout: float = 90.0,
        verbose: bool = True,
        real_node: bool | None = None,
    ) -> None:
        self.state_dir = Path(state_dir).resolve() if state_dir else default_state_dir()
        self.node_name = node_name
        self.image_map = image_map or os.environ.get("SWARMKIT_NODE_IMAGE_MAP")
        env_port = os.environ.get("SWARMKIT_APISERVER_PORT")
        self.apiserver_port = apiserver_port or (int(env_port) if env_port else None)
        self.start_timeout = start_timeout
        self.verbose = verbose
        # Opt-in (issue 38): a kubelet node beside the process node; root, one per machine.
        self.real_node = os.environ.get("REAL_NODE") == "1" if real_node is None else real_node
        self.state: dict[str, Any] = {}
        self._popen: dict[str, subprocess.Popen[bytes]] = {}
        self._client: KubeClient | None = None

    # -- paths -----------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def bin_dir(self) -> Path:
        return self.state_dir / "bin"

    @property
    def pods_dir(self) -> Path:
        return self.state_dir / "pods"

    @property
    def server(self) -> str:
        return str(self.state["server"])

    @property
    def cluster_id(self) -> str:
        return str(self.state["id"])

    def log_path(self, component: str) -> Path:
        if component == "operator":
            return self.state_dir / "operator.log"
        return self.logs_dir / f"{component}.log"

    def _say(self, msg: str) -> None:
        if self.verbose:
            _say(msg)

    # -- state -----------------------------------------------------------------------------

    def _load(self) -> bool:
        try:
            self.state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            self.state = {}
            return False
        return True

    def _save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2))
        os.replace(tmp, self.state_file)

    def _procs(self) -> dict[str, Proc]:
        return {k: Proc(**v) for k, v in self.state.get("procs", {}).items()}

    def _record(self, p: Proc) -> None:
        self.state.setdefault("procs", {})[p.name] = p.__dict__

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        key = hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:16]
        with exclusive(cache_root() / "locks" / f"{key}.lock"):
            yield

    def is_running(self) -> bool:
        """True when the state file describes a live, healthy control plane."""
        if not self._load():
            return False
        procs = self._procs()
        if any(name not in procs or not procs[name].alive() for name in COMPONENTS):
            return False
        try:
            status, _ = self.client().request_raw("GET", "/readyz", timeout=5)
        except Exception:
            return False
        return status == 200

    def client(self) -> KubeClient:
        if self._client is None:
            self._client = KubeClient.from_kubeconfig(self.kubeconfig)
        return self._client

    # -- start -----------------------------------------------------------------------------

    def start(self) -> LocalCluster:
        """Start the cluster, or reuse the one already running in ``state_dir`` (idempotent)."""
        try:
            ensure_built()
        except BuildError as exc:
            raise ClusterError(str(exc)) from exc
        with self._locked():
            if self.is_running():
                self._say(f"cluster already running ({self.server}, state {self.state_dir})")
                return self
            if self.state_file.exists():
                self._say("found a stale cluster state; cleaning it up first")
                self._stop_locked(Laps())
            if self.apiserver_port and port_in_use(self.apiserver_port):
                raise ClusterError(
                    f"port {self.apiserver_port} on 127.0.0.1 is already in use, so "
                    "kube-apiserver cannot listen on it. Stop whatever uses it (another cluster? "
                    "`make cluster-down`) or choose another port with SWARMKIT_APISERVER_PORT "
                    "(unset = a random free port)."
                )
            t0 = time.monotonic()
            try:
                self._start_locked()
            except BaseException:
                self._say("start-up failed; stopping what was started")
                logs = self.logs_dir
                self._stop_locked(Laps(), remove_state=False)
                with contextlib.suppress(OSError):
                    self.state_file.unlink()
                self._say(f"(component logs kept in {logs})")
                raise
            self.state["startup_seconds"] = round(time.monotonic() - t0, 2)
            self._save()
            self._say(f"cluster up in {time.monotonic() - t0:.1f}s: {self.server}")
        return self

    def _start_locked(self) -> None:
        if self.state_dir.exists():
            for sub in ("pki", "etcd", "pods", "logs", "kubeconfigs"):
                shutil.rmtree(self.state_dir / sub, ignore_errors=True)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        cid = secrets.token_hex(8)
        api_port = self.apiserver_port or free_port()
        ports = {
            "apiserver": api_port,
            "etcd_client": free_port(),
            "etcd_peer": free_port(),
            "controller_manager": free_port(),
            "scheduler": free_port(),
        }
        self.state = {
            "version": 1,
            "id": cid,
            "server": f"https://127.0.0.1:{api_port}",
            "ports": ports,
            "procs": {},
            "node": self.node_name,
        }
        self._save()
        if self.real_node:
            self._claim_real_node()
        pki = pkimod.generate(self.state_dir / "pki")
        ids = pkimod.make_identities(self.node_name)
        pkimod.write_token_file(pki.tokens_csv, ids)
        kcdir = self.state_dir / "kubeconfigs"
        kcdir.mkdir(exist_ok=True)
        ca = pki.ca_crt.read_text()
        write_kubeconfig(self.kubeconfig, self.server, ca, ids["admin"].token, "swarmkit-admin")
        for name in ("controller-manager", "scheduler", "node"):
            write_kubeconfig(kcdir / f"{name}.kubeconfig", self.server, ca, ids[name].token, name)
        self._link_tools()

        etcd_url = f"http://127.0.0.1:{ports['etcd_client']}"
        peer_url = f"http://127.0.0.1:{ports['etcd_peer']}"
        self._spawn("etcd", etcd_cmd(self.state_dir / "etcd", etcd_url, peer_url))
        self._wait_http("etcd", f"{etcd_url}/health", ["etcd"], timeout=30)

        api_cmd = apiserver_cmd(pki, etcd_url, api_port)
        if self.real_node:
            api_cmd += self._real_node_apiserver_args(pki)
        self._spawn("kube-apiserver", api_cmd)
        self._wait_http("kube-apiserver", f"{self.server}/readyz", ["etcd", "kube-apiserver"], 60)

        cm_cmd = controller_manager_cmd(
            pki, kcdir / "controller-manager.kubeconfig", ports["controller_manager"]
        )
        if self.real_node:
            # The not-ready taint a new kubelet node gets is removed the way a cluster does it.
            cm_cmd.append(f"--controllers={','.join([*CONTROLLERS, 'node-lifecycle-controller'])}")
        self._spawn("kube-controller-manager", cm_cmd)
        self._spawn(
            "kube-scheduler", scheduler_cmd(kcdir / "scheduler.kubeconfig", ports["scheduler"])
        )
        self._spawn(
            "process-node",
            process_node_cmd(
                pki, kcdir / "node.kubeconfig", self.state_dir, self.node_name, self.image_map
            ),
        )
        everything = list(COMPONENTS)
        self._wait_http(
            "kube-controller-manager",
            f"https://127.0.0.1:{ports['controller_manager']}/healthz",
            everything,
            60,
        )
        self._wait_http(
            "kube-scheduler", f"https://127.0.0.1:{ports['scheduler']}/healthz", everything, 60
        )
        self._wait_for("the process node to be Ready", self._node_ready, everything, 60)
        self._wait_for(
            "the default ServiceAccount (controller-manager)", self._default_sa, everything, 60
        )
        if self.real_node:
            self._start_real_node(pki, everything)

    # -- the real node (issue 38) -----------------------------------------------------------

    def _claim_real_node(self) -> None:
        """Take the machine's real node (queue behind another cluster), then the host set-up.
        The lock lives in a holder process so it outlasts `make cluster-up`; it is released
        last at `make cluster-down`, after the host is clean."""
        try:
            rn.check_host()
            rn.build_check()
        except rn.RealNodeError as exc:
            raise ClusterError(f"the real node (REAL_NODE=1) cannot start: {exc}") from exc
        fd = rn.acquire_machine_lock(self._say)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"cluster {self.state_dir} (pid {os.getpid()})".encode(), 0)
            holder = [sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"]
            self._spawn("realnode-lock", holder, pass_fds=(fd,))
        finally:
            os.close(fd)
        self.state["real_node"] = True
        self._save()
        rn.teardown(rn.NodePaths())  # whatever a crashed earlier run left
        rn.host_setup(rn.NodePaths())

    def _real_node_apiserver_args(self, pki: pkimod.Pki) -> list[str]:
        """Pods reach the apiserver on the bridge address (the `kubernetes` Service endpoints);
        it authenticates to kubelets with a client certificate. Later flags win. A namespace
        annotated the way an administrator pins tenants to nodes (PodNodeSelector,
        PodTolerationRestriction) sends every pod created in it, the operator's included, to
        the real node."""
        crt, key = pkimod.issue_leaf(
            pki, "apiserver-kubelet-client", "kube-apiserver-kubelet-client",
            orgs=("system:masters",),
        )  # fmt: skip
        return [
            "--bind-address=0.0.0.0",
            f"--advertise-address={rn.BRIDGE_IP}",
            "--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
            f"--kubelet-client-certificate={crt}",
            f"--kubelet-client-key={key}",
        ]

    def _start_real_node(self, pki: pkimod.Pki, watch: list[str]) -> None:
        t0 = time.monotonic()
        p = rn.NodePaths()
        for rule in rn.api_rules(int(self.state["ports"]["apiserver"])):
            rn.run_iptables(rule)
        self._real_node_rbac()
        kc = self._real_node_kubeconfigs(pki)
        (p.root / "containerd.toml").write_text(rn.containerd_config(p))
        env = {**os.environ, "PATH": f"{binary('containerd').parent}:{os.environ['PATH']}"}
        self._spawn("containerd", rn.containerd_cmd(p.root / "containerd.toml"), env=env)
        watch = [*watch, "containerd"]
        self._wait_for("containerd's socket", p.containerd_sock.exists, watch, 30)
        # The project images of this checkout (tests check for them: a missing one would be
        # pulled from its registry instead).
        cache = cache_root() / "realnode-images"
        dns_image = (rn_dns.archive_path(cache), rn_dns.coredns_archive)
        self.state["real_node_images"] = rn.import_images(p, cache, repo_root(), [dns_image])
        crt, key = pkimod.issue_leaf(
            pki, "kubelet-serving", rn.NODE_NAME, ips=(rn.BRIDGE_IP,), server=True
        )
        resolv = p.root / "resolv.conf"
        resolv.write_text("")  # pods must not inherit the host's external nameserver
        (p.root / "kubelet.json").write_text(rn.kubelet_config(p, pki.ca_crt, crt, key, resolv))
        self._spawn("kubelet", rn.kubelet_cmd(p, p.root / "kubelet.json", kc["kubelet"]))
        watch.append("kubelet")
        self._wait_for("the real node to register", self._real_node_registered, watch, 60)
        self.client().merge_patch(
            f"/api/v1/nodes/{rn.NODE_NAME}", {"spec": {"podCIDR": rn.POD_CIDR}}
        )
        (p.root / "kube-proxy.json").write_text(rn.kube_proxy_config(kc["kube-proxy"]))
        self._spawn("kube-proxy", rn.kube_proxy_cmd(p.root / "kube-proxy.json"))
        self._spawn("kube-router", rn.kube_router_cmd(kc["kube-router"]))
        watch += ["kube-proxy", "kube-router"]
        self._wait_for("the real node to be Ready, untainted", self._real_node_ready, watch, 90)
        for path, obj in rn_dns.dns_objects():
            with contextlib.suppress(ApiError):  # already there: `up` is idempotent
                self.client().create(path, obj)
        self._wait_for("the cluster DNS (CoreDNS) to be Ready", self._cluster_dns_ready, watch, 90)
        self.state["real_node_startup_seconds"] = round(time.monotonic() - t0, 2)
        self._save()
        self._say(f"real node {rn.NODE_NAME} Ready in {time.monotonic() - t0:.1f}s")

    def _real_node_kubeconfigs(self, pki: pkimod.Pki) -> dict[str, Path]:
        """Client-certificate kubeconfigs from the cluster CA; the Node authorizer and the
        default system:node-proxier binding apply to the first two unchanged."""
        who = {
            "kubelet": (f"system:node:{rn.NODE_NAME}", ("system:nodes",)),
            "kube-proxy": ("system:kube-proxy", ()),
            "kube-router": ("swarmkit:kube-router", ()),
        }
        out: dict[str, Path] = {}
        for name, (cn, orgs) in who.items():
            crt, key = pkimod.issue_leaf(pki, f"{name}-client", cn, orgs=orgs)
            path = self.state_dir / "kubeconfigs" / f"{name}.kubeconfig"
            path.write_text(rn.cert_kubeconfig(self.server, pki.ca_crt, crt, key, name))
            out[name] = path
        return out

    def _real_node_rbac(self) -> None:
        """kube-router reads policies, pods, namespaces, nodes, services; the kubelet checks
        the apiserver's requests to it with SubjectAccessReviews (auth-delegator)."""
        for obj in rn.rbac_objects():
            kind = "clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings"
            with contextlib.suppress(ApiError):
                self.client().create(f"/apis/rbac.authorization.k8s.io/v1/{kind}", obj)

    def _real_node_registered(self) -> bool:
        try:
            self.client().get(f"/api/v1/nodes/{rn.NODE_NAME}")
        except ApiError:
            return False
        return True

    def _real_node_ready(self) -> bool:
        node = self.client().get(f"/api/v1/nodes/{rn.NODE_NAME}")
        conds = node.get("status", {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
        taints = {t["key"] for t in node.get("spec", {}).get("taints") or []}
        return ready and taints == {rn.TAINT_KEY}

    def _cluster_dns_ready(self) -> bool:
        """A ready CoreDNS endpoint behind the kube-dns Service (kube-proxy routes to it)."""
        slices = self.client().get(
            f"/apis/discovery.k8s.io/v1/namespaces/{rn_dns.NAMESPACE}/endpointslices",
            labelSelector="kubernetes.io/service-name=kube-dns",
        )
        return any(
            (e.get("conditions") or {}).get("ready")
            for s in slices.get("items") or []
            for e in s.get("endpoints") or []
        )

    def _release_real_node(self, lock: Proc, laps: Laps | None = None) -> None:
        """After the node's processes are gone: clean the host, then free the machine lock."""
        try:
            rn.teardown(rn.NodePaths(), laps=laps)
        finally:
            with contextlib.suppress(OSError):
                if lock.alive():
                    os.killpg(lock.pid, signal.SIGKILL)
            self._reap("realnode-lock")

    def _link_tools(self) -> None:
        self.bin_dir.mkdir(exist_ok=True)
        for tool in ("kubectl", "helm"):
            link = self.bin_dir / tool
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(binary(tool))

    def _spawn(
        self,
        name: str,
        cmd: list[str],
        *,
        env: dict[str, str] | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> Proc:
        log = self.log_path(name)
        log.parent.mkdir(parents=True, exist_ok=True)
        full_env = dict(env if env is not None else os.environ)
        full_env[MARKER_ENV] = self.cluster_id
        with open(log, "ab") as fh:
            p = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=full_env,
                cwd=self.state_dir,
                pass_fds=pass_fds,
            )
        self._popen[name] = p
        proc = Proc(name, p.pid, proc_start_time(p.pid), str(log), cmd)
        self._record(proc)
        self._save()
        return proc

    def _check_alive(self, names: Sequence[str]) -> None:
        procs = self._procs()
        for name in names:
            popen = self._popen.get(name)
            code = popen.poll() if popen is not None else None
            dead = code is not None or (popen is None and not procs[name].alive())
            if dead:
                log = Path(procs[name].log)
                text = tail(log, 30)
                hint = ""
                if "address already in use" in text:
                    hint = (
                        "\n  A port it needs is already in use (another cluster? run "
                        "`make cluster-down`; a fixed SWARMKIT_APISERVER_PORT may clash)."
                    )
                raise ClusterError(
                    f"{name} exited (code {code}) during start-up.{hint}\n"
                    f"--- last lines of {log} ---\n{text}"
                )

    def _wait_for(
        self, what: str, probe: Callable[[], bool], watch: Sequence[str], timeout: float
    ) -> None:
        deadline = time.monotonic() + min(timeout, self.start_timeout)
        last_exc: BaseException | None = None
        while True:
            self._check_alive(watch)
            try:
                if probe():
                    return
            except Exception as exc:
                last_exc = exc
            if time.monotonic() > deadline:
                name = watch[-1]
                raise ClusterError(
                    f"timed out after {timeout:.0f}s waiting for {what} (last error: {last_exc}).\n"
                    f"--- last lines of {self.log_path(name)} ---\n{tail(self.log_path(name), 30)}"
                )
            time.sleep(0.1)

    def _wait_http(self, name: str, url: str, watch: Sequence[str], timeout: float) -> None:
        import ssl
        import urllib.request

        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        headers = {}
        if url.startswith(self.state.get("server", "-")):
            headers = self.client()._headers(None)

        def probe() -> bool:
            req = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
                return bool(resp.status == 200)

        self._wait_for(f"{name} ({url})", probe, watch, timeout)

    def _node_ready(self) -> bool:
        node = self.client().get(f"/api/v1/nodes/{self.node_name}")
        conds = node.get("status", {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
        taints = node.get("spec", {}).get("taints") or []
        return ready and not taints

    def _default_sa(self) -> bool:
        try:
            self.client().get("/api/v1/namespaces/default/serviceaccounts/default")
        except ApiError:
            return False
        return True

    # -- stop ------------------------------------------------------------------------------

    def stop(self, *, remove_state: bool = True) -> Laps:
        """Stop every process this cluster started (and any stray carrying its marker);
        returns where the time went."""
        laps = Laps()
        with self._locked():
            self._stop_locked(laps, remove_state=remove_state)
        return laps

    def _stop_locked(self, laps: Laps, *, remove_state: bool = True) -> None:
        if not self.state:
            self._load()
        procs = self._procs()
        groups: list[tuple[str, ...]] = [
            ("operator", "jaeger"),
            ("kube-router", "kube-proxy", "kubelet"),
            ("containerd",),
            ("process-node",),
            ("kube-scheduler", "kube-controller-manager"),
            ("kube-apiserver",),
            ("etcd",),
        ]
        for group in groups:
            live = [procs[n] for n in group if n in procs and procs[n].alive()]
            for p in live:
                with contextlib.suppress(OSError):
                    os.killpg(p.pid, signal.SIGTERM)
            deadline = time.monotonic() + self._grace(group, remove_state)
            for p in live:
                while p.alive() and time.monotonic() < deadline:
                    self._reap(p.name)
                    time.sleep(0.05)
                if p.alive():
                    with contextlib.suppress(OSError):
                        os.killpg(p.pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.killpg(p.pid, signal.SIGKILL)  # anything left in its group
                self._reap(p.name)
            laps.lap("/".join(group))
        if "realnode-lock" in procs:  # before the marker sweep: the lock holder carries it
            self._release_real_node(procs["realnode-lock"], laps)
        marker = self.state.get("id")
        if marker:
            for _ in range(3):
                strays = processes_with_marker(str(marker))
                if not strays:
                    break
                for pid in strays:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)
        for name in list(self._popen):
            self._reap(name)
        self._client = None
        if remove_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        else:
            self.state["procs"] = {}
        self.state = {} if remove_state else self.state

    @staticmethod
    def _grace(group: tuple[str, ...], remove_state: bool) -> float:
        """Seconds a group gets between SIGTERM and SIGKILL. The process node ends its pods;
        the apiserver drains its watches for 5 s, which matters only when the cluster is to be
        started again from its state (a restart): when the state goes, 0.5 s does."""
        if group == ("process-node",):
            return 8
        if group == ("kube-apiserver",) and remove_state:
            return 0.5
        return 5

    def _reap(self, name: str) -> None:
        p = self._popen.get(name)
        if p is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=0.01)
            if p.returncode is not None:
                del self._popen[name]

    # -- using it --------------------------------------------------------------------------

    def kubectl(
        self,
        *args: str,
        check: bool = True,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(binary("kubectl")), f"--kubeconfig={self.kubeconfig}", *args]
        res = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and res.returncode != 0:
            raise ClusterError(
                f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stderr.strip()}"
            )
        return res

    def logs(self, component: str, lines: int = 50) -> str:
        """The last ``lines`` lines of a component's log (etcd, kube-apiserver, ..., operator)."""
        return tail(self.log_path(component), lines)

    def pod_logs(self, namespace: str, pod: str, container: str | None = None) -> str:
        """A process-node pod's container log (stdout+stderr); the only container by default."""
        pod_dir = self.pods_dir / f"{namespace}_{pod}"
        if container is None:
            logs = sorted(pod_dir.glob("*.log"))
            if len(logs) != 1:
                raise ClusterError(
                    f"pod {namespace}/{pod} has logs {[p.stem for p in logs]}; pass container="
                )
            return logs[0].read_text(errors="replace")
        return (pod_dir / f"{container}.log").read_text(errors="replace")

    def pod_dir(self, namespace: str, pod: str) -> Path:
        return self.pods_dir / f"{namespace}_{pod}"

    def env(self) -> dict[str, str]:
        """Environment for tools: KUBECONFIG and PATH with .cluster/bin first."""
        return {
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    # -- the operator ----------------------------------------------------------------------

    def operator_running(self) -> bool:
        self._load()
        p = self._procs().get("operator")
        return p is not None and p.alive()

    def _start_jaeger(self) -> dict[str, str]:
        """``make demo TRACING=1``: a Jaeger beside the cluster (started once, stopped by
        ``make cluster-down`` with the other processes); the operator's env for it. The
        cluster's lock is held."""
        found = self.state.get("jaeger") or {}
        proc = self._procs().get("jaeger")
        if proc is not None and proc.alive() and found.get("otlp"):
            return {"OTEL_EXPORTER_OTLP_ENDPOINT": str(found["otlp"])}
        ports = {n: free_port() for n in jaeger.QUERY_PORTS}
        config = Path(self.state_dir) / "jaeger.yaml"
        config.write_text(jaeger.render_config(ports))
        self._spawn("jaeger", [str(jaeger.build_jaeger()), "--config", f"file:{config}"])
        query = f"http://127.0.0.1:{ports['query']}"
        if not jaeger.wait_serving(query):
            raise ClusterError(f"jaeger did not start; log: {self.log_path('jaeger')}")
        otlp = f"http://127.0.0.1:{ports['otlp_http']}"
        self.state["jaeger"] = {"otlp": otlp, "query": query}
        self._save()
        _say(f"jaeger running: OTLP/HTTP {otlp}, query API {query}/api/traces/<id>")
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp}

    def start_operator(self, args: Sequence[str] = (), crds_dir: Path | None = None) -> None:
        """Apply ``crds/*.yaml`` (server-side) and run ``python -m swarmkit_operator`` in the
        background with KUBECONFIG set (log: ``<state>/operator.log``). Idempotent."""
        with self._locked():
            if not self.is_running():
                raise ClusterError(f"no running cluster in {self.state_dir}; run `make cluster-up`")
            p = self._procs().get("operator")
            if p is not None and p.alive():
                self._say(f"operator already running (pid {p.pid}, log {p.log})")
                return
            crds = crds_dir or repo_root() / "crds"
            files = sorted(crds.glob("*.yaml")) if crds.is_dir() else []
            if files:
                args_f = [a for f in files for a in ("-f", str(f))]
                self.kubectl("apply", "--server-side", "--force-conflicts", *args_f)
                self.kubectl(
                    "wait", "--for=condition=Established", "--timeout=60s",
                    *[a for f in files for a in ("-f", str(f))],
                )  # fmt: skip
                self._say(f"applied {len(files)} CRD file(s) from {crds}")
            else:
                self._say(f"warning: no CRDs found in {crds}/*.yaml")
            log = self.log_path("operator")
            with contextlib.suppress(OSError):
                log.unlink()
            env = {**os.environ, **self.env(), "PYTHONUNBUFFERED": "1"}
            if os.environ.get("TRACING") == "1":  # `make demo TRACING=1`: traces to a Jaeger
                env.update(self._start_jaeger())
            args = list(args)
            # Everything shares 127.0.0.1 here (test operators, the chart's operator pod on
            # the process node, another checkout's cluster): fixed default ports would clash.
            if not any(a.startswith("--metrics-port") for a in args):
                args += ["--metrics-port", str(free_port())]
            if not any(a.startswith("--liveness") for a in args):
                args += ["--liveness", f"http://127.0.0.1:{free_port()}/healthz"]
            # The read-only web view, on loopback only: a single-user install (no proxy in
            # front to name anyone; only this machine reaches it).
            if not any(a.startswith("--web-view") for a in args):
                args += ["--web-view", f"127.0.0.1:{free_port()}", "--web-view-single-user"]
            view = next(
                (a.split("=", 1)[1] if "=" in a else args[i + 1])
                for i, a in enumerate(args)
                if a.startswith("--web-view") and not a.startswith("--web-view-single-user")
            )
            proc = self._spawn(
                "operator", [sys.executable, "-m", "swarmkit_operator", *args], env=env
            )
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                popen = self._popen.get("operator")
                code = popen.poll() if popen else None
                if code is not None or not proc.alive():
                    self.state["procs"].pop("operator", None)
                    self._save()
                    raise ClusterError(
                        f"the operator exited (code {code}) right after start.\n"
                        f"--- last lines of {log} ---\n{tail(log, 30)}"
                    )
                time.sleep(0.1)
            port = args[args.index("--metrics-port") + 1] if "--metrics-port" in args else "?"
            live = args[args.index("--liveness") + 1] if "--liveness" in args else "?"
            self.state["web_view"] = f"http://{view}" if view else ""
            self._save()
            self._say(
                f"operator running (pid {proc.pid}); log: {log}; metrics: :{port}; liveness: {live}"
            )
            if view:
                self._say(f"web view (read-only): http://{view}/skills")

    def web_view_url(self) -> str:
        """The running operator's web view (``make operator-up`` serves it), or ""."""
        self._load()
        return str(self.state.get("web_view") or "") if self.operator_running() else ""

    def stop_operator(self) -> bool:
        with self._locked():
            if not self._load():
                return False
            p = self._procs().get("operator")
            if p is None:
                return False
            if p.alive():
                with contextlib.suppress(OSError):
                    os.killpg(p.pid, signal.SIGTERM)
                deadline = time.monotonic() + 10
                while p.alive() and time.monotonic() < deadline:
                    self._reap("operator")
                    time.sleep(0.05)
                with contextlib.suppress(OSError):
                    os.killpg(p.pid, signal.SIGKILL)
                self._reap("operator")
            self.state["procs"].pop("operator", None)
            self._save()
            return True


def write_kubeconfig(path: Path, server: str, ca_pem: str, token: str, user: str) -> None:
    import base64

    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "swarmkit-dev",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": "swarmkit-dev", "context": {"cluster": "swarmkit-dev", "user": user}}
        ],
        "current-context": "swarmkit-dev",
    }
    tmp = path.with_name(path.name + ".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False)
    os.replace(tmp, path)
