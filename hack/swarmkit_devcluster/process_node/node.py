"""The node (:class:`ProcessNode`): registers a Ready ``Node``, keeps its ``Lease`` in
``kube-node-lease`` fresh and its status current, serves the kubelet port
(:mod:`.kubelet_server`) and list-watches the pods bound to it, handing each to its
:class:`~.pod.PodWorker`."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from swarmkit_devcluster.kubeapi import JSON, ApiError, KubeClient
from swarmkit_devcluster.process_node.containers import MARKER_ENV, NodeInfo
from swarmkit_devcluster.process_node.events import EventRecorder
from swarmkit_devcluster.process_node.images import ImageMap, ImageStore
from swarmkit_devcluster.process_node.kubelet_server import KubeletServer, start_kubelet_server
from swarmkit_devcluster.process_node.limits import cgroup_parent
from swarmkit_devcluster.process_node.pod import PodWorker
from swarmkit_devcluster.process_node.status import host_arch, node_resources, node_status
from swarmkit_devcluster.process_node.times import now_micro, now_rfc3339

log = logging.getLogger("process-node")

DEFAULT_NODE_NAME = "process-node"
NOT_READY_TAINTS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


class ProcessNode:
    def __init__(
        self,
        client: KubeClient,
        *,
        name: str,
        state_dir: Path,
        image_map: ImageMap,
        image_store: ImageStore | None = None,
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
        self.image_store = image_store or ImageStore(None)
        self.api_host = api_host
        self.api_port = api_port
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.max_pods = pods
        self.marker = os.environ.get(MARKER_ENV, "")
        cgroup = cgroup_parent()
        log.info(
            "resource limits: %s",
            f"cgroup v2 under {cgroup}"
            if cgroup
            else "rlimits (no writable cgroup v2 with memory and cpu controllers)",
        )
        self.info = NodeInfo(api_host, api_port, self.marker, cgroup)
        self.events = EventRecorder(client, name)
        self.workers: dict[str, PodWorker] = {}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.kubelet_port = 0
        self._httpd: KubeletServer | None = None

    # -- node object -----------------------------------------------------------------------

    def resources(self) -> dict[str, str]:
        """The node's allocatable resources."""
        return node_resources(self.max_pods)

    def _node_status(self) -> JSON:
        return node_status(self.name, self.kubelet_port, self.max_pods, self._transition)

    _transition: dict[str, str] = {}

    def register(self) -> None:
        self._transition = {}
        arch = host_arch()
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
        httpd = start_kubelet_server(
            self.pods_dir,
            self.container_running,
            self.stop_event,
            tls_cert=self.tls_cert,
            tls_key=self.tls_key,
        )
        self.kubelet_port = httpd.server_address[1]
        self._httpd = httpd

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
            w.kill_all(grace=2.0, record=False)
        if self._httpd is not None:
            self._httpd.shutdown()
