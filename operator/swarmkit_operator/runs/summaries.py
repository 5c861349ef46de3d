"""What the Runs indexes keep of each object, and nothing more.

The indexes hold one entry per watched object for the life of the process, so each entry is
a small dict with only the fields the controller reads. The kopf-facing index functions in
:mod:`swarmkit_operator.handlers.run` call these; :func:`job_summary` is also how the
controller stores a Job it just created or fetched, so every Job it looks at has one shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmkit_api.conditions import READY
from swarmkit_api.review import CREATED_BY_ANNOTATION

from ..conditions import get_condition


def meta_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata every summary starts from."""
    meta = body.get("metadata") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "generation": meta.get("generation") or 0,
        "resourceVersion": meta.get("resourceVersion"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "labels": dict(meta.get("labels") or {}),
    }


def run_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Run: metadata, its whole spec and status (the controller decides from them)."""
    summary = meta_summary(body)
    summary["spec"] = dict(body.get("spec") or {})
    summary["status"] = dict(body.get("status") or {})
    return summary


def controller_refs(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An object's controller ownerReference (as a list, its API shape), uid and kind."""
    return [
        {"kind": o.get("kind"), "uid": o.get("uid"), "controller": True}
        for o in meta.get("ownerReferences") or ()
        if isinstance(o, Mapping) and o.get("controller")
    ]


def job_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the controller keeps of a Job (also the shape of the Jobs index)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    return {
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "metadata": {
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "creationTimestamp": meta.get("creationTimestamp"),
            "deletionTimestamp": meta.get("deletionTimestamp"),
            # Whose it is: checked against what the Run recorded (trust.check_made).
            "ownerReferences": controller_refs(meta),
        },
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "spec": {
            "backoffLimit": spec.get("backoffLimit"),
            "activeDeadlineSeconds": spec.get("activeDeadlineSeconds"),
        },
        "status": dict(body.get("status") or {}),
    }


def pod_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """A pod: what :func:`swarmkit_operator.builders.run_status.derive` and the finalizer
    release read."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "labels": dict(meta.get("labels") or {}),
            "finalizers": list(meta.get("finalizers") or ()),
            # Its Job: a pod is the Run's only when its controller is the Run's Job.
            "ownerReferences": controller_refs(meta),
            "creationTimestamp": meta.get("creationTimestamp"),
            "deletionTimestamp": meta.get("deletionTimestamp"),
        },
        "status": {
            "phase": status.get("phase"),
            "reason": status.get("reason"),
            "message": status.get("message"),
            "startTime": status.get("startTime"),
            "conditions": list(status.get("conditions") or ()),
            "containerStatuses": list(status.get("containerStatuses") or ()),
        },
        # Only the env entries that name a Secret key: a missing Secret is named with its
        # keys from these (builders/run_pod.secret_not_found), never read.
        "spec": {
            "containers": [
                {"env": [e for e in c.get("env") or () if _secret_key_ref(e)]}
                for c in (body.get("spec") or {}).get("containers") or ()
            ]
        },
    }


def _secret_key_ref(env: Mapping[str, Any]) -> bool:
    return bool((env.get("valueFrom") or {}).get("secretKeyRef"))


def topology_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Topology: its spec (resolution, schedules, history limits) and status."""
    summary = meta_summary(body)
    summary["spec"] = dict(body.get("spec") or {})
    summary["status"] = dict(body.get("status") or {})
    return summary


def agent_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """An Agent: readiness and the rendered ConfigMap that pins it (the spec is in there)."""
    summary = meta_summary(body)
    status = body.get("status") or {}
    summary["status"] = {
        "observedGeneration": status.get("observedGeneration"),
        "version": status.get("version"),
        "renderedConfigMap": status.get("renderedConfigMap"),
        "renderedSha256": status.get("renderedSha256"),
        "conditions": list(status.get("conditions") or ()),
        # spec.promotion: the version Runs pin is the active one (workload/resolve.py).
        **({"promotion": status["promotion"]} if status.get("promotion") else {}),
        # Granted skills its render went without: a Run waits while one of them exists and
        # the Agent has yet to pick it up (workload/resolve.py).
        **({"missingSkills": list(status["missingSkills"])} if status.get("missingSkills") else {}),
    }
    # Retention finds a manual Run's Workspace (its TTL) through the Agent.
    ws = (body.get("spec") or {}).get("workspaceRef") or {}
    summary["workspace"] = ws.get("name") or "default"
    return summary


def skill_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Skill: its content hash and readiness (None: no status yet); its content comes from
    the pinned ConfigMap (and whether a swarm-authored version is reviewed, from its Review:
    handlers/review.py)."""
    status = body.get("status") or {}
    cond = get_condition(status.get("conditions"), READY)
    ready = None if cond is None else cond.get("status") == "True"
    return {"contentHash": status.get("contentHash"), "ready": ready}


def workspace_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Workspace: its spec (runtime settings, flow data) and readiness."""
    summary = meta_summary(body)
    summary["spec"] = dict(body.get("spec") or {})
    status = body.get("status") or {}
    summary["status"] = {
        "observedGeneration": status.get("observedGeneration"),
        "renderedConfigMap": status.get("renderedConfigMap"),
        "conditions": list(status.get("conditions") or ()),
    }
    return summary


def review_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Review of a Run: its name, spec, status and who wrote its decision when."""
    meta = body.get("metadata") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "deletionTimestamp": meta.get("deletionTimestamp"),
            # Who opened it (the operator uses only its own: swarmkit_operator.reviews).
            "annotations": {
                k: v
                for k, v in (meta.get("annotations") or {}).items()
                if k == CREATED_BY_ANNOTATION
            },
            # Only the entries that own spec.decision (when it was written).
            "managedFields": [
                e
                for e in meta.get("managedFields") or ()
                if "f:decision" in (((e or {}).get("fieldsV1") or {}).get("f:spec") or {})
            ],
        },
        "spec": dict(body.get("spec") or {}),
        "status": dict(body.get("status") or {}),
    }
