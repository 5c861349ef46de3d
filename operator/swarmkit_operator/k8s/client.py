"""The API client: configuration, credentials, the write gate and every request.

A thin JSON client over the ``kubernetes`` package's REST layer: requests and responses are
plain dicts (no model classes, no deserialization cost), every call runs in a small thread
pool so the event loop never blocks, and transient failures (429, 5xx, connection errors)
are retried with exponential backoff and jitter, honouring ``Retry-After``. Every write
passes the leader election's write gate first (:func:`set_write_gate`). Anything the
apiserver refuses raises :class:`ApiError` and the work queue retries the reconcile with its
own backoff.

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
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import urllib3
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.config import incluster_config

from swarmkit_api.decoding import loads

from .. import metrics

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
DELIVERY_MANAGER = "swarmkit-mailbox-delivery"


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
    #: This process's name in the Events it posts (``reportingInstance``; the settings').
    instance: str = field(default_factory=socket.gethostname)


_state = _State()


def set_write_gate(gate: Callable[[], str | None] | None) -> None:
    """Install the check every write request passes (None: writes always allowed)."""
    _state.write_gate = gate or _always_write


def write_refusal() -> str | None:
    """Why this replica may not write now (None: it may). For side effects outside the API
    that must follow the same fence (a mailbox webhook POST)."""
    return _state.write_gate()


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
    instance: str | None = None,
) -> None:
    """Load credentials and size the connection pool and thread pool (idempotent)."""
    if instance:
        _state.instance = instance
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
    undecoded: bool = False,
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
                if undecoded and 200 <= status < 300 and isinstance(data, bytes):
                    return status, data
                text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
                if 200 <= status < 300:
                    if raw:
                        return status, text
                    return status, loads(text) if text else None
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


#: A list's own metadata, found in its JSON without decoding it: at the end of a custom
#: resource's list (an unstructured list's keys are sorted: apiVersion, items, kind,
#: metadata), at the start of a built-in one's (kind, apiVersion, metadata, items).
_LIST_META_AT_END = re.compile(rb',"metadata":(\{[^{}]*\})\}\s*$')
_LIST_META_AT_START = re.compile(rb'\{"kind":"[^"]*","apiVersion":"[^"]*","metadata":(\{[^{}]*\})')
_SCANNED = 4096


def continue_token(page: bytes) -> str | None:
    """The continue token of one page of a LIST read from its raw JSON ('' on the last
    page), or None when the list's metadata is not where a Kubernetes list keeps it."""
    found = _LIST_META_AT_END.search(page, max(0, len(page) - _SCANNED))
    found = found or _LIST_META_AT_START.match(page[:_SCANNED])
    if found is None:
        return None
    try:
        meta = json.loads(found.group(1))
    except ValueError:
        return None
    return str(meta.get("continue") or "") if isinstance(meta, dict) else None


async def request_page(
    path: str, query: list[tuple[str, str]], accept: str = "application/json"
) -> tuple[int, bytes | str]:
    """One page of a LIST off the event loop, undecoded: (HTTP status, the page's bytes, or
    the error's text). :func:`list_pages` decodes it."""
    loop = asyncio.get_running_loop()
    call = functools.partial(
        _request_sync, "GET", path, None, "application/json", query, False, accept, undecoded=True
    )
    return await loop.run_in_executor(_state.executor, call)


async def list_pages(
    path: str, query: list[tuple[str, str]], accept: str = "application/json"
) -> AsyncIterator[dict[str, Any]]:
    """The pages of a paged LIST of ``path``, each decoded, in order.

    The next page is asked for as soon as this one's bytes arrived (its continue token read
    from them, :func:`continue_token`), so the apiserver encodes page k+1 while this process
    decodes page k and its caller indexes it: a restart's LIST of 20,000 Skills is 40
    pages, and one after the other each waited for the other side. The token read early is
    checked against the decoded page; on a mismatch the early request is dropped and the
    decoded token asked for instead (the pages stay exact)."""
    loop = asyncio.get_running_loop()

    def fetch(token: str) -> asyncio.Task[tuple[int, bytes | str]]:
        asked = [*query, ("continue", token)] if token else list(query)
        return asyncio.ensure_future(request_page(path, asked, accept))

    pending: asyncio.Task[tuple[int, bytes | str]] | None = fetch("")
    try:
        while pending is not None:
            status, data = await pending
            pending = None
            if status >= 300 or not isinstance(data, bytes):
                raise ApiError("GET", path, status, str(data))
            guessed = continue_token(data)
            pending = fetch(guessed) if guessed else None
            page = await loop.run_in_executor(_state.executor, loads, data)
            meta = (page.get("metadata") if isinstance(page, dict) else None) or {}
            token = str(meta.get("continue") or "")
            if token != (guessed or ""):
                if pending is not None:
                    _drop(pending)
                pending = fetch(token) if token else None
            yield page if isinstance(page, dict) else {}
    finally:
        if pending is not None:  # the caller stopped early, or a page failed
            _drop(pending)


def _drop(task: asyncio.Task[Any]) -> None:
    """Forget a page request nobody will read: cancelled (a request already running in
    the pool finishes there), its outcome retrieved so a failure is not reported as never
    retrieved."""
    task.cancel()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())


async def wait_for_api(path: str, max_delay: float = 5.0) -> float:
    """Wait until a GET of ``path`` succeeds; the seconds waited.

    For the start-up: the API server may be down or still warming up (a restarted
    kube-apiserver's RBAC authorizer refuses every request until its caches fill), and a
    start that LISTs then would fail. ``path`` should be one the operator may always read
    (its API group's discovery document). Logs once while it waits, with the first refusal.
    """
    started = time.monotonic()
    delay = 0.25
    logged = False
    while True:
        try:
            status, payload = await request("GET", path, retries=0, timeout=5.0)
        except ApiError as exc:
            status, payload = 0, str(exc)
        if 200 <= status < 300:
            return time.monotonic() - started
        if not logged:
            log.warning(
                "the API server does not serve %s yet (HTTP %d: %s): waiting for it",
                path,
                status,
                str(payload)[:200],
            )
            logged = True
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_delay)


#: A LIST answering with each object's metadata only (``PartialObjectMetadataList``), for
#: callers that read names, labels and annotations: the apiserver encodes and this process
#: decodes a fraction of the bytes (a rendered ConfigMap carries a whole skill).
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"


def _check(verb: str, path: str, status: int, payload: Any) -> Any:
    if 200 <= status < 300:
        return payload
    raise ApiError(verb, path, status, str(payload))


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


def apiserver_host() -> tuple[str, int] | None:
    """(host, port) of the apiserver this operator talks to (None before configure)."""
    if _state.api is None:
        return None
    parts = urlsplit(str(_state.api.configuration.host))
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
