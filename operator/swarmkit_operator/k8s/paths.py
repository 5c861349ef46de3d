"""API paths of the resources the operator reads and writes (pure string building)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmkit_api import GROUP, VERSION


def _namespaced(api: str, plural: str, namespace: str, name: str | None) -> str:
    base = f"{api}/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


def custom_path(plural: str, namespace: str, name: str | None = None) -> str:
    return _namespaced(f"/apis/{GROUP}/{VERSION}", plural, namespace, name)


def core_path(plural: str, namespace: str, name: str | None = None) -> str:
    return _namespaced("/api/v1", plural, namespace, name)


def batch_path(plural: str, namespace: str, name: str | None = None) -> str:
    return _namespaced("/apis/batch/v1", plural, namespace, name)


def apps_path(plural: str, namespace: str, name: str | None = None) -> str:
    return _namespaced("/apis/apps/v1", plural, namespace, name)


def rbac_path(plural: str, namespace: str, name: str | None = None) -> str:
    return _namespaced("/apis/rbac.authorization.k8s.io/v1", plural, namespace, name)


def networking_path(plural: str, namespace: str, name: str | None = None) -> str:
    return _namespaced("/apis/networking.k8s.io/v1", plural, namespace, name)


def node_path(plural: str, name: str | None = None) -> str:
    """A cluster-scoped ``node.k8s.io`` path (RuntimeClasses)."""
    base = f"/apis/node.k8s.io/v1/{plural}"
    return f"{base}/{name}" if name else base


def authorization_path(plural: str, name: str | None = None) -> str:
    """A cluster-scoped ``authorization.k8s.io`` path (SubjectAccessReviews)."""
    base = f"/apis/authorization.k8s.io/v1/{plural}"
    return f"{base}/{name}" if name else base


#: kind → (path builder, plural) of every namespaced object a runner workload consists of.
_WORKLOAD_KINDS = {
    "ConfigMap": (core_path, "configmaps"),
    "Service": (core_path, "services"),
    "ServiceAccount": (core_path, "serviceaccounts"),
    "Job": (batch_path, "jobs"),
    "Deployment": (apps_path, "deployments"),
    "Role": (rbac_path, "roles"),
    "RoleBinding": (rbac_path, "rolebindings"),
    "NetworkPolicy": (networking_path, "networkpolicies"),
}


def object_path(manifest: Mapping[str, Any], collection: bool = False) -> str:
    """The path of a namespaced workload object's manifest (``collection``: of its kind's
    collection in that namespace, where it is created)."""
    meta = manifest["metadata"]
    build, plural = _WORKLOAD_KINDS[str(manifest["kind"])]
    return build(plural, meta["namespace"], None if collection else meta["name"])
