"""The served topology's HTTP surface (a Starlette ASGI app).

* ``GET /.well-known/agent-card.json`` (public): the Agent Card, one document valid for both
  protocol versions the endpoint speaks (:func:`agent_card`). One skill, the topology
  (id = its name, description = its ``spec.description``); the JSON-RPC endpoint
  ``<origin>/a2a``; the origin is the one the card was fetched from (Service DNS name, pod
  address). It says that every call needs an HTTP bearer token.
* ``POST /a2a``: JSON-RPC (:mod:`.wire`). Without ``Authorization: Bearer <token>`` naming
  one of the accepted tokens: 401 with ``WWW-Authenticate: Bearer`` and an RFC 9457 problem
  document (:func:`unauthorized`), and nothing runs. A new
  task past the replica's limit: 429 with ``Retry-After``; while draining: 503 with
  ``Retry-After`` (another replica takes it).
* ``GET /healthz`` (liveness), ``GET /readyz`` (readiness: 503 while draining, so the
  Service stops sending new calls), ``GET /metrics`` (:mod:`.metrics`).

Sends block until the task is settled (terminal or input-required) unless the caller
asks for an immediate answer (1.0 ``returnImmediately``, 0.3 ``blocking: false``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from swarmkit_api.bundle import RunBundle

from .. import traced
from ..spans import tracer
from .metrics import ServeMetrics
from .tasks import Busy, Draining, ServedTask, TaskManager
from .wire import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    METHODS,
    PARSE_ERROR,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    Dialect,
    RpcError,
    artifact_wire,
    message_wire,
    parse_send,
    rpc_error,
    rpc_result,
    sse,
    status_wire,
    task_id_param,
)

CARD_PATH = "/.well-known/agent-card.json"
RPC_PATH = "/a2a"
#: Seconds a refused caller should wait before trying again.
RETRY_AFTER_BUSY = 1
RETRY_AFTER_DRAINING = 1
#: How long a cancel waits for the run to stop before it answers.
CANCEL_WAIT_SECONDS = 10.0


@dataclass
class ServeState:
    """What the app serves."""

    bundle: RunBundle
    manager: TaskManager
    metrics: ServeMetrics
    tokens: Sequence[str]
    version: str

    @property
    def skill_id(self) -> str:
        return self.bundle.target


def _origin(request: Request) -> str:
    host = request.headers.get("host") or f"{request.url.hostname}:{request.url.port}"
    return f"{request.url.scheme}://{host}"


#: The card's name for the one security scheme (what the requirements refer to).
BEARER_SCHEME = "bearer"


def agent_card(state: ServeState, origin: str) -> dict[str, Any]:
    """The Agent Card, for A2A 1.0 and 0.3 clients at once.

    The two versions name different fields, so each reads its own and skips the other's
    (both schemas allow extra members; 1.0 is protobuf JSON, whose parsers ignore unknown
    fields). Where they share a field name the value must satisfy both:

    * the endpoint: 1.0 ``supportedInterfaces`` (the 1.0 entry first, which 1.0 clients
      prefer, then the same URL for 0.3); 0.3 ``url`` + ``preferredTransport`` +
      ``additionalInterfaces`` and the card-level ``protocolVersion``;
    * ``securitySchemes.bearer`` holds both shapes of one HTTP bearer scheme: 0.3's
      discriminated ``{"type": "http", "scheme": "bearer"}`` (``type`` is required there;
      the A2A Go SDK refuses a card without it) and 1.0's oneof member
      ``httpAuthSecurityScheme``;
    * the requirement that every call uses it: 0.3 ``security`` (scheme → scopes) and 1.0
      ``securityRequirements`` (``schemes`` → ``StringList``), so a client attaches the
      token before it is refused (the Go SDK's auth interceptor acts only on these).
    """
    bundle = state.bundle
    topology = bundle.topologies[bundle.target]
    description = topology.spec.description or f"The {bundle.target} topology."
    endpoint = origin + RPC_PATH
    return {
        "name": bundle.target,
        "description": description,
        "version": state.version,
        "supportedInterfaces": [
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        # A2A 0.3 clients read these (1.0 clients use supportedInterfaces).
        "url": endpoint,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": endpoint, "transport": "JSONRPC"}],
        "protocolVersion": "0.3.0",
        "capabilities": {"streaming": True, "pushNotifications": False},
        "securitySchemes": {
            BEARER_SCHEME: {
                "type": "http",
                "scheme": "bearer",
                "httpAuthSecurityScheme": {"scheme": "Bearer"},
            },
        },
        "security": [{BEARER_SCHEME: []}],
        "securityRequirements": [{"schemes": {BEARER_SCHEME: {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": bundle.target,
                "name": bundle.target,
                "description": description,
                "tags": ["topology", f"namespace:{bundle.run.namespace}"],
            }
        ],
    }


def unauthorized(token_given: bool) -> Response:
    """The answer to a call without an accepted bearer token.

    HTTP 401 with the RFC 6750 challenge (``error="invalid_token"`` when a token was sent
    but is not accepted; just the scheme and realm when none was), and as body an RFC 9457
    problem document, not a JSON-RPC error: the A2A SDKs map a JSON-RPC error body by its
    code and A2A has no authentication code (a2a-js 1.x turns -32600 into a
    ``RequestMalformedError``), while a non-JSON-RPC body makes them report the HTTP
    status (a2a-js: ``HTTP error … Status: 401 Unauthorized``; a2a-go: ``unexpected HTTP
    status: 401 Unauthorized``; a2a-sdk for Python: ``HTTP Error 401``). The body has no
    ``error`` member, which the a2a-js streaming path would take for a JSON-RPC error.
    """
    challenge = 'Bearer realm="swarmkit"'
    if token_given:
        challenge += ', error="invalid_token"'
    return JSONResponse(
        {
            "type": "about:blank",
            "title": "Unauthorized",
            "status": 401,
            "detail": "a valid bearer token is required (Authorization: Bearer <token>)",
        },
        status_code=401,
        media_type="application/problem+json",
        headers={"WWW-Authenticate": challenge},
    )


def task_wire(task: ServedTask, dialect: Dialect) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": task.id,
        "contextId": task.context_id,
        "status": status_wire(
            task.state, task.status_message, task.timestamp, task.context_id, task.id, dialect
        ),
        "history": [message_wire(m, task.context_id, task.id, dialect) for m in task.history],
        "metadata": {"correlationId": task.correlation_id},
    }
    if task.answer is not None:
        out["artifacts"] = [artifact_wire(task.artifact_id, task.answer, dialect)]
    if dialect == "0.3":
        out["kind"] = "task"
    return out


def _send_result(task: ServedTask, dialect: Dialect) -> dict[str, Any]:
    wire = task_wire(task, dialect)
    return {"task": wire} if dialect == "1.0" else wire


def _status_event(task: ServedTask, dialect: Dialect) -> dict[str, Any]:
    status = status_wire(
        task.state, task.status_message, task.timestamp, task.context_id, task.id, dialect
    )
    if dialect == "1.0":
        return {"statusUpdate": {"taskId": task.id, "contextId": task.context_id, "status": status}}
    return {
        "kind": "status-update",
        "taskId": task.id,
        "contextId": task.context_id,
        "status": status,
        "final": task.settled,
    }


def _artifact_event(task: ServedTask, dialect: Dialect) -> dict[str, Any]:
    assert task.answer is not None
    event = {
        "taskId": task.id,
        "contextId": task.context_id,
        "artifact": artifact_wire(task.artifact_id, task.answer, dialect),
        "lastChunk": True,
    }
    if dialect == "1.0":
        return {"artifactUpdate": event}
    return {"kind": "artifact-update", **event}


def _authorized(state: ServeState, request: Request) -> bool:
    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    # Compare against every token (constant time each) so timing says nothing of which.
    matched = False
    for accepted in state.tokens:
        matched |= hmac.compare_digest(token.strip().encode(), accepted.encode())
    return matched


def build_app(state: ServeState) -> Starlette:
    endpoints = _Endpoints(state)
    routes = [
        Route(CARD_PATH, endpoints.card, methods=["GET"]),
        Route(RPC_PATH, endpoints.rpc, methods=["POST"]),
        Route("/healthz", endpoints.healthz, methods=["GET"]),
        Route("/readyz", endpoints.readyz, methods=["GET"]),
        Route("/metrics", endpoints.metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes)


@dataclass(frozen=True)
class _Endpoints:
    """The handlers of :func:`build_app`'s routes over one :class:`ServeState`.

    A JSON-RPC call goes :meth:`rpc` (its trace span) → :meth:`handle` (auth, envelope) →
    :meth:`call` (the method, and the refusals a replica answers with an HTTP status).
    """

    state: ServeState

    @property
    def manager(self) -> TaskManager:
        return self.state.manager

    async def card(self, request: Request) -> Response:
        return JSONResponse(agent_card(self.state, _origin(request)))

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(self, request: Request) -> Response:
        if self.manager.draining:
            return PlainTextResponse("draining", status_code=503)
        return PlainTextResponse("ok")

    async def metrics(self, request: Request) -> Response:
        self.state.metrics.active = self.manager.active
        return PlainTextResponse(
            self.state.metrics.render(), media_type="text/plain; version=0.0.4"
        )

    async def rpc(self, request: Request) -> Response:
        """:meth:`handle` in an A2A server span continuing the caller's trace (tracing hook)."""
        try:
            body = json.loads(await request.body())
            op, dialect = METHODS[str(body.get("method"))]
        except (ValueError, KeyError, TypeError, AttributeError):
            return await self.handle(request)
        with (
            tracer().remote(request.headers),
            traced.a2a_server_span(op, self.state.bundle.target, dialect) as span,
        ):
            response = await self.handle(request)
            if response.status_code >= 400:
                span.error(str(response.status_code))
            return response

    async def handle(self, request: Request) -> Response:
        if not _authorized(self.state, request):
            self.state.metrics.reject("unauthorized")
            return unauthorized(bool(request.headers.get("authorization")))
        try:
            body = json.loads(await request.body())
        except ValueError:
            return JSONResponse(rpc_error(None, PARSE_ERROR, "the body is not JSON"))
        if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or "method" not in body:
            return JSONResponse(rpc_error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 request"))
        request_id = body.get("id")
        method = str(body.get("method"))
        if method not in METHODS:
            return JSONResponse(
                rpc_error(request_id, METHOD_NOT_FOUND, f"method {method!r} is not supported")
            )
        op, dialect = METHODS[method]
        return await self.call(request_id, op, dialect, body.get("params"))

    async def call(self, request_id: Any, op: str, dialect: Dialect, params: Any) -> Response:
        manager = self.manager
        try:
            if op in ("send", "stream"):
                return await self.send(request_id, params, dialect, stream=op == "stream")
            task_id = task_id_param(params)
            task = manager.get(task_id)
            if task is None:
                raise RpcError(TASK_NOT_FOUND, f"task {task_id} not found")
            if op == "cancel":
                if task.done:
                    raise RpcError(TASK_NOT_CANCELABLE, f"task {task.id} is {task.state} already")
                await manager.cancel(task)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        manager.wait(task, lambda t: t.done, -1), CANCEL_WAIT_SECONDS
                    )
            return JSONResponse(rpc_result(request_id, task_wire(task, dialect)))
        except RpcError as exc:
            return JSONResponse(rpc_error(request_id, exc.code, exc.message))
        except Busy:
            self.state.metrics.reject("busy")
            return JSONResponse(
                rpc_error(
                    request_id,
                    INVALID_REQUEST,
                    f"busy: this replica runs {manager.max_concurrent} tasks already",
                ),
                status_code=429,
                headers={"Retry-After": str(RETRY_AFTER_BUSY)},
            )
        except Draining:
            self.state.metrics.reject("draining")
            return JSONResponse(
                rpc_error(request_id, INVALID_REQUEST, "this replica is shutting down; retry"),
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER_DRAINING)},
            )

    async def send(self, request_id: Any, params: Any, dialect: Dialect, stream: bool) -> Response:
        manager = self.manager
        incoming = parse_send(params, dialect)
        skill = incoming.metadata.get("skillId")
        if skill and skill != self.state.skill_id:
            raise RpcError(
                INVALID_PARAMS,
                f"no skill {skill!r} here (this agent offers {self.state.skill_id!r})",
            )
        if incoming.task_id is not None:
            task = manager.get(incoming.task_id)
            if task is None:
                raise RpcError(TASK_NOT_FOUND, f"task {incoming.task_id} not found")
            since = task.version
            await manager.answer(task, incoming)
        else:
            task = manager.start(incoming)
            since = 0
        if stream:
            return StreamingResponse(
                self.events(request_id, task, dialect, since),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        if incoming.blocking:
            await manager.wait(task, lambda t: t.settled, since)
        return JSONResponse(rpc_result(request_id, _send_result(task, dialect)))

    async def events(
        self, request_id: Any, task: ServedTask, dialect: Dialect, since: int
    ) -> AsyncIterator[bytes]:
        first = task_wire(task, dialect)
        yield sse(rpc_result(request_id, {"task": first} if dialect == "1.0" else first))
        seen = task.version
        while True:
            if task.settled and seen >= task.version:
                return
            seen = await self.manager.wait_changed(task, seen)
            if task.answer is not None and task.done:
                yield sse(rpc_result(request_id, _artifact_event(task, dialect)))
            yield sse(rpc_result(request_id, _status_event(task, dialect)))
            if task.settled:
                return


__all__ = [
    "BEARER_SCHEME",
    "CARD_PATH",
    "RPC_PATH",
    "ServeState",
    "agent_card",
    "build_app",
    "task_wire",
    "unauthorized",
]
