"""MCP test servers built with the ``mcp`` SDK (``MCPServer``), over stdio and streamable HTTP.

This file is self-contained (it imports only ``mcp`` and the standard library) so that it can
be started as ``python tests/support/mcp_servers.py stdio`` with an empty environment, the
way the runner starts stdio servers.

Tools: ``echo(text)``, ``add(a, b)``, ``search_docs(query, limit=5, tags=None)`` (a richer
schema with descriptions and defaults), ``read_env(name)``, ``env_names()``,
``sleep(seconds)``, ``fail(message)`` (always a tool error) and ``whoami()`` (the server's
``--name``), ``pid()``, ``check_quality(diff)`` (the seeds' code-quality-review verdict as
JSON: ``needs-changes`` when the diff has a TODO, an out-of-schema answer when it contains
BAD_OUTPUT, else ``pass``), ``flaky(key, failures)`` (a tool error for the first
``failures`` calls with that key, then ``ok``) and ``count(key)`` (calls seen with that key).

* :func:`stdio_command` — argv for a stdio server (what a Workspace ``command`` would hold).
* :class:`HttpMcpServer` — a streamable-HTTP server in a subprocess on a free loopback port,
  optionally requiring ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

THIS_FILE = Path(__file__).resolve()


#: A runtime image with no local root filesystem, so the process node runs the runner as a
#: host command (its ``*swarmkit-runtime`` rule): for pods that start :func:`stdio_command`, a
#: test script on the host that the real runtime image does not contain.
HOST_RUNTIME_IMAGE = "host.local/swarmkit-runtime:host-command"


def stdio_command(name: str = "test-stdio") -> list[str]:
    """argv that starts the test server over stdio."""
    return [sys.executable, str(THIS_FILE), "stdio", "--name", name]


def build_server(name: str) -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def search_docs(
        query: Annotated[str, Field(description="What to look for.")],
        limit: Annotated[int, Field(description="Most results to return.", ge=1, le=50)] = 5,
        tags: Annotated[list[str] | None, Field(description="Only documents with these tags.")] = (
            None
        ),
    ) -> str:
        """Search the documentation."""
        return f"{limit} results for {query!r} tags={tags or []}"

    @server.tool()
    def read_env(name: str) -> str:
        """The value of an environment variable of the server process, or <unset>."""
        return os.environ.get(name, "<unset>")

    @server.tool()
    def env_names() -> list[str]:
        """Names of every environment variable the server process has."""
        return sorted(os.environ)

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with the message."""
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError(message)

    @server.tool()
    def trace_meta(ctx: Context) -> str:
        """The W3C trace context the client sent in the request's ``params._meta``."""
        meta = dict(ctx.request_context.meta or {})
        return json.dumps({k: meta.get(k) for k in ("traceparent", "tracestate")})

    @server.tool()
    def whoami() -> str:
        """The server's name."""
        return name

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def check_quality(diff: str) -> str:
        """Review a diff against quality standards."""
        import json

        if "BAD_OUTPUT" in diff:
            return json.dumps({"verdict": "great", "confidence": 7})
        if "TODO" in diff:
            return json.dumps(
                {
                    "verdict": "needs-changes",
                    "confidence": 0.8,
                    "reasoning": "a TODO is left in the change",
                    "issues": [
                        {"file": "app.py", "line": 3, "severity": "warning", "message": "TODO"}
                    ],
                }
            )
        return json.dumps({"verdict": "pass", "confidence": 0.95, "reasoning": "clean change"})

    calls: dict[str, int] = {}

    @server.tool()
    def flaky(key: str, failures: int = 1) -> str:
        """Fails (tool error) for the first ``failures`` calls with ``key``, then answers ok."""
        from mcp.server.mcpserver.exceptions import ToolError

        calls[key] = calls.get(key, 0) + 1
        if calls[key] <= failures:
            raise ToolError(f"flaky failure {calls[key]} of {failures}")
        return f"ok after {calls[key]} calls"

    @server.tool()
    def count(key: str) -> int:
        """How often flaky was called with ``key``."""
        return calls.get(key, 0)

    return server


def _serve_http(name: str, port: int, token: str | None) -> None:
    import uvicorn

    server = build_server(name)
    app = server.streamable_http_app(host="127.0.0.1")

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and token is not None:
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    config = uvicorn.Config(guarded, host="127.0.0.1", port=port, log_level="warning")
    uvicorn.Server(config).run()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpMcpServer:
    """The test server over streamable HTTP, in a subprocess (context manager)."""

    def __init__(self, name: str = "test-http", token: str | None = None) -> None:
        self.name = name
        self.token = token
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout: float = 60.0) -> HttpMcpServer:
        argv = [sys.executable, str(THIS_FILE), "http", "--name", self.name]
        argv += ["--port", str(self.port)]
        if self.token:
            argv.append(f"--token={self.token}")  # a token may start with "-"
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"MCP HTTP server exited with {self._proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError("MCP HTTP server did not start in time")

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> HttpMcpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--name", default="test")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token")
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        build_server(args.name).run()
    else:
        _serve_http(args.name, args.port, args.token)


if __name__ == "__main__":
    main()
