"""A scripted model API over real HTTP on 127.0.0.1, speaking two wire formats.

* Anthropic Messages: ``POST /v1/messages`` (base URL :attr:`ScriptedModelServer.url`)
* Gemini: ``POST /v1beta/models/<model>:generateContent`` (and ``:streamGenerateContent``)
* OpenAI Chat Completions: ``POST /v1/chat/completions`` (base :attr:`openai_base_url`),
  also at Azure OpenAI's paths (``/openai/v1/chat/completions``, and
  ``/openai/deployments/<deployment>/chat/completions``, which needs ``?api-version=``)

Replies are scripted in order (:func:`text`, :func:`tool_call`, :func:`error`, or a callable
that receives the :class:`RecordedRequest` and returns a :class:`Reply`); when the script is
exhausted the server answers with ``default`` (a final text). Every request is recorded with
its parsed body, headers and arrival time, so tests can assert what the runner sent.

Every request body is first checked as the real API would check it
(:mod:`tests.support.model_contract`: the official ``openai``/``anthropic`` SDKs' request
types plus the APIs' documented rules); a body the real API refuses gets its 400 (an
``invalid_request_error`` naming the problems) and is listed in :attr:`refused`. A request
with ``stream: true`` is answered with server-sent events (:mod:`tests.support.model_replies`
has every documented odd answer, whole or streamed); a client that closes a stream early is
counted in :attr:`disconnects`.

A scripted tool call names the tool as the agent sees it (``pg.list_tables``) or as it is on
the wire (``pg_list_tables``); the server picks the offered tool that matches.

Example::

    with ScriptedModelServer([tool_call("echo", text="hi"), text("done")]) as server:
        provider = {"name": "m", "type": "openai", "baseUrl": server.openai_base_url, ...}
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .model_contract import Wire, check
from .model_replies import (
    Reply,
    StreamCut,
    anthropic_body,
    anthropic_events,
    gemini_body,
    gemini_events,
    openai_body,
    openai_events,
)

__all__ = [
    "RecordedRequest",
    "Reply",
    "ScriptedModelServer",
    "error",
    "text",
    "tool_call",
    "tool_calls",
]

_INVALID = re.compile(r"[^A-Za-z0-9_-]")


ReplyLike = Reply | Callable[["RecordedRequest"], Reply]


def text(content: str, **kwargs: Any) -> Reply:
    """A final answer."""
    return Reply(text=content, **kwargs)


def tool_call(tool: str, /, **arguments: Any) -> Reply:
    """One tool call (``arguments`` as keyword arguments, any names allowed)."""
    return Reply(tool_calls=[(tool, arguments)])


def tool_calls(*calls: tuple[str, dict[str, Any]], say: str = "") -> Reply:
    """Several tool calls in one turn (optionally with text ``say``)."""
    return Reply(text=say, tool_calls=list(calls))


def error(status: int = 429, retry_after: float | None = 0.0, body: str | None = None) -> Reply:
    """An HTTP error answer (429/5xx are retried by the runner)."""
    reply = Reply(status=status, retry_after=retry_after)
    if body is not None:
        reply.error_body = body
    return reply


@dataclass
class RecordedRequest:
    """A request the server received."""

    wire: Wire
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    #: Why the real API would refuse the body (empty: accepted and answered).
    problems: list[str] = field(default_factory=list)
    #: The URL's query parameters (Azure's ``api-version``).
    query: dict[str, str] = field(default_factory=dict)

    @property
    def tools(self) -> dict[str, dict[str, Any]]:
        """Offered tool name → input schema."""
        out: dict[str, dict[str, Any]] = {}
        if self.wire == "gemini":
            for tool in self.body.get("tools") or []:
                for fn in tool.get("functionDeclarations") or []:
                    out[fn["name"]] = fn.get("parametersJsonSchema", {})
            return out
        for tool in self.body.get("tools") or []:
            if self.wire == "anthropic":
                out[tool["name"]] = tool.get("input_schema", {})
            else:
                fn = tool.get("function", {})
                out[fn["name"]] = fn.get("parameters", {})
        return out

    @property
    def tool_names(self) -> list[str]:
        return list(self.tools)

    def tool_description(self, name: str) -> str:
        for tool in self.body.get("tools") or []:
            fn = tool if self.wire == "anthropic" else tool.get("function", {})
            if fn.get("name") == name:
                return str(fn.get("description", ""))
        raise KeyError(name)

    @property
    def system(self) -> str:
        if self.wire == "gemini":
            parts = (self.body.get("systemInstruction") or {}).get("parts") or []
            return "".join(str(p.get("text", "")) for p in parts)
        if self.wire == "anthropic":
            system = self.body.get("system", "")
            if isinstance(system, list):
                return "".join(b.get("text", "") for b in system)
            return str(system)
        for msg in self.body.get("messages", []):
            if msg.get("role") == "system":
                return str(msg.get("content", ""))
        return ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        if self.wire == "gemini":  # as role/content, the parts' text joined
            return [
                {
                    "role": c.get("role"),
                    "content": "".join(str(p.get("text", "")) for p in c.get("parts") or []),
                    "parts": c.get("parts") or [],
                }
                for c in self.body.get("contents") or []
            ]
        return list(self.body.get("messages", []))

    @property
    def first_user_text(self) -> str:
        for msg in self.messages:
            if msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, str):
                    return content
        return ""

    def tool_results(self) -> list[tuple[str, bool]]:
        """(content, is_error) of the tool results in the latest turn."""
        msgs = self.messages
        if self.wire == "gemini":
            last = msgs[-1] if msgs else {}
            out_g = []
            for part in last.get("parts") or []:
                response = (part.get("functionResponse") or {}).get("response")
                if isinstance(response, dict):
                    is_error = "error" in response
                    out_g.append((str(response.get("error" if is_error else "output")), is_error))
            return out_g
        if self.wire == "anthropic":
            last = msgs[-1] if msgs else {}
            content = last.get("content")
            if not isinstance(content, list):
                return []
            return [
                (str(b.get("content", "")), bool(b.get("is_error")))
                for b in content
                if b.get("type") == "tool_result"
            ]
        out: list[tuple[str, bool]] = []
        for msg in reversed(msgs):
            if msg.get("role") != "tool":
                break
            content = str(msg.get("content", ""))
            out.append((content, content.startswith("ERROR: ")))
        return list(reversed(out))


def _match_tool(name: str, offered: list[str]) -> str:
    if name in offered:
        return name
    wanted = _INVALID.sub("_", name)
    for candidate in offered:
        if candidate == wanted or _INVALID.sub("_", candidate) == wanted:
            return candidate
    return name  # not offered: the runner must refuse it


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that closed its connection (a cancelled stream, a timed-out call) is
        # what several tests do on purpose; anything else is still reported.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedModelServer:
    """The server; use as a context manager (or :meth:`start`/:meth:`close`)."""

    def __init__(
        self,
        replies: Iterable[ReplyLike] = (),
        default: ReplyLike | None = None,
        api_key: str | None = None,
    ) -> None:
        self._replies: deque[ReplyLike] = deque(replies)
        self.default: ReplyLike = default or Reply(text="done")
        #: When set, requests without this key (x-api-key or Bearer) get 401.
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        #: Requests answered 400 because the real API would refuse them.
        self.refused: list[RecordedRequest] = []
        #: Streams the client closed before their last event.
        self.disconnects = 0
        self._lock = threading.Lock()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> ScriptedModelServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                server._handle(self)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- addresses ----------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for the Anthropic provider (``/v1/messages`` is appended)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def openai_base_url(self) -> str:
        """Base URL for an OpenAI-compatible provider (``/chat/completions`` is appended)."""
        return f"{self.url}/v1"

    # -- script -------------------------------------------------------------------------
    def push(self, *replies: ReplyLike) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        return len(self._replies)

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            item = self._replies.popleft() if self._replies else self.default
        return item(request) if callable(item) else item

    # -- handling -----------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        at = time.time()
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b"{}"
        path, _, query_text = handler.path.partition("?")
        query = dict(urllib.parse.parse_qsl(query_text))
        if path.endswith("/messages"):
            wire: Wire = "anthropic"
        elif path.endswith("/chat/completions"):
            wire = "openai"
        elif path.endswith((":generateContent", ":streamGenerateContent")):
            wire = "gemini"
        else:
            self._send(handler, 404, {"error": f"unknown path {path}"})
            return
        if "/openai/deployments/" in path and "api-version" not in query:
            # Azure's answer to a deployment URL without its api-version
            self._send(handler, 404, {"error": {"code": "404", "message": "Resource not found"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(handler, 400, {"error": "invalid JSON"})
            return
        headers = {k.lower(): v for k, v in handler.headers.items()}
        request = RecordedRequest(wire, path, headers, body, at, query=query)
        with self._lock:
            self.requests.append(request)
            self._counter += 1
            n = self._counter
        if self.api_key is not None:
            presented = (
                headers.get("x-api-key")
                or headers.get("api-key")  # Azure OpenAI
                or headers.get("x-goog-api-key")  # Gemini
                or headers.get("authorization", "").removeprefix("Bearer ")
            )
            if presented != self.api_key:
                self._send(handler, 401, {"error": {"type": "authentication_error"}})
                return
        request.problems = check(wire, body) if isinstance(body, dict) else ["body: not an object"]
        if wire == "anthropic" and not headers.get("anthropic-version"):
            request.problems.append("anthropic-version: header is required")
        if request.problems:
            with self._lock:
                self.refused.append(request)
            message = "; ".join(request.problems)
            error = {"type": "invalid_request_error", "message": message}
            payload = {"type": "error", "error": error} if wire == "anthropic" else {"error": error}
            self._send(handler, 400, payload)
            return
        reply = self._next(request)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            extra = {}
            if reply.retry_after is not None:
                extra["retry-after"] = f"{reply.retry_after:g}"
            if reply.retry_after_ms is not None:
                extra["retry-after-ms"] = f"{reply.retry_after_ms:g}"
            if reply.should_retry is not None:
                extra["x-should-retry"] = reply.should_retry
            self._send_raw(handler, reply.status, reply.error_body.encode(), extra)
            return
        offered = request.tool_names
        calls = [(_match_tool(name, offered), args) for name, args in reply.tool_calls]
        model = str(body.get("model", "")) or path.rsplit("/", 1)[-1].split(":")[0]
        streamed = body.get("stream") is True or path.endswith(":streamGenerateContent")
        if streamed and reply.error_in_200 is None:
            if wire == "gemini":
                events = gemini_events(n, model, reply, calls)
            elif wire == "anthropic":
                events = anthropic_events(n, model, reply, calls)
            else:
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                events = openai_events(n, model, reply, calls, usage)
            self._stream(handler, events, reply.chunk_delay)
            return
        if wire == "gemini":
            payload = gemini_body(n, model, reply, calls)
        elif wire == "anthropic":
            payload = anthropic_body(n, model, reply, calls)
        else:
            payload = openai_body(n, model, reply, calls)
        self._send(handler, 200, payload)

    def _stream(
        self,
        handler: BaseHTTPRequestHandler,
        events: Iterable[tuple[str | None, Any]],
        delay: float,
    ) -> None:
        """Send ``events`` as server-sent events (chunked); a dropped client is counted."""
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()

        def write(data: bytes) -> None:
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

        try:
            for i, (event, data) in enumerate(events):
                if i and delay:
                    time.sleep(delay)
                line = data if isinstance(data, str) else json.dumps(data)
                frame = (f"event: {event}\n" if event else "") + f"data: {line}\n\n"
                write(frame.encode())
            write(b"")
        except StreamCut:
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError):
            with self._lock:
                self.disconnects += 1
            handler.close_connection = True

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        ScriptedModelServer._send_raw(handler, status, json.dumps(payload).encode(), {})

    @staticmethod
    def _send_raw(
        handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str]
    ) -> None:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)
