"""The floor of an MCP gateway built on the ``mcp`` SDK, for ``bench/bench_gateway.py``.

A minimal pass-through MCP server made of the SDK pieces the real gateway
(``runtime_image/swarmkit_runner/gateway_app.py``) uses: a ``mcp.server.lowlevel.Server``
whose ``on_list_tools`` / ``on_call_tool`` forward to one upstream through one persistent SDK
client session (``mcp.client.client.Client`` over streamable HTTP on an ``httpx2`` client,
as the runner's MCP client connects), behind ``StreamableHTTPSessionManager(json_response=True)``
in Starlette under uvicorn, on the same listening socket (``swarmkit_runner.listen``). Like
the gateway it refuses the sessionless protocol's ``server/discover``, so its clients speak
the same session protocol to it. Nothing else: no auth, catalog, tiers, tracing or audit.
What the gateway costs above this is what governance costs; this above a direct call is what
any gateway on this SDK costs.

Usage: ``python bench/mcp_relay.py --upstream URL --port N`` (the upstream's bearer token,
if any, in ``RELAY_UPSTREAM_TOKEN``); ``GET /healthz`` answers 200 once the upstream session
is open; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import mcp_types
import uvicorn
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from swarmkit_runner.listen import listen_socket


class Upstream:
    """The one upstream client session, opened in the app's lifespan."""

    client: Client | None = None


def relay_server(upstream: Upstream) -> Server[Any]:
    """The SDK's low-level server forwarding ``tools/list`` and ``tools/call``."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        assert upstream.client is not None
        return await upstream.client.list_tools(cursor=params.cursor if params else None)

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        assert upstream.client is not None
        return await upstream.client.call_tool(params.name, params.arguments)

    server: Server[Any] = Server(
        "mcp-relay", on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )

    async def sessions_only(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        # As the gateway: clients fall back to initialize (the session protocol).
        if ctx.method == "server/discover":
            raise MCPError(code=mcp_types.METHOD_NOT_FOUND, message="session protocol only")
        return await call_next(ctx)

    server.middleware.append(sessions_only)
    return server


def build_app(url: str, token: str | None) -> Starlette:
    """``/mcp`` (the relay) and ``/healthz`` (200 once the upstream session is open)."""
    upstream = Upstream()
    manager = StreamableHTTPSessionManager(
        app=relay_server(upstream),
        json_response=True,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            upstream.client = client
            async with manager.run():
                yield

    async def health(_request: Request) -> Response:
        ready = upstream.client is not None
        return PlainTextResponse("ok" if ready else "starting", status_code=200 if ready else 503)

    return Starlette(
        routes=[
            Route("/mcp", endpoint=StreamableHTTPASGIApp(manager)),
            Route("/healthz", endpoint=health),
        ],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the upstream's streamable-HTTP URL")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = build_app(args.upstream, os.environ.get("RELAY_UPSTREAM_TOKEN"))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listen_socket(args.host, args.port)]))


if __name__ == "__main__":
    main()
