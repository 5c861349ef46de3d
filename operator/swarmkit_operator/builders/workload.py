"""Long-running runner workloads (pure: a pod template → a Deployment and its Service).

A served Topology (A2A) and an Agent gateway (MCP) both run the runner as a ``Deployment``
in front of a ``Service``; both wrap the shared pod of :mod:`.pod`. The pod template
carries :data:`CHECKSUM_ANNOTATION`, a hash of the template itself plus whatever the
caller pins (versions, content hashes): the ConfigMaps it mounts are content-addressed, so
a new pinned version changes the template and the checksum, and the Deployment rolls.

The Deployment rolls with ``maxSurge: 1, maxUnavailable: 0`` (a replacement is Ready
before an old pod is stopped), ``minReadySeconds`` 0 and ``revisionHistoryLimit`` 3. The
Service is ``ClusterIP`` with ``sessionAffinity: ClientIP``: a caller's follow-up calls on a
task (poll, answer, cancel) reach the replica that holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..hashing import canonical_json, sha256_hex

#: The kinds that own a runner workload (a Run's Job, a served Topology's or an Agent
#: gateway's Deployment and Service), or, for an EvalRun, its case and judge Runs.
TargetKind = Literal["Run", "Topology", "Agent", "EvalRun"]
API_VERSION = "swarmkit.dev/v1alpha1"


@dataclass(frozen=True)
class Target:
    """The object a runner workload belongs to: its owner in the API, its identity in
    the bundle.

    ``workload`` is the name the bundle gives the run (and the workload's objects take):
    a Run's own name, ``serve-<topology>``, ``gw-<agent>``; ``uid`` is the owner's (a
    served Topology's or a gateway's bundle is pinned to its owner like a Run's)."""

    kind: TargetKind
    namespace: str
    name: str
    uid: str
    workload: str
    #: A Run's ``spec.labels`` (copied into its bundle; the served kinds have none).
    labels: Mapping[str, str] = field(default_factory=dict)


def owner_reference(target: Target, controller: bool = True) -> dict[str, Any]:
    """The ownerReference every object of ``target``'s workload carries (``controller``:
    whether the target is its managing controller, which the adoption check requires)."""
    return {
        "apiVersion": API_VERSION,
        "kind": target.kind,
        "name": target.name,
        "uid": target.uid,
        "controller": controller,
        "blockOwnerDeletion": True,
    }


#: On the pod template: changes whenever what the pods run changes (and rolls them).
CHECKSUM_ANNOTATION = "swarmkit.dev/checksum"
REVISION_HISTORY_LIMIT = 3


def template_checksum(template: Mapping[str, Any], pins: Sequence[str] = ()) -> str:
    """sha256 over the pod template (without its checksum annotation) and ``pins``."""
    metadata = dict(template.get("metadata") or {})
    annotations = {
        k: v for k, v in (metadata.get("annotations") or {}).items() if k != CHECKSUM_ANNOTATION
    }
    metadata["annotations"] = annotations
    body = {"template": {**template, "metadata": metadata}, "pins": list(pins)}
    return sha256_hex(canonical_json(body))


def with_checksum(template: Mapping[str, Any], pins: Sequence[str] = ()) -> dict[str, Any]:
    """``template`` with :data:`CHECKSUM_ANNOTATION` set."""
    metadata = dict(template.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[CHECKSUM_ANNOTATION] = template_checksum(template, pins)
    metadata["annotations"] = annotations
    return {**template, "metadata": metadata}


def build_deployment(
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    owner: Mapping[str, Any],
    replicas: int,
    template: Mapping[str, Any],
    pins: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Deployment of ``template`` (its labels must include ``selector``), owned by
    ``owner`` (an ownerReference), with the checksum annotation on the pod template."""
    missing = {k: v for k, v in selector.items() if template["metadata"]["labels"].get(k) != v}
    if missing:
        raise ValueError(f"the pod template's labels lack the selector's {sorted(missing)}")
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels),
        "ownerReferences": [dict(owner)],
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(selector)},
            "revisionHistoryLimit": REVISION_HISTORY_LIMIT,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": with_checksum(template, pins),
        },
    }


def build_service(
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    owner: Mapping[str, Any],
    port: int,
    target_port: int | str,
    port_name: str = "http",
) -> dict[str, Any]:
    """A ClusterIP Service in front of the Deployment's pods (client-IP affinity)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [dict(owner)],
        },
        "spec": {
            "type": "ClusterIP",
            "selector": dict(selector),
            "sessionAffinity": "ClientIP",
            "ports": [
                {"name": port_name, "port": port, "targetPort": target_port, "protocol": "TCP"}
            ],
        },
    }


def service_url(name: str, namespace: str, port: int, path: str = "") -> str:
    """The in-cluster URL of a Service (``http://<name>.<ns>.svc:<port><path>``)."""
    return f"http://{name}.{namespace}.svc:{port}{path}"


def deployment_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the pipeline keeps of an observed Deployment: its owners (the adoption check),
    annotations, replicas, status and the pod template's checksum (is it up to date?)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    template = (spec.get("template") or {}).get("metadata") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "creationTimestamp": meta.get("creationTimestamp"),
            "generation": meta.get("generation"),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [dict(o) for o in meta.get("ownerReferences") or ()],
        },
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": dict(body.get("status") or {}),
        "checksum": (template.get("annotations") or {}).get(CHECKSUM_ANNOTATION),
    }


def up_to_date(observed: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether the observed Deployment (a :func:`deployment_summary`) runs ``desired``'s
    pod template (its checksum) at its replica count: nothing to apply."""
    if observed is None:
        return False
    template = desired["spec"]["template"]["metadata"]["annotations"]
    replicas = (observed.get("spec") or {}).get("replicas")
    return bool(
        observed.get("checksum") == template[CHECKSUM_ANNOTATION]
        and replicas == desired["spec"]["replicas"]
    )


def involved(target: Target) -> dict[str, str]:
    """``target`` as the ``involvedObject`` of an Event."""
    return {
        "apiVersion": API_VERSION,
        "kind": target.kind,
        "name": target.name,
        "namespace": target.namespace,
        "uid": target.uid,
    }


def deployment_readiness(deployment: Mapping[str, Any] | None) -> tuple[int, int, bool]:
    """``(ready replicas, desired replicas, rolled out)`` of an observed Deployment.

    Rolled out: the controller saw the current generation and every replica runs the
    current template (``updatedReplicas``) and is available, with no old pod left.
    """
    if not deployment:
        return 0, 0, False
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    meta = deployment.get("metadata") or {}
    desired = int(spec.get("replicas", 1))
    ready = int(status.get("readyReplicas") or 0)
    observed = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    total = int(status.get("replicas") or 0)
    rolled = observed and updated == desired and available >= desired and total == desired
    return ready, desired, rolled


__all__ = [
    "API_VERSION",
    "CHECKSUM_ANNOTATION",
    "Target",
    "TargetKind",
    "build_deployment",
    "build_service",
    "deployment_readiness",
    "deployment_summary",
    "involved",
    "owner_reference",
    "service_url",
    "template_checksum",
    "up_to_date",
    "with_checksum",
]
