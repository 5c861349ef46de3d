"""The status objects the node reports: the ``Node``'s status (capacity, conditions, addresses,
``nodeInfo``) and a pod's status (phase, conditions, container states). Builders only: the
callers write the results to the API."""

from __future__ import annotations

import os
from collections.abc import Sequence

from swarmkit_devcluster.kubeapi import JSON
from swarmkit_devcluster.process_node.containers import ContainerRun
from swarmkit_devcluster.process_node.times import now_rfc3339

KUBELET_VERSION = "v1.36.3"


def host_arch() -> str:
    """The host's architecture in Kubernetes (GOARCH) spelling."""
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


def node_resources(max_pods: int) -> dict[str, str]:
    """Capacity (= allocatable): the host's CPUs and memory."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cpu = str(os.cpu_count() or 1)
    return {
        "cpu": cpu,
        "memory": str(mem),
        "pods": str(max_pods),
        "ephemeral-storage": "100Gi",
    }


def node_status(name: str, kubelet_port: int, max_pods: int, transition: dict[str, str]) -> JSON:
    """The Node's ``status``; ``transition`` maps a condition type to its lastTransitionTime
    (now for the ones not in it)."""
    res = node_resources(max_pods)
    ts = now_rfc3339()

    def cond(t: str, status: str, reason: str, msg: str) -> JSON:
        return {
            "type": t,
            "status": status,
            "reason": reason,
            "message": msg,
            "lastHeartbeatTime": ts,
            "lastTransitionTime": transition.get(t, ts),
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
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
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
            "architecture": host_arch(),
        },
    }


def set_condition(
    conditions: dict[str, JSON], typ: str, status: bool, reason: str | None = None
) -> None:
    """Set a pod condition in ``conditions``; its lastTransitionTime changes only when its
    status or reason does."""
    s = "True" if status else "False"
    old = conditions.get(typ)
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
    conditions[typ] = c


def container_status(c: ContainerRun) -> JSON:
    # No probes: a running container is ready (and started).
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


def pod_status(
    *,
    phase: str,
    reason: str | None,
    message: str | None,
    start_time: str,
    initialized: bool,
    containers: Sequence[ContainerRun],
    conditions: dict[str, JSON],
    existing: list[JSON],
) -> JSON:
    """A pod's ``status``. ``conditions`` holds the node's own conditions from one call to the
    next and is updated here; of the ``existing`` conditions (on the pod now), those of other
    types are kept."""
    regular = [c for c in containers if not c.init]
    inits = [c for c in containers if c.init]
    set_condition(conditions, "PodScheduled", True)
    set_condition(conditions, "Initialized", initialized)
    ready = phase == "Running" and all(c.running for c in regular)
    terminal = phase in ("Succeeded", "Failed")
    set_condition(conditions, "ContainersReady", ready, "PodCompleted" if terminal else None)
    set_condition(conditions, "Ready", ready, "PodCompleted" if terminal else None)
    set_condition(conditions, "PodReadyToStartContainers", True)
    conds = [c for c in existing if c.get("type") not in conditions]
    conds += list(conditions.values())
    status: JSON = {
        "phase": phase,
        "conditions": conds,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": start_time,
        "containerStatuses": [container_status(c) for c in regular],
        "reason": reason,
        "message": message,
    }
    if inits:
        status["initContainerStatuses"] = [container_status(c) for c in inits]
    return status


def terminated_state(code: int, message: str | None, started_at: str | None, pid: int) -> JSON:
    """A container state ``{"terminated": ...}`` for an exit with ``code`` (finished now)."""
    terminated: JSON = {
        "exitCode": code,
        "reason": "Completed" if code == 0 else "Error",
        "message": message,
        "startedAt": started_at,
        "finishedAt": now_rfc3339(),
        "containerID": f"process://{pid}",
    }
    if terminated["message"] is None:
        del terminated["message"]
    return {"terminated": terminated}
