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
from typing import Any

from ..hashing import canonical_json, sha256_hex

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
    "CHECKSUM_ANNOTATION",
    "build_deployment",
    "build_service",
    "deployment_readiness",
    "service_url",
    "template_checksum",
    "with_checksum",
]
