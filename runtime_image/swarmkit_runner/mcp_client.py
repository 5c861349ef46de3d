"""MCP client: start the servers a run needs, discover their tools, call them.

* stdio servers are spawned as subprocesses (own session / process group) with only the
  Workspace's ``env`` plus a few non-secret basics (``PATH``, ``HOME``, ``LANG``, …) so that
  ``npx``/``uvx`` resolve; nothing else of the runner's environment (in particular no
  ``SWARMKIT_SECRET_*`` value) is inherited. They are spawned *before* the ``mcp`` SDK is
  imported, so server boot overlaps the SDK import (cold start).
* streamable-HTTP servers get the Workspace's ``headers`` (values from Secrets) on an
  ``httpx2`` client, which is what ``mcp`` 2.x expects. A header whose Secret key is also a
  Workspace ``credentials`` entry goes only to a server URL in that entry's
  ``allowedHosts``; otherwise the server is not connected (``mcp.unavailable`` says why).
* Discovery (``tools/list``, paginated) happens at start-up, concurrently, bounded by each
  server's ``timeoutSeconds`` but never less than :data:`MIN_STARTUP_SECONDS` (booting an
  ``npx``/Python server takes seconds on a busy node; the per-call timeout is another
  matter). An unreachable server is a ``mcp.unavailable`` warning and its
  tools are simply not offered; the run goes on.
* Calls have a per-call timeout and retries on transport failures (not on tool errors).
* :meth:`McpManager.aclose` shuts every server down (stdin closed, then the process group
  is terminated) and closes HTTP sessions.

``anyio`` and ``mcp`` are imported only when a run has a server: a run without MCP never
pays for them at start-up (``tests/unit/runner/test_startup_imports.py``).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from swarmkit_api.workspace import Credential, McpServer, credential_refused

from . import traced
from .audit import AuditLog
from .errors import ToolError
from .secrets import MissingSecret, ScrubbedStream, SecretStore

if TYPE_CHECKING:
    import anyio
    import anyio.abc
    from mcp.client.client import Client

#: Environment passed through to stdio servers (never secrets) unless the Workspace sets them.
PASSTHROUGH_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME")
SHUTDOWN_GRACE_SECONDS = 2.0
#: Least time a server gets to boot and list its tools.
MIN_STARTUP_SECONDS = 10.0
RETRY_DELAY_SECONDS = 0.2


@dataclass(frozen=True)
class McpTool:
    """A tool discovered on a server, with its exact input schema."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]


def _describe(exc: BaseException) -> str:
    """A one-line description of ``exc`` (first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '')}]")
        elif kind == "resource":
            resource = block.resource
            parts.append(str(getattr(resource, "text", None) or getattr(resource, "uri", "")))
        elif kind == "resource_link":
            parts.append(str(getattr(block, "uri", "")))
    text = "\n".join(parts)
    structured = getattr(result, "structured_content", None)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, default=str)
    return text


#: Largest JSON-RPC message read from a stdio server (characters); larger ones are dropped.
MAX_MESSAGE_CHARS = 8 * 1024 * 1024
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def _oversized_answer(head: str) -> str | None:
    """A JSON-RPC error line answering the message that starts with ``head`` (found by its
    ``id`` near the start), or None when no id shows there (the request then times out)."""
    found = _ID.search(head[:512])
    if found is None:
        return None
    error = {
        "code": -32000,
        "message": f"the server's answer exceeded {MAX_MESSAGE_CHARS // (1024 * 1024)} MiB "
        "and was dropped",
    }
    return f'{{"jsonrpc": "2.0", "id": {found.group(1)}, "error": {json.dumps(error)}}}'


def _stderr_target() -> Any:
    """Servers' stderr goes to ours (pod logs), never to stdout (the audit stream); through
    the scrubber when ours scrubs (a server may print the credential it was given)."""
    if isinstance(sys.stderr, ScrubbedStream):
        return sys.stderr.pipe()
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL
    return sys.stderr


@asynccontextmanager
async def process_transport(process: anyio.abc.Process) -> AsyncIterator[Any]:
    """MCP stdio framing (one JSON-RPC message per line) over an already spawned process."""
    import anyio
    import mcp_types
    from anyio.streams.text import TextReceiveStream
    from mcp.os.posix.utilities import terminate_posix_process_tree
    from mcp.shared.message import SessionMessage

    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[Any](0)
    assert process.stdout is not None and process.stdin is not None
    stdout, stdin = process.stdout, process.stdin

    async def reader() -> None:
        buffer = ""
        dropping = False  # inside an oversized message: skip to its newline
        try:
            async with read_send:
                async for chunk in TextReceiveStream(stdout, errors="replace"):
                    if dropping:
                        if "\n" not in chunk:
                            continue
                        chunk = chunk.split("\n", 1)[1]
                        dropping = False
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    if len(buffer) > MAX_MESSAGE_CHARS:
                        # Never parse it (a 50 MB answer costs the runner ~30 s of CPU):
                        # answer the request it belongs to with an error instead.
                        dropping = True
                        oversized = _oversized_answer(buffer)
                        buffer = ""
                        if oversized is not None:
                            lines.append(oversized)
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            message: Any = SessionMessage(
                                mcp_types.jsonrpc_message_adapter.validate_json(line)
                            )
                        except ValueError as exc:
                            message = exc
                        await read_send.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    async def writer() -> None:
        try:
            async with write_recv:
                async for session_message in write_recv:
                    data = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_send.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_recv, write_send
        finally:
            with anyio.CancelScope(shield=True):
                await write_send.aclose()
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stdin.aclose()
                with anyio.move_on_after(SHUTDOWN_GRACE_SECONDS):
                    while process.returncode is None:
                        await anyio.sleep(0.01)
                if process.returncode is None:
                    await terminate_posix_process_tree(process, SHUTDOWN_GRACE_SECONDS)
                await read_recv.aclose()
            tg.cancel_scope.cancel()


class _Connection:
    """One server: its task owns the SDK client for the whole run."""

    def __init__(
        self, server: McpServer, secrets: SecretStore, credentials: Sequence[Credential] = ()
    ) -> None:
        self.server = server
        self.secrets = secrets
        self.credentials = list(credentials)
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.client: Client | None = None
        self.tools: dict[str, McpTool] = {}
        self.error: str | None = None
        self.process: anyio.abc.Process | None = None
        self.task: asyncio.Task[None] | None = None
        self.started_at = time.monotonic()
        self.ready_ms = 0.0

    @property
    def available(self) -> bool:
        return self.client is not None and self.error is None

    def stdio_env(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
        for var in self.server.env:
            if var.secret_key_ref is not None:
                env[var.name] = self.secrets.get(var.secret_key_ref)
            else:
                env[var.name] = var.value or ""
        return env

    def http_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for header in self.server.headers:
            refused = credential_refused(
                self.credentials, header.secret_key_ref, self.server.url or ""
            )
            if refused is not None:
                raise ToolError(
                    f"MCP server {self.server.id}: header {header.name} carries Workspace "
                    f"credential {refused!r}, whose allowedHosts does not list "
                    f"{self.server.url}; not connected",
                    "CredentialNotAllowed",
                )
            value = header.prefix + self.secrets.get(header.secret_key_ref)
            self.secrets.remember(value)
            headers[header.name] = value
        return headers

    async def spawn(self) -> None:
        """Start a stdio server's process (before the SDK is even imported)."""
        if self.server.transport != "stdio":
            return
        import anyio

        assert self.server.command
        try:
            env = self.stdio_env()
            stderr = _stderr_target()
            try:
                self.process = await anyio.open_process(
                    self.server.command, env=env, stderr=stderr, start_new_session=True
                )
            finally:
                if isinstance(stderr, int) and stderr > 2:  # our end of the scrubbed pipe
                    os.close(stderr)
        except MissingSecret as exc:
            self.error = str(exc)
        except OSError as exc:
            self.error = f"cannot start {self.server.command[0]!r}: {exc.strerror or exc}"

    async def run(self) -> None:
        """Connect, discover, then hold the session open until :attr:`stop` is set."""
        import anyio
        from mcp.client.client import Client

        timeout = max(float(self.server.timeout_seconds), MIN_STARTUP_SECONDS)
        try:
            if self.error is not None:
                return
            with anyio.CancelScope(deadline=anyio.current_time() + timeout) as scope:
                if self.server.transport == "stdio":
                    assert self.process is not None
                    async with Client(process_transport(self.process)) as client:
                        await self._serve(client, scope)
                else:
                    await self._run_http(scope)
            if scope.cancelled_caught and not self.ready.is_set():
                self.error = f"no answer within {timeout:g}s"
        except Exception as exc:
            if not self.ready.is_set():
                self.error = _describe(exc)
            else:
                self.error = f"connection lost: {_describe(exc)}"
        finally:
            self.client = None
            self.ready.set()
            if self.process is not None and self.process.returncode is None:
                from mcp.os.posix.utilities import terminate_posix_process_tree

                with anyio.CancelScope(shield=True):
                    await terminate_posix_process_tree(self.process, SHUTDOWN_GRACE_SECONDS)

    async def _run_http(self, scope: anyio.CancelScope) -> None:
        import httpx2
        from mcp.client.client import Client
        from mcp.client.streamable_http import streamable_http_client

        assert self.server.url
        try:
            headers = self.http_headers()
        except (MissingSecret, ToolError) as exc:
            self.error = str(exc)
            return
        timeout = httpx2.Timeout(float(self.server.timeout_seconds), read=300.0)
        from . import egress

        guard = egress.client_kwargs2()
        async with httpx2.AsyncClient(headers=headers, timeout=timeout, **guard) as http:
            transport = streamable_http_client(self.server.url, http_client=http)
            async with Client(transport) as client:
                await self._serve(client, scope)

    async def _serve(self, client: Client, scope: anyio.CancelScope) -> None:
        cursor: str | None = None
        tools: dict[str, McpTool] = {}
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                tools[tool.name] = McpTool(
                    self.server.id, tool.name, tool.description or "", dict(tool.input_schema)
                )
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tools
        self.client = client
        self.ready_ms = round((time.monotonic() - self.started_at) * 1000, 1)
        scope.deadline = math.inf
        self.ready.set()
        await self.stop.wait()


class McpManager:
    """The MCP servers of one run."""

    def __init__(
        self,
        servers: list[McpServer],
        secrets: SecretStore,
        audit: AuditLog,
        credentials: Sequence[Credential] = (),
    ) -> None:
        self._conns = {s.id: _Connection(s, secrets, credentials) for s in servers}
        self._audit = audit
        self._by_prefix = {s.tool_prefix: s.id for s in servers}

    @property
    def server_ids(self) -> list[str]:
        return list(self._conns)

    def server(self, server_id: str) -> McpServer:
        """The declaration of a started server."""
        return self._conns[server_id].server

    def server_for_prefix(self, prefix: str) -> str | None:
        return self._by_prefix.get(prefix)

    async def spawn(self) -> None:
        """Spawn every stdio server process now (they boot while the SDK is imported)."""
        await asyncio.gather(*(c.spawn() for c in self._conns.values()))

    async def start(self) -> None:
        """Connect to every server and discover its tools (concurrently, bounded)."""
        await self.spawn()
        if not self._conns:
            return
        import mcp.client.client  # noqa: F401 - the SDK import overlaps the servers' boot

        for conn in self._conns.values():
            conn.task = asyncio.create_task(conn.run(), name=f"mcp:{conn.server.id}")
        await asyncio.gather(*(c.ready.wait() for c in self._conns.values()))
        for conn in self._conns.values():
            if conn.available:
                self._audit.emit(
                    "mcp.ready",
                    server=conn.server.id,
                    transport=conn.server.transport,
                    tools=len(conn.tools),
                    duration_ms=conn.ready_ms,
                    outcome="ok",
                )
            else:
                self._audit.emit(
                    "mcp.unavailable",
                    server=conn.server.id,
                    transport=conn.server.transport,
                    outcome="unavailable",
                    message=f"MCP server {conn.server.id} is unavailable ({conn.error}); "
                    "its tools are not offered",
                )

    def available(self, server_id: str) -> bool:
        conn = self._conns.get(server_id)
        return conn is not None and conn.available

    def tools(self, server_id: str) -> dict[str, McpTool]:
        """Discovered tools of ``server_id`` (empty when unavailable or unknown)."""
        conn = self._conns.get(server_id)
        return dict(conn.tools) if conn is not None and conn.available else {}

    def error(self, server_id: str) -> str | None:
        conn = self._conns.get(server_id)
        return conn.error if conn is not None else "not started"

    async def call(self, server_id: str, tool: str, arguments: dict[str, Any]) -> str:
        """Call ``tool`` on ``server_id``; a tool error or transport failure is a ToolError."""
        import anyio

        conn = self._conns.get(server_id)
        if conn is None:
            raise ToolError(f"MCP server {server_id} is not started", "McpUnavailable")
        server = conn.server
        attempts = server.retries + 1
        last = ""
        for attempt in range(1, attempts + 1):
            client = conn.client
            if client is None or conn.error is not None:
                raise ToolError(
                    f"MCP server {server_id} is unavailable ({conn.error})", "McpUnavailable"
                )
            # Tracing hook: a `tools/call {tool}` client span, its context in params._meta.
            with traced.mcp_span("tools/call", tool, server_id, server.transport, server.url) as (
                span,
                meta,
            ):
                try:
                    with anyio.fail_after(server.timeout_seconds):
                        result = await client.call_tool(
                            tool,
                            arguments,
                            read_timeout_seconds=float(server.timeout_seconds),
                            meta=meta or None,  # type: ignore[arg-type]
                        )
                except TimeoutError:
                    last = f"no answer within {server.timeout_seconds}s"
                    span.error("timeout", last)
                except Exception as exc:
                    last = _describe(exc)
                    span.error(type(exc).__name__, last)
                else:
                    text = _result_text(result)
                    if getattr(result, "is_error", False):
                        span.error("tool_error")
                        raise ToolError(text or "the tool reported an error", "McpToolError")
                    return text
            if attempt < attempts:
                await asyncio.sleep(RETRY_DELAY_SECONDS * attempt)
        raise ToolError(
            f"{server_id}.{tool} failed after {attempts} attempt(s): {last}", "McpCallFailed"
        )

    async def aclose(self) -> None:
        """Shut every server down cleanly (bounded)."""
        tasks = [c.task for c in self._conns.values() if c.task is not None]
        for conn in self._conns.values():
            conn.stop.set()
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=3 * SHUTDOWN_GRACE_SECONDS + 2)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=SHUTDOWN_GRACE_SECONDS)
        for conn in self._conns.values():  # spawned but never connected
            if conn.task is None and conn.process is not None and conn.process.returncode is None:
                from mcp.os.posix.utilities import terminate_posix_process_tree

                await terminate_posix_process_tree(conn.process, SHUTDOWN_GRACE_SECONDS)
