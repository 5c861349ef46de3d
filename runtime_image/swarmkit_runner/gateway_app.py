"""The MCP gateway's HTTP side: bearer auth, ``/mcp`` (stateful streamable HTTP), ``/healthz``.

:func:`build_app` wraps a :class:`.gateway.Gateway` (the agent's catalog and sessions) in
the MCP SDK's server and Starlette: tokens checked by the gateway (refusals audited as
``auth.refused``), a request for a session this process does not know answered 404 with a
JSON-RPC error saying to start a new one, the sessionless protocol's ``server/discover``
refused so clients fall back to ``initialize``; :func:`serve` runs it under uvicorn until
SIGTERM with a bounded graceful shutdown on a ``SO_REUSEPORT`` socket.
"""

from __future__ import annotations

import contextlib
import signal
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from . import traced
from .errors import BundleError, StartupError
from .gateway import MAX_SESSIONS, Gateway, Session
from .listen import listen_socket

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.types import ASGIApp

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
#: Seconds in-flight requests get to finish after SIGTERM.
GRACEFUL_SHUTDOWN_SECONDS = 10
SESSION_HEADER = "mcp-session-id"
#: What a sessionless (2026-07-28 protocol) client may send to correlate its requests.
CORRELATION_HEADER = "x-correlation-id"


def _header(request: Any, name: str) -> str | None:
    headers = getattr(request, "headers", None)
    value = headers.get(name) if headers is not None else None
    return str(value) if value else None


def _identity_of(request: Any) -> str:
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    return str(getattr(user, "username", "") or "unknown")


def build_app(gateway: Gateway) -> Starlette:
    """The ASGI app: bearer auth → ``/mcp`` (stateful streamable HTTP) and ``/healthz``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    manager = _session_manager(gateway)

    async def health(_request: Request) -> Response:
        if gateway.ready:
            return PlainTextResponse("ok")
        return PlainTextResponse("starting", status_code=503)

    return Starlette(
        routes=[
            Route(MCP_PATH, endpoint=_mcp_endpoint(gateway, manager)),
            Route(HEALTH_PATH, endpoint=health),
        ],
        middleware=_auth_middleware(gateway),
        lifespan=_lifespan(gateway, manager),
    )


def _session_manager(gateway: Gateway) -> StreamableHTTPSessionManager:
    """The MCP SDK's server over the gateway's catalog and sessions, and its session manager."""
    import mcp_types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.shared.exceptions import MCPError

    def session_of(ctx: ServerRequestContext[Any, Any]) -> Session:
        session_id = _header(ctx.request, SESSION_HEADER) or _header(
            ctx.request, CORRELATION_HEADER
        )
        if session_id is None:  # a sessionless (2026-07-28) request: its own correlation
            session_id = f"request-{uuid.uuid4().hex[:16]}"
        client_info = getattr(ctx.session.client_params, "client_info", None)
        client = getattr(client_info, "name", None)
        return gateway.session(session_id, _identity_of(ctx.request), client)

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=gateway.list_tools(session_of(ctx)))

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        session = session_of(ctx)
        # Tracing hook: a server span in the harness's trace (traceparent in params._meta).
        with traced.mcp_server_span(params.name, params.meta, session.session_id) as span:
            result = await gateway.call_tool(session, params.name, params.arguments)
            if result.is_error:
                span.error("tool_error")
            return result

    agent = gateway.agent
    server: Server[Any] = Server(
        f"swarmkit-{agent.name}",
        version=agent.version,
        instructions=agent.spec.description or None,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )

    async def sessions_only(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        # Sessions are what the audit correlates: a client that probes for the sessionless
        # protocol (server/discover) is told it is not spoken and falls back to initialize.
        if ctx.method == "server/discover":
            raise MCPError(
                code=mcp_types.METHOD_NOT_FOUND,
                message="this gateway speaks the session protocol (initialize)",
            )
        return await call_next(ctx)

    server.middleware.append(sessions_only)
    return StreamableHTTPSessionManager(
        app=server,
        # A tool call is one request and one answer (nothing is streamed back while it
        # runs): a JSON response costs about a third less CPU per call than an SSE stream.
        json_response=True,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def _mcp_endpoint(gateway: Gateway, manager: StreamableHTTPSessionManager) -> ASGIApp:
    """``/mcp``: the SDK's app behind its auth check; a session this process does not know
    (restarted, or rolled to a new version) is answered 404 with a JSON-RPC error."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, RequireAuthMiddleware
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.types import Receive, Scope, Send

    agent = gateway.agent
    known: OrderedDict[str, None] = OrderedDict()
    inner = RequireAuthMiddleware(StreamableHTTPASGIApp(manager), [])

    class McpEndpoint:
        """An ASGI app (a plain function would be taken for a GET-only request handler)."""

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await mcp_endpoint(scope, receive, send)

    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        session_id = Request(scope).headers.get(SESSION_HEADER)
        if (
            session_id
            and session_id not in known
            and isinstance(scope.get("user"), AuthenticatedUser)
        ):
            message = (
                f"MCP session {session_id} is not open on this gateway (agent {agent.name} "
                f"version {agent.version}): the gateway was restarted or rolled to a new "
                "version; start a new session"
            )
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return

        async def remember(message: Any) -> None:
            if message.get("type") == "http.response.start":
                for key, value in message.get("headers") or ():
                    if key.decode().lower() == SESSION_HEADER:
                        known[value.decode()] = None
                        while len(known) > MAX_SESSIONS:
                            known.popitem(last=False)
            await send(message)

        await inner(scope, receive, remember)

    return McpEndpoint()


def _auth_middleware(gateway: Gateway) -> list[Middleware]:
    """Bearer tokens checked by the gateway; a refusal on ``/mcp`` is audited (auth.refused)."""
    from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
    from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
    from mcp.server.auth.provider import AccessToken
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.requests import HTTPConnection

    class Tokens:
        async def verify_token(self, token: str) -> AccessToken | None:
            name = gateway.identity(token)
            return None if name is None else AccessToken(token=token, client_id=name, scopes=[])

    class AuditedBearer(BearerAuthBackend):
        async def authenticate(self, conn: HTTPConnection) -> Any:
            found = await super().authenticate(conn)
            if found is None and conn.url.path == MCP_PATH:
                presented = conn.headers.get("authorization", "")
                gateway.audit.emit(
                    "auth.refused",
                    agent=gateway.agent.name,
                    reason="wrong token" if presented else "no bearer token",
                    client=conn.client.host if conn.client else None,
                    outcome="refused",
                )
            return found

    return [
        Middleware(AuthenticationMiddleware, backend=AuditedBearer(Tokens())),
        Middleware(AuthContextMiddleware),
    ]


def _lifespan(
    gateway: Gateway, manager: StreamableHTTPSessionManager
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """Start the gateway (a failure is kept for :func:`serve`), run the session manager,
    and close the gateway when the server stops."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            await gateway.start()
        except Exception as exc:
            gateway.failed = exc
            await gateway.aclose()
            raise
        try:
            async with manager.run():
                yield
        finally:
            gateway.ready = False
            gateway.audit.emit(
                "gateway.stop", agent=gateway.agent.name, sessions=len(gateway.sessions)
            )
            await gateway.aclose()

    return lifespan


def _stopped(_sig: int, _frame: Any) -> None:
    """The signal uvicorn re-raises after its graceful shutdown (nothing left to do)."""


async def serve(gateway: Gateway, host: str, port: int) -> None:
    """Serve until SIGTERM/SIGINT (uvicorn's graceful shutdown)."""
    import uvicorn

    config = uvicorn.Config(
        build_app(gateway),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    server = uvicorn.Server(config)
    sock = listen_socket(host, port)
    # uvicorn re-raises the signal that stopped it once it has shut down gracefully; with
    # these handlers in place that is a no-op and the process exits 0 (a clean stop).
    previous = {sig: signal.signal(sig, _stopped) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if gateway.failed is not None:
        if isinstance(gateway.failed, BundleError | StartupError):
            raise gateway.failed
        raise BundleError(f"the gateway did not start: {gateway.failed}")


__all__ = ["HEALTH_PATH", "MCP_PATH", "build_app", "serve"]
