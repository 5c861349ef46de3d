"""The one module that talks to the Kubernetes API (besides kopf's own watches).

A thin JSON client over the ``kubernetes`` package's REST layer: requests and responses are
plain dicts (no model classes, no deserialization cost), every call runs in a small thread
pool so the event loop never blocks, and transient failures (429, 5xx, connection errors)
are retried with exponential backoff and jitter, honouring ``Retry-After``. Watch streams
(:func:`stream`) are read on the event loop instead (aiohttp, with the same credentials): a
stream is open for minutes, and cancelling it must close it at once. A 409 on create
means "already exists" (rendered ConfigMaps are content-addressed, so that is success); a 404
on patch or delete means the object is gone. Anything else raises :class:`ApiError` and the
work queue retries the reconcile with its own backoff.

Credentials: in-cluster service account when ``KUBERNETES_SERVICE_HOST`` is set and no
``KUBECONFIG`` is, else the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import random
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import urllib3
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.config import incluster_config

from swarmkit_api import GROUP, VERSION

from . import metrics

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
FIELD_MANAGER = "swarmkit-operator"
#: One field manager per controller that writes status: ``managedFields`` then says which
#: controller owns which field (and which condition, ``conditions`` being a list keyed by
#: ``type``), and two controllers never take each other's fields by accident.
RECONCILE_MANAGER = "swarmkit-reconcile"
SKILL_GRANTS_MANAGER = "swarmkit-skill-grants"
GATEWAYS_MANAGER = "swarmkit-gateways"
RUNS_MANAGER = "swarmkit-runs"
SCHEDULER_MANAGER = "swarmkit-scheduler"
LIBRARY_MANAGER = "swarmkit-library"
REVIEWS_MANAGER = "swarmkit-reviews"
COMPONENT = "swarmkit-operator"


class ApiError(RuntimeError):
    """A Kubernetes API call failed for good (after retries)."""

    def __init__(self, verb: str, path: str, status: int, body: str) -> None:
        reason = body
        with contextlib.suppress(ValueError, AttributeError):
            reason = json.loads(body).get("message", body)
        super().__init__(f"{verb} {path}: HTTP {status}: {reason}")
        self.status = status


WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class NotLeader(ApiError):
    """A write refused before it was sent: this replica may not write now."""

    def __init__(self, verb: str, path: str, reason: str) -> None:
        super().__init__(verb, path, 0, reason)


def _always_write() -> str | None:
    return None


@dataclass
class _State:
    api: kclient.ApiClient | None = None
    executor: ThreadPoolExecutor | None = None
    request_timeout: float = 30.0
    retries: int = 5
    session: aiohttp.ClientSession | None = None
    session_loop: asyncio.AbstractEventLoop | None = None
    #: () → why writes are refused now, or None (the leader election's fence).
    write_gate: Callable[[], str | None] = _always_write


_state = _State()


def set_write_gate(gate: Callable[[], str | None] | None) -> None:
    """Install the check every write request passes (None: writes always allowed)."""
    _state.write_gate = gate or _always_write


SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class InCluster:
    """Where the in-cluster service-account credentials are."""

    server: str
    token_path: str
    ca_path: str
    namespace_path: str


def in_cluster() -> InCluster | None:
    """The in-cluster credentials, or None when a kubeconfig should be used instead."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    if not host or os.environ.get("KUBECONFIG"):
        return None
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    server_host = f"[{host}]" if ":" in host else host
    return InCluster(
        server=f"https://{server_host}:{port}",
        token_path=f"{SA_DIR}/token",
        ca_path=f"{SA_DIR}/ca.crt",
        namespace_path=f"{SA_DIR}/namespace",
    )


def configure(
    workers: int = 12,
    request_timeout: float = 30.0,
    retries: int = 5,
    kubeconfig: str | None = None,
) -> None:
    """Load credentials and size the connection pool and thread pool (idempotent)."""
    if _state.api is not None:
        return
    cfg = kclient.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    incluster = None if path else in_cluster()
    if incluster is not None:
        loader = incluster_config.InClusterConfigLoader(  # type: ignore[no-untyped-call]
            token_filename=incluster.token_path,
            cert_filename=incluster.ca_path,
            try_refresh_token=True,  # projected tokens rotate
        )
        loader.load_and_set(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        kconfig.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, client_configuration=cfg, persist_config=False
        )
    cfg.connection_pool_maxsize = workers + 4
    _state.api = kclient.ApiClient(cfg)
    _state.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="k8s")
    _state.request_timeout = request_timeout
    _state.retries = retries


def shutdown() -> None:
    if _state.session is not None and not _state.session.closed:
        # Closed by close_streams() on a graceful stop; here only its connector is dropped.
        with contextlib.suppress(Exception):
            _state.session.connector.close()  # type: ignore[union-attr]
    _state.session = None
    if _state.executor is not None:
        _state.executor.shutdown(wait=False, cancel_futures=True)
    if _state.api is not None:
        _state.api.close()  # type: ignore[no-untyped-call]
    _state.api = None
    _state.executor = None


def _resource_of(path: str) -> str:
    parts = [p for p in path.split("?")[0].split("/") if p]
    # .../namespaces/<ns>/<resource>[/<name>[/<sub>]]
    if "namespaces" in parts:
        i = parts.index("namespaces")
        rest = parts[i + 2 :]
        if rest:
            return rest[0] + ("/" + rest[2] if len(rest) > 2 else "")
        return "namespaces"
    return parts[-1] if parts else ""


def _request_sync(
    verb: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    query: list[tuple[str, str]] | None = None,
    raw: bool = False,
    accept: str = "application/json",
    fenced: bool = True,
    timeout: float | None = None,
    retries: int | None = None,
) -> tuple[int, Any]:
    api = _state.api
    if api is None:
        raise RuntimeError("k8s.configure() was not called")
    write = verb in WRITE_VERBS
    headers = {"Accept": "*/*" if raw else accept}
    if body is not None:
        headers["Content-Type"] = content_type
    method, url, header_params, ser_body, _ = api.param_serialize(
        method=verb,
        resource_path=path,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    resource = _resource_of(path)
    attempt = 0
    max_retries = _state.retries if retries is None else retries
    while True:
        attempt += 1
        retry_after: float | None = None
        if write and fenced:
            # Checked before every attempt, retries included: see runtime/leader.py.
            refusal = _state.write_gate()
            if refusal is not None:
                metrics.WRITES_REFUSED.labels(verb, resource).inc()
                raise NotLeader(verb, path, refusal)
        try:
            response = api.call_api(
                method,
                url,
                header_params=header_params,
                body=ser_body,
                _request_timeout=_state.request_timeout if timeout is None else timeout,
            )
            response.read()  # type: ignore[no-untyped-call]
            status = int(response.status)
            data = response.data or b""
            metrics.API_REQUESTS.labels(verb, resource, str(status)).inc()
            if status not in RETRY_STATUSES or attempt > max_retries:
                text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
                if 200 <= status < 300:
                    if raw:
                        return status, text
                    return status, json.loads(text) if text else None
                return status, text
            header = response.headers.get("Retry-After") if response.headers else None
            if header and header.isdigit():
                retry_after = float(header)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            metrics.API_REQUESTS.labels(verb, resource, "error").inc()
            if attempt > max_retries:
                raise ApiError(verb, path, 0, str(exc)) from exc
        delay = retry_after if retry_after is not None else min(0.1 * 2 ** (attempt - 1), 3.0)
        time.sleep(delay * random.uniform(0.8, 1.2))


async def request(
    verb: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    query: list[tuple[str, str]] | None = None,
    accept: str = "application/json",
    *,
    fenced: bool = True,
    timeout: float | None = None,
    retries: int | None = None,
) -> tuple[int, Any]:
    """One API call off the event loop: (HTTP status, parsed JSON or error text).

    A write (POST, PUT, PATCH, DELETE) passes the write gate first (:func:`set_write_gate`)
    unless ``fenced=False`` (the leader election's own Lease requests).
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(
        _request_sync,
        verb,
        path,
        body,
        content_type,
        query,
        False,
        accept,
        fenced,
        timeout,
        retries,
    )
    return await loop.run_in_executor(_state.executor, call)


# --- watch streams ------------------------------------------------------------------------


def _ssl_context(cfg: kclient.Configuration) -> ssl.SSLContext | bool:
    if not cfg.verify_ssl:
        return False
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return ctx


def _auth_headers(cfg: kclient.Configuration) -> dict[str, str]:
    """The headers the REST layer would send (a service-account token is re-read here)."""
    headers: dict[str, str] = {}
    settings: Mapping[str, Any] = cfg.auth_settings()
    for setting in settings.values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[str(setting["key"])] = str(setting["value"])
    return headers


def _session() -> aiohttp.ClientSession:
    api = _state.api
    if api is None:
        raise RuntimeError("k8s.configure() was not called")
    loop = asyncio.get_running_loop()
    if _state.session is None or _state.session.closed or _state.session_loop is not loop:
        connector = aiohttp.TCPConnector(ssl=_ssl_context(api.configuration), limit=0)
        _state.session = aiohttp.ClientSession(connector=connector)
        _state.session_loop = loop  # a session is bound to its loop (tests run several)
    return _state.session


async def stream(
    path: str,
    query: list[tuple[str, str]],
    accept: str = "application/json",
    read_timeout: float = 300.0,
) -> AsyncIterator[dict[str, Any]]:
    """GET ``path`` and yield each JSON line of the answer (a watch) as it arrives.

    Raises :class:`ApiError` for an answer other than 2xx, ``aiohttp.ClientError`` or
    ``TimeoutError`` when the connection fails or stays silent for ``read_timeout``.
    """
    api = _state.api
    if api is None:
        raise RuntimeError("k8s.configure() was not called")
    cfg = api.configuration
    headers = {"Accept": accept, **_auth_headers(cfg)}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
    resource = _resource_of(path)
    async with _session().get(
        cfg.host + path, params=query, headers=headers, timeout=timeout
    ) as response:
        metrics.API_REQUESTS.labels("WATCH", resource, str(response.status)).inc()
        if response.status >= 300:
            raise ApiError("WATCH", path, response.status, await response.text())
        tail = b""
        async for chunk in response.content.iter_any():
            if b"\n" not in chunk:
                tail += chunk  # a long line (a big object) arrives in many chunks
                continue
            *lines, tail = (tail + chunk).split(b"\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)


async def close_streams() -> None:
    """Close every open watch stream's connection (graceful stop)."""
    session, _state.session = _state.session, None
    if session is not None and not session.closed:
        await session.close()


#: A LIST answering with each object's metadata only (``PartialObjectMetadataList``), for
#: callers that read names, labels and annotations: the apiserver encodes and this process
#: decodes a fraction of the bytes (a rendered ConfigMap carries a whole skill).
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"


def _check(verb: str, path: str, status: int, payload: Any) -> Any:
    if 200 <= status < 300:
        return payload
    raise ApiError(verb, path, status, str(payload))


def custom_path(plural: str, namespace: str, name: str | None = None) -> str:
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


def core_path(plural: str, namespace: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


# --- custom resources -------------------------------------------------------------------


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
    result = _check("PATCH", path, status, payload)
    return str(result.get("metadata", {}).get("resourceVersion", ""))


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
        body,
        content_type="application/apply-patch+yaml",
        query=[("fieldManager", manager), ("force", "true")],
    )
    if code == 404:
        return None
    return dict(_check("PATCH", path, code, payload))


async def read_pod_log(namespace: str, pod: str, container: str) -> str | None:
    """A container's whole log as text (None when the pod or its log is gone)."""
    path = core_path("pods", namespace, pod) + "/log"
    loop = asyncio.get_running_loop()
    status, payload = await loop.run_in_executor(
        _state.executor,
        functools.partial(_request_sync, "GET", path, query=[("container", container)], raw=True),
    )
    if status in (400, 404):
        return None
    return str(_check("GET", path, status, payload))


# --- ConfigMaps ---------------------------------------------------------------------------


async def create_config_map(manifest: Mapping[str, Any]) -> bool:
    """Create; False if it already exists (content-addressed: same name, same content)."""
    namespace = manifest["metadata"]["namespace"]
    path = core_path("configmaps", namespace)
    status, payload = await request(
        "POST", path, dict(manifest), query=[("fieldManager", FIELD_MANAGER)]
    )
    if status == 409:
        return False
    _check("POST", path, status, payload)
    return True


async def read_config_map(namespace: str, name: str) -> dict[str, Any] | None:
    path = core_path("configmaps", namespace, name)
    status, payload = await request("GET", path)
    if status == 404:
        return None
    return dict(_check("GET", path, status, payload))


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


async def put_config_map(manifest: Mapping[str, Any]) -> None:
    """Replace the mutable ConfigMap ``manifest`` names, or create it (last writer wins: the
    only writer is the operator itself)."""
    namespace = manifest["metadata"]["namespace"]
    path = core_path("configmaps", namespace, manifest["metadata"]["name"])
    query = [("fieldManager", FIELD_MANAGER)]
    status, payload = await request("PUT", path, dict(manifest), query=query)
    if status == 404:
        path = core_path("configmaps", namespace)
        status, payload = await request("POST", path, dict(manifest), query=query)
    _check("PUT", path, status, payload)


async def list_config_maps(namespace: str | None, selector: str) -> list[dict[str, Any]]:
    """ConfigMaps matching ``selector``, in ``namespace`` or (None) in every namespace."""
    path = core_path("configmaps", namespace) if namespace else "/api/v1/configmaps"
    status, payload = await request("GET", path, query=[("labelSelector", selector)])
    return [dict(i) for i in _check("GET", path, status, payload).get("items") or ()]


# --- Events ---------------------------------------------------------------------------------

_INSTANCE = os.environ.get("POD_NAME") or socket.gethostname()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def post_event(involved: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
    """A core/v1 Event about ``involved`` (apiVersion, kind, name, namespace, uid)."""
    namespace = str(involved["namespace"])
    now = _now()
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
        "involvedObject": dict(involved),
        "type": type_,
        "reason": reason[:128],
        "message": message if len(message) <= 1024 else message[:1021] + "...",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": _INSTANCE[:128],
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    path = core_path("events", namespace)
    status, payload = await request("POST", path, body)
    metrics.EVENTS.labels(type_).inc()
    if status >= 300 and status != 404:
        log.warning("posting an Event failed: %s", ApiError("POST", path, status, str(payload)))


# --- Runs ---
# (functions added by the Runs handlers go below this line)


def batch_path(plural: str, namespace: str, name: str | None = None) -> str:
    base = f"/apis/batch/v1/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


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
    path = core_path("configmaps", namespace, name)
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
    path = custom_path(plural, namespace)
    query = [("fieldManager", FIELD_MANAGER)]
    status, payload = await request("POST", path, dict(body), query=query)
    if status == 409:
        return None
    return dict(_check("POST", path, status, payload))


async def delete_custom(plural: str, namespace: str, name: str) -> bool:
    """Delete a custom object (children follow in the background); False if gone."""
    path = custom_path(plural, namespace, name)
    status, payload = await request("DELETE", path, {"propagationPolicy": "Background"})
    if status == 404:
        return False
    _check("DELETE", path, status, payload)
    return True


# A small pool of its own for the calls that start a Run (bundle ConfigMap, Job), so a burst
# of status writes and Events in the shared pool never delays a Run's Job.
_start_executor: ThreadPoolExecutor | None = None


async def request_start(
    verb: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None
) -> tuple[int, Any]:
    global _start_executor
    if _start_executor is None:
        _start_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="k8s-start")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        _start_executor, _request_sync, verb, path, body, "application/json", query
    )


async def create_start_object(path: str, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """Create through the start pool; None if it already exists."""
    query = [("fieldManager", FIELD_MANAGER)]
    status, payload = await request_start("POST", path, dict(manifest), query=query)
    if status == 409:
        return None
    return dict(_check("POST", path, status, payload))


# --- served workloads (Deployments, Services) ---------------------------------------------


def apps_path(plural: str, namespace: str, name: str | None = None) -> str:
    base = f"/apis/apps/v1/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


def rbac_path(plural: str, namespace: str, name: str | None = None) -> str:
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


def networking_path(plural: str, namespace: str, name: str | None = None) -> str:
    base = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


def node_path(plural: str, name: str | None = None) -> str:
    """A cluster-scoped ``node.k8s.io`` path (RuntimeClasses)."""
    base = f"/apis/node.k8s.io/v1/{plural}"
    return f"{base}/{name}" if name else base


async def get_runtime_class(name: str) -> dict[str, Any] | None:
    """A RuntimeClass, or None when none has that name."""
    path = node_path("runtimeclasses", name)
    status, payload = await request("GET", path)
    if status == 404:
        return None
    return dict(_check("GET", path, status, payload))


def apiserver_host() -> tuple[str, int] | None:
    """(host, port) of the apiserver this operator talks to (None before configure)."""
    if _state.api is None:
        return None
    parts = urlsplit(str(_state.api.configuration.host))
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def object_path(manifest: Mapping[str, Any]) -> str:
    """The path of a namespaced ServiceAccount, Role or RoleBinding manifest."""
    meta = manifest["metadata"]
    plural = {"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings"}
    kind = str(manifest["kind"])
    if kind == "ServiceAccount":
        return core_path(plural[kind], meta["namespace"], meta["name"])
    return rbac_path(plural[kind], meta["namespace"], meta["name"])


async def apply(path: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Server-side apply ``manifest`` at ``path`` (the object's own path) as the operator.

    The operator owns every field it sets (``force``): a hand edit of them is undone on
    the next reconcile, fields it does not set (e.g. an HPA's) are left alone.
    """
    status, payload = await request(
        "PATCH",
        path,
        dict(manifest),
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


async def list_objects(path: str, label_selector: str) -> list[dict[str, Any]]:
    """The objects of the collection ``path`` matching ``label_selector``."""
    status, payload = await request("GET", path, query=[("labelSelector", label_selector)])
    return list(_check("GET", path, status, payload).get("items") or [])
