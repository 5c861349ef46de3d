"""One pod's worker thread (:class:`PodWorker`): takes the pod from bound to deleted.

Images are resolved (unknown → ``ErrImagePull``), volumes and env prepared (retried like the
kubelet until they resolve: ``CreateContainerConfigError``), init containers run one at a time
(sidecars kept running), then the regular containers, restarted per ``restartPolicy`` with a
short backoff; ``activeDeadlineSeconds`` and deletion end the processes. Every change is written
to the pod's status; a deleted pod is removed with grace 0 once its processes are gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Protocol

from swarmkit_devcluster.kubeapi import JSON, ApiError, KubeClient, pod_path
from swarmkit_devcluster.process_node.containers import (
    ContainerRun,
    Launch,
    NodeInfo,
    is_ours,
    kill_containers,
    prepare_container,
    start_container,
    start_error,
    stop_container,
    termination_message,
)
from swarmkit_devcluster.process_node.env import ConfigError, PodSources
from swarmkit_devcluster.process_node.events import EventRecorder
from swarmkit_devcluster.process_node.images import ImageMap, ImageRule, ImageStore, LocalImage
from swarmkit_devcluster.process_node.limits import describe, remove_cgroup
from swarmkit_devcluster.process_node.status import pod_status, terminated_state
from swarmkit_devcluster.process_node.times import now_rfc3339, parse_time
from swarmkit_devcluster.process_node.volumes import ProjectedTokens, materialize, set_ownership

#: How long a status update is retried while the apiserver cannot be reached.
STATUS_RETRY_SECONDS = 300.0

log = logging.getLogger("process-node")

GRACE_CAP_SECONDS = 5.0


class NodeContext(Protocol):
    """What a pod worker needs from its node (the node passes itself; this module never
    imports :mod:`.node`)."""

    client: KubeClient
    pods_dir: Path
    image_map: ImageMap
    image_store: ImageStore
    info: NodeInfo
    events: EventRecorder

    def resources(self) -> dict[str, str]: ...


class PodWorker(threading.Thread):
    def __init__(self, node: NodeContext, pod: JSON) -> None:
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
        self.tokens = ProjectedTokens(self.client, pod)
        self.prepared: dict[str, Launch] = {}
        self.sources: PodSources | None = None
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

    def push_status(self) -> None:
        if self.removed:
            return
        status = pod_status(
            phase=self.phase,
            reason=self.reason,
            message=self.message,
            start_time=self.start_time,
            initialized=self.initialized,
            containers=list(self.containers.values()),
            conditions=self.conditions,
            existing=(self.pod.get("status") or {}).get("conditions") or [],
        )
        # Like the kubelet's status manager, keep trying while the apiserver is away
        # (restarted, or etcd down): a lost final status leaves the pod Running forever.
        delay, deadline = 0.5, time.monotonic() + STATUS_RETRY_SECONDS
        while True:
            try:
                self._set_pod(
                    self.client.merge_patch(
                        pod_path(self.ns, self.pod_name, "status"), {"status": status}
                    )
                )
                return
            except ApiError as exc:
                if exc.status == 404:
                    self.removed = True
                    return
                transient = exc.status >= 500 or exc.status == 429
                log.warning("%s/%s: status update failed: %s", self.ns, self.pod_name, exc)
            except Exception as exc:
                transient = True
                log.warning("%s/%s: status update failed: %s", self.ns, self.pod_name, exc)
            if not transient or self.removed or time.monotonic() > deadline:
                return
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

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
        unknown = [c for c in self.containers.values() if self._image(c) is None]
        if unknown:
            for c in unknown:
                message = self._unknown_image_message(c)
                c.state = {"waiting": {"reason": "ErrImagePull", "message": message}}
                self._event(c, "Warning", "Failed", f'Failed to pull image "{c.spec.get("image")}"')
                self._event(c, "Warning", "Failed", "Error: ErrImagePull")
            self.push_status()
            while not self.deleting:
                self.wake.wait(5)
                self.wake.clear()
            self._finalize_delete()
            return
        # Volumes, then env (retried like the kubelet until they resolve). As on a real node a
        # volume that cannot be set up yet (a ConfigMap not created yet, or a transient 403
        # while the Node authorizer has not linked the pod to it) leaves the pod
        # ContainerCreating with FailedMount Events; only a container's own configuration (env
        # from a missing key) is CreateContainerConfigError.
        attempts = 0
        while True:
            if self.deleting:
                self._finalize_delete()
                return
            stage = "volumes"
            try:
                volumes = self._prepare_volumes()
                stage = "config"
                self._prepare_containers(volumes)
                break
            # OSError: the apiserver is unreachable (restarting); like the kubelet, try again.
            except (ConfigError, ApiError, OSError) as exc:
                attempts += 1
                log.info("%s/%s: not ready to start (%s); retrying", self.ns, self.pod_name, exc)
                if stage == "volumes":
                    reason = "ContainerCreating"
                    if attempts == 1 or attempts % 30 == 0:
                        self._event(
                            None, "Warning", "FailedMount", f"MountVolume.SetUp failed: {exc}"
                        )
                else:
                    reason = "CreateContainerConfigError"
                    if attempts == 1:
                        for c in self.containers.values():
                            self._event(c, "Warning", "Failed", f"Error: {exc}")
                for c in self.containers.values():
                    c.state = {"waiting": {"reason": reason, "message": str(exc)}}
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
            with contextlib.suppress(OSError):
                pid = is_ours(pidfile.read_text(), self.node.info.marker)
                if pid is not None:
                    os.killpg(pid, signal.SIGKILL)

    def _image(self, c: ContainerRun) -> LocalImage | ImageRule | None:
        """The container's image: a local root filesystem, else a host-command rule (not for
        a repository image built only from another checkout's sources: that is an error)."""
        image = c.spec.get("image", "")
        found = self.node.image_store.lookup(image)
        if isinstance(found, str):
            return None
        return found or self.node.image_map.resolve(image)

    def _unknown_image_message(self, c: ContainerRun) -> str:
        image = c.spec.get("image", "")
        not_built = self.node.image_store.lookup(image)
        if isinstance(not_built, str):  # built only from other checkouts' sources
            return not_built
        return (
            f'image "{image}" is not known to the process node (no local root filesystem in '
            f"{self.node.image_store.directory}, no rule in {self.node.image_map.source}); "
            "build it with `make images` or add a rule with --image-map/$SWARMKIT_NODE_IMAGE_MAP"
        )

    def _event(self, c: ContainerRun | None, typ: str, reason: str, message: str) -> None:
        if c is None:
            self.node.events.emit(self.pod, typ, reason, message)
        else:
            self.node.events.emit(self.pod, typ, reason, message, c.name, c.init)

    def _prepare_volumes(self) -> dict[str, Path]:
        vol_dir = self.dir / "volumes"
        vol_dir.mkdir(exist_ok=True)
        self.tokens.clear()
        self.sources = PodSources(self.client, self.pod, self.node.resources)
        fs_group = (self.pod["spec"].get("securityContext") or {}).get("fsGroup")
        volumes: dict[str, Path] = {}
        for v in self.pod["spec"].get("volumes") or []:
            try:
                volumes[v["name"]] = materialize(v, vol_dir / v["name"], self.sources, self.tokens)
            except (ConfigError, ApiError, OSError) as exc:  # OSError: apiserver unreachable
                raise ConfigError(f'volume "{v["name"]}": {exc}') from exc
            set_ownership(volumes[v["name"]], v, fs_group)
        return volumes

    def _prepare_containers(self, volumes: dict[str, Path]) -> None:
        self.prepared = {}
        for c in self.containers.values():
            image = self._image(c)
            assert image is not None
            self.prepared[c.name] = prepare_container(
                c,
                image if isinstance(image, ImageRule) else None,
                image if isinstance(image, LocalImage) else None,
                volumes,
                self.sources or PodSources(self.client, self.pod, self.node.resources),
                pod_dir=self.dir,
                node=self.node.info,
            )

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
                self._event(None, "Normal", "DeadlineExceeded", self.message)
                self.push_status()
                self._wait_for_deletion()
                return
            self.tokens.refresh()
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
                            stop_container(c, 1.0)
                            c.done = True
                    failed = any(
                        c.state.get("terminated", {}).get("exitCode", 0) != 0 for c in regular
                    )
                    self.phase = "Failed" if failed else "Succeeded"
                    self.push_status()
                    self.tokens.clear()
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

    def _start(self, c: ContainerRun) -> None:
        launch = self.prepared[c.name]
        image = c.spec.get("image", "")
        if c.restart_count == 0:
            local = isinstance(self._image(c), LocalImage)
            how = "root filesystem" if local else "host command"
            self._event(
                c,
                "Normal",
                "Pulled",
                f'Container image "{image}" already present on machine ({how})',
            )
        start_container(c, launch, self.dir, self.wake, f"{self.ns}/{self.pod_name}")
        self._event(c, "Normal", "Created", f"Created container {c.name}")
        if launch.limits.memory is not None or launch.limits.cpu_millis is not None:
            log.info(
                "%s/%s: %s limits: %s",
                self.ns,
                self.pod_name,
                c.name,
                describe(launch.limits, launch.cgroup),
            )
        self._event(c, "Normal", "Started", f"Started container {c.name}")

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
            launch = self.prepared[c.name]
            if launch.cgroup is not None:
                remove_cgroup(launch.cgroup)
            failure = start_error(launch)
            if failure is not None:
                c.state = terminated_state(code, failure, c.started_at, c.proc.pid)
                c.state["terminated"]["reason"] = "StartError"
                self._event(c, "Warning", "Failed", f"Error: {failure}")
            else:
                message = termination_message(c, launch.tfile, self.dir / f"{c.name}.log", code)
                c.state = terminated_state(code, message, c.started_at, c.proc.pid)
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
                if code:
                    self._event(
                        c, "Warning", "BackOff", f"Back-off restarting failed container {c.name}"
                    )
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
        self.tokens.clear()

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
        # Like push_status: keep trying while the apiserver is away, or the pod stays
        # Terminating forever (nothing else on the node would delete it).
        delay, deadline = 0.5, time.monotonic() + STATUS_RETRY_SECONDS
        while not self.removed:
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
                return
            except ApiError as exc:
                if exc.status in (404, 409):
                    return
                log.warning("%s/%s: delete failed: %s", self.ns, self.pod_name, exc)
                if exc.status < 500 and exc.status != 429:
                    return
            except OSError as exc:  # the apiserver is unreachable (restarting)
                log.warning("%s/%s: delete failed: %s", self.ns, self.pod_name, exc)
            if time.monotonic() > deadline:
                return
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _grace(self) -> float:
        md = self.pod["metadata"]
        g = md.get("deletionGracePeriodSeconds")
        if g is None:
            g = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        return min(float(g), GRACE_CAP_SECONDS)

    def kill_all(self, grace: float, record: bool = True) -> None:
        self.stopping = True
        for c in self.containers.values():
            if c.running and record:
                self._event(c, "Normal", "Killing", f"Stopping container {c.name}")
        kill_containers(self.containers.values(), grace)
