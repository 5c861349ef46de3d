"""The API client: configuration, credentials, the write gate and every request.

A thin JSON client: requests and responses are plain dicts (no model classes, no
deserialization cost), sent on the event loop over aiohttp connection pools (at most
``workers`` requests in flight; a Run's start has connections of its own), and transient
failures (429, 5xx, connection errors) are retried with exponential backoff and jitter,
honouring ``Retry-After``. Every write passes the leader election's write gate first
(:func:`set_write_gate`). Anything the apiserver refuses raises :class:`ApiError` and the
work queue retries the reconcile with its own backoff.

Why on the loop and not the ``kubernetes`` package's REST layer in threads: a profile of an
apply of 5,000 Skills found a third of the operator's CPU in that hand-off (each request
built by urllib3 in a worker thread, sent over a blocking TLS socket, and its completion
waking the loop through its self-pipe); see ``docs/design/scale.md``. That package still
loads the credentials (kubeconfig, in-cluster, rotating tokens).

Credentials: in-cluster service account when ``KUBERNETES_SERVICE_HOST`` is set and no
``KUBECONFIG`` is, else the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
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
    config: kclient.Configuration | None = None
    #: The apiserver's URL, read once (the configuration's ``host`` scans the proxy
    #: variables of the environment on every read).
    server: str = ""
    #: The kubeconfig's ``proxy-url`` and ``tls-server-name``, as each request's options.
    via: dict[str, str] = field(default_factory=dict)
    #: Decodes a LIST's pages (megabytes each) off the event loop.
    decoder: ThreadPoolExecutor | None = None
    request_timeout: float = 30.0
    retries: int = 5
    #: Connections per pool: ``requests`` (every call), ``start`` (a Run's start),
    #: ``streams`` (watches and followed logs, open for minutes: unbounded).
    limits: dict[str, int] = field(default_factory=lambda: {"requests": 12, "start": 4})
    sessions: dict[str, aiohttp.ClientSession] = field(default_factory=dict)
    session_loop: asyncio.AbstractEventLoop | None = None
    #: (configuration, when, headers): the credentials' headers last asked for.
    auth: tuple[kclient.Configuration, float, dict[str, str]] | None = None
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
    """Load credentials and size the connection pool (idempotent): at most ``workers``
    requests in flight, the others wait for a connection."""
    if instance:
        _state.instance = instance
    if _state.config is not None:
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
    _state.config = cfg
    _state.server = str(cfg.host).rstrip("/")
    options = {"proxy": cfg.proxy, "server_hostname": cfg.tls_server_name}
    _state.via = {k: str(v) for k, v in options.items() if v}
    _state.limits["requests"] = workers
    _state.decoder = ThreadPoolExecutor(max_workers=2, thread_name_prefix="k8s-decode")
    _state.request_timeout = request_timeout
    _state.retries = retries


def _config() -> kclient.Configuration:
    if _state.config is None:
        raise RuntimeError("k8s.configure() was not called")
    return _state.config


def _ssl_context(cfg: kclient.Configuration) -> ssl.SSLContext | bool:
    if not cfg.verify_ssl:
        return False
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return ctx


#: How long the credentials' headers are reused before the configuration is asked again.
#: Asking runs its refresh hook, which for a kubeconfig loads the whole file again (4 % of
#: the operator's CPU in an apply when asked per request); a service account's projected
#: token is re-read by that hook once a minute at most anyway.
AUTH_REUSE_SECONDS = 10.0


def _auth_headers(cfg: kclient.Configuration) -> dict[str, str]:
    """The credentials' headers for a request (a rotated token is picked up within
    :data:`AUTH_REUSE_SECONDS` plus the configuration's own refresh period)."""
    now = time.monotonic()
    cached = _state.auth
    if cached is not None and cached[0] is cfg and now - cached[1] < AUTH_REUSE_SECONDS:
        return cached[2]
    headers: dict[str, str] = {}
    settings: Mapping[str, Any] = cfg.auth_settings()
    for setting in settings.values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[str(setting["key"])] = str(setting["value"])
    _state.auth = (cfg, now, headers)
    return headers


def _session(pool: str) -> aiohttp.ClientSession:
    """The HTTP session of ``pool`` on the running event loop (a session is bound to its
    loop: tests run several, each gets its own)."""
    cfg = _config()
    loop = asyncio.get_running_loop()
    if _state.session_loop is not loop:
        _state.sessions.clear()  # the previous loop's: closed with it
        _state.session_loop = loop
    found = _state.sessions.get(pool)
    if found is None or found.closed:
        connector = aiohttp.TCPConnector(
            ssl=_ssl_context(cfg), limit=_state.limits.get(pool, 0), limit_per_host=0
        )
        # No ``Accept-Encoding``: the apiserver would gzip every answer past 128 KiB (a LIST
        # page of Skills), CPU on both sides of a cluster's network for little; the
        # ``kubernetes`` package's client asked for none either.
        found = _state.sessions[pool] = aiohttp.ClientSession(
            connector=connector, skip_auto_headers=("Accept-Encoding",)
        )
    return found


def open_request(
    pool: str,
    verb: str,
    path: str,
    *,
    params: list[tuple[str, str]],
    headers: Mapping[str, str],
    timeout: aiohttp.ClientTimeout,
    data: bytes | None = None,
) -> contextlib.AbstractAsyncContextManager[aiohttp.ClientResponse]:
    """One request to the apiserver over ``pool``'s connections, as every request and
    watch is sent: the server's URL, the credentials' headers, the kubeconfig's proxy and
    TLS server name."""
    return _session(pool).request(
        verb,
        _state.server + path,
        params=params,
        data=data,
        headers={**headers, **_auth_headers(_config())},
        timeout=timeout,
        **_state.via,  # type: ignore[arg-type]
    )


async def close_connections() -> None:
    """Close every connection, requests' and watch streams' (a graceful stop; before
    :func:`shutdown`, on the loop that made them)."""
    sessions = list(_state.sessions.values())
    _state.sessions.clear()
    for open_session in sessions:
        if not open_session.closed:
            await open_session.close()


def shutdown() -> None:
    """Forget the configuration (a later :func:`configure` loads it again). Connections
    still open are closed first when their loop can still run (else they go with it)."""
    loop = _state.session_loop
    if _state.sessions and loop is not None and not loop.is_closed() and not loop.is_running():
        loop.run_until_complete(close_connections())
    _state.sessions.clear()
    _state.session_loop = None
    if _state.decoder is not None:
        _state.decoder.shutdown(wait=False, cancel_futures=True)
    _state.config = None
    _state.decoder = None
    _state.auth = None


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


def _encoded(body: Any) -> bytes | None:
    """A request's body as sent: a str or bytes as given, anything else as compact JSON
    (what the ``kubernetes`` REST layer did for JSON and structured YAML content types)."""
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class _Call:
    """One request as the retry loop sends it (every attempt the same)."""

    verb: str
    path: str
    body: bytes | None
    headers: dict[str, str]
    query: list[tuple[str, str]]
    timeout: float
    retries: int
    fenced: bool
    pool: str


def _answer(status: int, data: bytes, want: str) -> tuple[int, Any]:
    """(status, payload) as the caller asked for it: the bytes of a 2xx (``bytes``), its
    text (``text``) or its JSON (``json``); an error's text whatever was asked."""
    if 200 <= status < 300:
        if want == "bytes":
            return status, data
        text = data.decode("utf-8", "replace")
        if want == "text":
            return status, text
        return status, loads(text) if text else None
    return status, data.decode("utf-8", "replace")


def _refuse_unless_allowed(call: _Call, resource: str) -> None:
    if call.verb in WRITE_VERBS and call.fenced:
        # Checked before every attempt, retries included: see runtime/leader.py.
        refusal = _state.write_gate()
        if refusal is not None:
            metrics.WRITES_REFUSED.labels(call.verb, resource).inc()
            raise NotLeader(call.verb, call.path, refusal)


async def _send(call: _Call, want: str) -> tuple[int, Any]:
    """Send ``call`` on the event loop, retrying a transient failure (429, 5xx, no
    connection) with exponential backoff and jitter, or after the ``Retry-After`` asked."""
    resource = _resource_of(call.path)
    # Per connect and per read, as urllib3's timeout was: the wait for a free connection
    # (a burst queued behind ``workers`` requests) is not the apiserver's slowness.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=call.timeout, sock_read=call.timeout)
    attempt = 0
    while True:
        attempt += 1
        retry_after: float | None = None
        _refuse_unless_allowed(call, resource)
        try:
            async with open_request(
                call.pool,
                call.verb,
                call.path,
                params=call.query,
                headers=call.headers,
                timeout=timeout,
                data=call.body,
            ) as response:
                data = await response.read()
            metrics.API_REQUESTS.labels(call.verb, resource, str(response.status)).inc()
            if response.status not in RETRY_STATUSES or attempt > call.retries:
                return _answer(response.status, data, want)
            header = response.headers.get("Retry-After", "")
            if header.isdigit():
                retry_after = float(header)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            metrics.API_REQUESTS.labels(call.verb, resource, "error").inc()
            if attempt > call.retries:
                raise ApiError(call.verb, call.path, 0, str(exc) or type(exc).__name__) from exc
        delay = retry_after if retry_after is not None else min(0.1 * 2 ** (attempt - 1), 3.0)
        await asyncio.sleep(delay * random.uniform(0.8, 1.2))


def _call(
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
    pool: str = "requests",
) -> _Call:
    headers = {"Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type
    return _Call(
        verb=verb,
        path=path,
        body=_encoded(body),
        headers=headers,
        query=list(query or ()),
        timeout=_state.request_timeout if timeout is None else timeout,
        retries=_state.retries if retries is None else retries,
        fenced=fenced,
        pool=pool,
    )


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
    """One API call: (HTTP status, parsed JSON or error text).

    A write (POST, PUT, PATCH, DELETE) passes the write gate first (:func:`set_write_gate`)
    unless ``fenced=False`` (the leader election's own Lease requests).
    """
    call = _call(
        verb,
        path,
        body,
        content_type,
        query,
        accept,
        fenced=fenced,
        timeout=timeout,
        retries=retries,
    )
    return await _send(call, "json")


async def request_text(verb: str, path: str, query: list[tuple[str, str]]) -> tuple[int, str]:
    """A request answered with text, not JSON (a container's log): (HTTP status, text)."""
    status, text = await _send(_call(verb, path, query=query, accept="*/*"), "text")
    return status, str(text)


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
    """One page of a LIST, undecoded: (HTTP status, the page's bytes, or the error's
    text). :func:`list_pages` decodes it."""
    status, data = await _send(_call("GET", path, query=query, accept=accept), "bytes")
    return status, data if isinstance(data, bytes) else str(data)


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
            page = await loop.run_in_executor(_state.decoder, loads, data)
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


async def request_start(
    verb: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None
) -> tuple[int, Any]:
    """:func:`request` over a few connections of their own, for the calls that start a
    Run (bundle ConfigMap, Job): a burst of status writes and Events waiting for the
    shared connections never delays a Run's Job."""
    return await _send(_call(verb, path, body, query=query, pool="start"), "json")


def apiserver_host() -> tuple[str, int] | None:
    """(host, port) of the apiserver this operator talks to (None before configure)."""
    if _state.config is None:
        return None
    parts = urlsplit(_state.server)
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
