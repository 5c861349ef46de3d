"""Helpers per resource: custom resources and their status, ConfigMaps, Events, Jobs, Run
starts, served workloads. A 409 on create means "already exists" (rendered ConfigMaps are
content-addressed, so that is success); a 404 on patch or delete means the object is gone.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from swarmkit_api import GROUP, VERSION

from .. import metrics
from .client import (
    COMPONENT,
    FIELD_MANAGER,
    ApiError,
    _check,
    _state,
    log,
    request,
    request_start,
    request_text,
)
from .events import Correlated, EventCorrelator, correlation_key
from .paths import authorization_path, batch_path, core_path, custom_path, node_path
from .streams import text_lines


async def get_custom(plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    path = custom_path(plural, namespace, name)
    status, payload = await request("GET", path)
    if status == 404:
        return None
    return dict(_check("GET", path, status, payload))


async def create_custom(plural: str, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
    path = custom_path(plural, namespace)
    status, payload = await request(
        "POST", path, dict(body), query=[("fieldManager", FIELD_MANAGER)]
    )
    return dict(_check("POST", path, status, payload))


async def patch_status(
    plural: str,
    namespace: str,
    name: str,
    status_patch: Mapping[str, Any],
    manager: str = FIELD_MANAGER,
) -> str | None:
    """JSON-merge-patch ``status`` (None values delete fields); the new resourceVersion.

    For a controller that is the only writer of the fields it patches (``manager`` names
    it in ``managedFields``). Returns None when the object no longer exists.
    """
    written = await patch_status_object(plural, namespace, name, status_patch, manager)
    if written is None:
        return None
    return str(written.get("metadata", {}).get("resourceVersion", ""))


async def patch_status_object(
    plural: str,
    namespace: str,
    name: str,
    status_patch: Mapping[str, Any],
    manager: str = FIELD_MANAGER,
) -> dict[str, Any] | None:
    """Like :func:`patch_status`, returning the whole object as written (None: gone)."""
    path = custom_path(plural, namespace, name) + "/status"
    status, payload = await request(
        "PATCH",
        path,
        {"status": dict(status_patch)},
        content_type="application/merge-patch+json",
        query=[("fieldManager", manager)],
    )
    if status == 404:
        return None
    return dict(_check("PATCH", path, status, payload))


async def patch_status_guarded(
    plural: str,
    namespace: str,
    name: str,
    resource_version: str,
    status_patch: Mapping[str, Any],
    manager: str = FIELD_MANAGER,
) -> bool:
    """Merge-patch ``status`` only if the object is still at ``resource_version``
    (optimistic concurrency); False when it changed meanwhile (409) or is gone (404)."""
    path = custom_path(plural, namespace, name) + "/status"
    body = {"metadata": {"resourceVersion": resource_version}, "status": dict(status_patch)}
    status, payload = await request(
        "PATCH",
        path,
        body,
        content_type="application/merge-patch+json",
        query=[("fieldManager", manager)],
    )
    if status in (404, 409):
        return False
    _check("PATCH", path, status, payload)
    return True


async def list_custom(plural: str, namespace: str | None) -> list[dict[str, Any]]:
    """Every object of a swarmkit.dev kind in ``namespace`` (None: in all namespaces)."""
    path = custom_path(plural, namespace) if namespace else f"/apis/{GROUP}/{VERSION}/{plural}"
    status, payload = await request("GET", path)
    return list(_check("GET", path, status, payload).get("items") or [])


#: Characters YAML may not carry raw, or would fold as line breaks (the apiserver reads an
#: apply body as YAML).
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def apply_body(body: Mapping[str, Any]) -> str:
    """A server-side apply body as YAML-safe JSON text. The client's own encoder escapes a
    character outside the BMP (an emoji in a message) as a UTF-16 surrogate pair, which
    the apiserver's YAML reader refuses ("invalid Unicode character escape code"): the
    write failed, and was retried, for as long as the text stayed. Written as UTF-8 instead,
    with the few characters YAML may not hold raw escaped."""
    text = json.dumps(dict(body), ensure_ascii=False, separators=(",", ":"))
    return _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


async def apply_status(
    kind: str,
    plural: str,
    namespace: str,
    name: str,
    status: Mapping[str, Any],
    manager: str,
) -> dict[str, Any] | None:
    """Server-side apply ``status`` as ``manager``: the whole of what that controller owns.

    A field this manager applied before and leaves out now is removed; a condition is
    owned per ``type`` (the CRDs declare ``conditions`` a list keyed by ``type``), so
    two controllers each apply their own conditions of one object without touching the
    other's. ``force``: the manager takes over a field last written by someone else (an
    older operator's merge patch). Returns the object as written (None: gone).
    """
    path = custom_path(plural, namespace, name) + "/status"
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "status": dict(status),
    }
    code, payload = await request(
        "PATCH",
        path,
        apply_body(body),
        content_type="application/apply-patch+yaml",
        query=[("fieldManager", manager), ("force", "true")],
    )
    if code == 404:
        return None
    return dict(_check("PATCH", path, code, payload))


async def whoami() -> str:
    """The user name the apiserver authenticates this client as (a SelfSubjectReview, what
    ``kubectl auth whoami`` asks; every authenticated user may). Not a write: unfenced."""
    path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    status, payload = await request("POST", path, body, fenced=False)
    found = _check("POST", path, status, payload)
    return str(((found.get("status") or {}).get("userInfo") or {}).get("username") or "")


async def access_review(
    user: str, groups: tuple[str, ...], namespace: str, verb: str, resource: str
) -> bool:
    """Whether Kubernetes lets ``user`` (in ``groups``) ``verb`` the swarmkit.dev
    ``resource`` in ``namespace``: a SubjectAccessReview, what ``kubectl auth can-i --as``
    asks (the web view's per-user pages). Not a write: unfenced, every replica answers."""
    path = authorization_path("subjectaccessreviews")
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": list(groups),
            "resourceAttributes": {
                "namespace": namespace,
                "verb": verb,
                "group": GROUP,
                "resource": resource,
            },
        },
    }
    status, payload = await request("POST", path, body, fenced=False, timeout=5.0, retries=0)
    found = _check("POST", path, status, payload)
    return bool((found.get("status") or {}).get("allowed"))


async def read_pod_log(namespace: str, pod: str, container: str) -> str | None:
    """A container's whole log as text (None when the pod or its log is gone)."""
    path = core_path("pods", namespace, pod) + "/log"
    status, payload = await request_text("GET", path, [("container", container)])
    if status in (400, 404):
        return None
    return str(_check("GET", path, status, payload))


async def follow_pod_log(
    namespace: str, pod: str, container: str, since_seconds: int | None = None
) -> AsyncIterator[str]:
    """A container's log line by line as it is written (``follow``; from ``since_seconds``
    ago, else from the start), until the container ends or the stream breaks."""
    path = core_path("pods", namespace, pod) + "/log"
    query = [("container", container), ("follow", "true")]
    if since_seconds is not None:
        query.append(("sinceSeconds", str(since_seconds)))
    async for line in text_lines(path, query, read_timeout=3600.0):
        yield line


async def create_config_map(manifest: Mapping[str, Any]) -> str | None:
    """Create; the uid of the ConfigMap created, or None when one of that name exists
    (content-addressed names: the caller decides whether it is the same content). The uid
    is the proof that this ConfigMap is exactly ``manifest``: the apiserver answered its
    creation, and an immutable ConfigMap keeps its content for that uid's life."""
    namespace = manifest["metadata"]["namespace"]
    path = core_path("configmaps", namespace)
    status, payload = await request(
        "POST", path, dict(manifest), query=[("fieldManager", FIELD_MANAGER)]
    )
    if status == 409:
        return None
    created = _check("POST", path, status, payload)
    return str((created.get("metadata") or {}).get("uid") or "")


async def read_config_map(namespace: str, name: str) -> dict[str, Any] | None:
    path = core_path("configmaps", namespace, name)
    status, payload = await request("GET", path)
    if status == 404:
        return None
    return dict(_check("GET", path, status, payload))


class SecretNotGranted(Exception):
    """The operator may not read this Secret: its namespace's team has not granted it."""

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__(
            f"the operator may not read Secret {namespace}/{name}: the team grants it get on "
            "that one Secret (a Role with resourceNames, see the RBAC reference)"
        )


async def read_secret_key(namespace: str, name: str, key: str) -> str | None:
    """One key of a Secret, decoded (None when the Secret or key is missing). Only for a
    value the operator itself must use (a mailbox webhook URL); never logged or stored.

    A GET of the one Secret: the chart grants no verb on Secrets (issue 41); a team that
    routes a mailbox to a webhook grants ``get`` on that Secret by name (``rbac.py``'s
    ``team`` grant). Raises :class:`SecretNotGranted` (a 403) when it has not."""
    path = core_path("secrets", namespace, name)
    status, payload = await request("GET", path)
    if status == 404:
        return None
    if status == 403:
        raise SecretNotGranted(namespace, name)
    data = (_check("GET", path, status, payload) or {}).get("data") or {}
    if key not in data:
        return None
    return base64.b64decode(data[key]).decode("utf-8", errors="replace")


async def delete_config_map(namespace: str, name: str, uid: str | None = None) -> bool:
    """Delete (only the object with ``uid`` if given); False if it was already gone."""
    path = core_path("configmaps", namespace, name)
    body: dict[str, Any] = {"propagationPolicy": "Background"}
    if uid:
        body["preconditions"] = {"uid": uid}
    status, payload = await request("DELETE", path, body)
    if status in (404, 409):
        return False
    _check("DELETE", path, status, payload)
    return True


async def put_config_map(manifest: Mapping[str, Any], exists: bool = True) -> None:
    """Replace the mutable ConfigMap ``manifest`` names, or create it (last writer wins: the
    only writer is the operator itself). ``exists``: what the caller last knew; False sends
    the create first (a PUT of a ConfigMap not there yet is a refused request more per
    ConfigMap created), and a replace when it was there after all."""
    namespace = manifest["metadata"]["namespace"]
    one = core_path("configmaps", namespace, manifest["metadata"]["name"])
    query = [("fieldManager", FIELD_MANAGER)]
    verb, path = ("PUT", one) if exists else ("POST", core_path("configmaps", namespace))
    status, payload = await request(verb, path, dict(manifest), query=query)
    if verb == "PUT" and status == 404:
        verb, path = "POST", core_path("configmaps", namespace)
        status, payload = await request(verb, path, dict(manifest), query=query)
    elif verb == "POST" and status == 409:
        verb, path = "PUT", one
        status, payload = await request(verb, path, dict(manifest), query=query)
    _check(verb, path, status, payload)


async def list_config_maps(namespace: str | None, selector: str) -> list[dict[str, Any]]:
    """ConfigMaps matching ``selector``, in ``namespace`` or (None) in every namespace."""
    path = core_path("configmaps", namespace) if namespace else "/api/v1/configmaps"
    status, payload = await request("GET", path, query=[("labelSelector", selector)])
    return [dict(i) for i in _check("GET", path, status, payload).get("items") or ()]


#: The Events posted by this process, by (object, type, reason) (see :mod:`.events`).
_correlator = EventCorrelator()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def post_event(
    involved: Mapping[str, Any], type_: str, reason: str, message: str, count: int = 1
) -> None:
    """A core/v1 Event about ``involved`` (apiVersion, kind, name, namespace, uid), ``count``
    occurrences of it; a repeat of the same reason about the same object within
    :data:`.events.WINDOW` adds to the count of the Event already posted (:mod:`.events`)."""
    message = message if len(message) <= 1024 else message[:1021] + "..."
    reason = reason[:128]
    key = correlation_key(involved, type_, reason)
    entry = _correlator.occurred(key, message, time.monotonic(), count)
    metrics.EVENTS.labels(type_).inc(count)
    async with entry.lock:
        if entry.written >= entry.count:
            return  # a write made while this one waited already counted it
        before, entry.written = entry.written, entry.count
        if not await _write_event(involved, type_, reason, entry):
            entry.written = before  # not posted: the next occurrence tries again


async def _write_event(
    involved: Mapping[str, Any], type_: str, reason: str, entry: Correlated
) -> bool:
    """Add ``entry``'s occurrences to its Event, or POST it (first, or the Event expired);
    whether it is written."""
    namespace = str(involved["namespace"])
    now = _now()
    if entry.name is not None:
        path = core_path("events", namespace, entry.name)
        patch = {"count": entry.count, "lastTimestamp": now, "message": entry.message}
        status, payload = await request(
            "PATCH", path, patch, content_type="application/merge-patch+json"
        )
        if status != 404:  # 404: removed by the apiserver's Event TTL, posted anew
            if status >= 300:
                log.warning(
                    "updating an Event failed: %s", ApiError("PATCH", path, status, str(payload))
                )
            return True
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
        "involvedObject": dict(involved),
        "type": type_,
        "reason": reason,
        "message": entry.message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": _state.instance[:128],
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": entry.count,
    }
    path = core_path("events", namespace)
    status, payload = await request("POST", path, body)
    if status >= 300:
        if status != 404:
            log.warning("posting an Event failed: %s", ApiError("POST", path, status, str(payload)))
        entry.name = None
        return False
    entry.name = str(((payload or {}).get("metadata") or {}).get("name") or "") or None
    return entry.name is not None


async def get_job(namespace: str, name: str) -> dict[str, Any] | None:
    path = batch_path("jobs", namespace, name)
    status, payload = await request("GET", path)
    if status == 404:
        return None
    return dict(_check("GET", path, status, payload))


async def create_job(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """Create a Job; None if one of that name already exists."""
    path = batch_path("jobs", manifest["metadata"]["namespace"])
    status, payload = await request(
        "POST", path, dict(manifest), query=[("fieldManager", FIELD_MANAGER)]
    )
    if status == 409:
        return None
    return dict(_check("POST", path, status, payload))


async def delete_job(namespace: str, name: str) -> bool:
    """Delete a Job and (in the background) its pods; False if it was already gone.

    The propagation policy is explicit: the API's default for Jobs orphans their pods.
    """
    path = batch_path("jobs", namespace, name)
    status, payload = await request("DELETE", path, {"propagationPolicy": "Background"})
    if status == 404:
        return False
    _check("DELETE", path, status, payload)
    return True


async def object_events(namespace: str, uid: str) -> list[dict[str, Any]]:
    """The core/v1 Events about the object with ``uid``."""
    path = core_path("events", namespace)
    query = [("fieldSelector", f"involvedObject.uid={uid}")]
    status, payload = await request("GET", path, query=query)
    return list(_check("GET", path, status, payload).get("items") or [])


async def remove_pod_finalizer(namespace: str, name: str, finalizer: str) -> bool:
    """Drop ``finalizer`` from a pod (strategic merge: no race with other finalizers)."""
    path = core_path("pods", namespace, name)
    body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [finalizer]}}
    status, payload = await request(
        "PATCH", path, body, content_type="application/strategic-merge-patch+json"
    )
    if status in (404, 409):
        return False
    _check("PATCH", path, status, payload)
    return True


async def label_config_map(namespace: str, name: str, labels: Mapping[str, str]) -> bool:
    """Merge ``labels`` into a ConfigMap's labels (metadata stays mutable when immutable)."""
    return await merge_labels(core_path("configmaps", namespace, name), labels)


async def patch_custom_labels(
    plural: str, namespace: str, name: str, labels: Mapping[str, str]
) -> bool:
    """Merge ``labels`` into a custom object the operator created (False if it is gone)."""
    return await merge_labels(custom_path(plural, namespace, name), labels)


async def merge_labels(path: str, labels: Mapping[str, str]) -> bool:
    """Merge ``labels`` into the object at ``path``; False if it is gone."""
    status, payload = await request(
        "PATCH",
        path,
        {"metadata": {"labels": dict(labels)}},
        content_type="application/merge-patch+json",
    )
    if status == 404:
        return False
    _check("PATCH", path, status, payload)
    return True


async def create_custom_if_absent(
    plural: str, namespace: str, body: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Create a custom object; None if one of that name already exists."""
    return await create_object(custom_path(plural, namespace), body)


async def delete_custom(plural: str, namespace: str, name: str) -> bool:
    """Delete a custom object (children follow in the background); False if gone."""
    return await delete_object(custom_path(plural, namespace, name))


async def create_start_object(path: str, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """Create through the start pool; None if it already exists."""
    query = [("fieldManager", FIELD_MANAGER)]
    status, payload = await request_start("POST", path, dict(manifest), query=query)
    if status == 409:
        return None
    return dict(_check("POST", path, status, payload))


async def get_runtime_class(name: str) -> dict[str, Any] | None:
    """A RuntimeClass, or None when none has that name."""
    path = node_path("runtimeclasses", name)
    status, payload = await request("GET", path)
    if status == 404:
        return None
    return dict(_check("GET", path, status, payload))


async def apply(path: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Server-side apply ``manifest`` at ``path`` (the object's own path) as the operator.

    The operator owns every field it sets (``force``): a hand edit of them is undone on
    the next reconcile, fields it does not set (e.g. an HPA's) are left alone.
    """
    status, payload = await request(
        "PATCH",
        path,
        apply_body(manifest),
        content_type="application/apply-patch+yaml",
        query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
    )
    return dict(_check("PATCH", path, status, payload))


async def delete_object(path: str) -> bool:
    """Delete the object at ``path`` (children in the background); False if already gone."""
    status, payload = await request("DELETE", path, {"propagationPolicy": "Background"})
    if status == 404:
        return False
    _check("DELETE", path, status, payload)
    return True


async def create_object(path: str, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """POST ``manifest`` to the collection ``path``; None if it already exists."""
    query = [("fieldManager", FIELD_MANAGER)]
    status, payload = await request("POST", path, dict(manifest), query=query)
    if status == 409:
        return None
    return dict(_check("POST", path, status, payload))


async def get_object(path: str) -> dict[str, Any] | None:
    """The object at ``path``, or None when there is none."""
    status, payload = await request("GET", path)
    if status == 404:
        return None
    return dict(_check("GET", path, status, payload))


async def list_objects(path: str, label_selector: str) -> list[dict[str, Any]]:
    """The objects of the collection ``path`` matching ``label_selector``."""
    status, payload = await request("GET", path, query=[("labelSelector", label_selector)])
    return list(_check("GET", path, status, payload).get("items") or [])
