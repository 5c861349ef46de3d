"""A scripted model API over real HTTP on 127.0.0.1, speaking the model wire formats.

* Anthropic Messages: ``POST /v1/messages`` (base URL :attr:`ScriptedModelServer.url`)
* Gemini: ``POST /v1beta/models/<model>:generateContent`` (and ``:streamGenerateContent``)
* AWS Bedrock Converse: ``POST /model/<modelId>/converse`` (botocore judges the body and,
  with :attr:`ScriptedModelServer.aws_credentials`, the SigV4 signature: :mod:`.aws`)
* OpenAI Chat Completions: ``POST /v1/chat/completions`` (base :attr:`openai_base_url`),
  also at Azure OpenAI's paths (``/openai/v1/chat/completions``, and
  ``/openai/deployments/<deployment>/chat/completions``, which needs ``?api-version=``)
* OpenAI Responses: ``POST /v1/responses`` (base :attr:`openai_base_url`; streamed as the
  ``response.created`` … ``response.completed`` events, what ``codex exec`` speaks)

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
import socket
import sys
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import aws
from .http_server import QuietHandler
from .model_contract import Wire, check
from .model_replies import (
    Reply,
    StreamCut,
    anthropic_body,
    anthropic_events,
    bedrock_body,
    gemini_body,
    gemini_events,
    openai_body,
    openai_events,
    responses_body,
    responses_events,
)
from .model_requests import RecordedRequest, match_tool

__all__ = [
    "RecordedRequest",
    "Reply",
    "ScriptedModelServer",
    "error",
    "text",
    "tool_call",
    "tool_calls",
]


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
        host: str = "127.0.0.1",
    ) -> None:
        #: The address it listens on (the real node's pods reach the host on its bridge).
        self.host = host
        self._replies: deque[ReplyLike] = deque(replies)
        self.default: ReplyLike = default or Reply(text="done")
        #: When set, requests without this key (x-api-key or Bearer) get 401.
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        #: Requests answered 400 because the real API would refuse them.
        self.refused: list[RecordedRequest] = []
        #: Streams the client closed before their last event.
        self.disconnects = 0
        #: Bedrock: when set (credential_process JSON fields), every request must carry the
        #: SigV4 signature botocore computes with them for :attr:`aws_region`.
        self.aws_credentials: dict[str, str] | None = None
        self.aws_region = "us-east-1"
        self._lock = threading.Lock()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> ScriptedModelServer:
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                server._handle(self)

        self._httpd = _Server((self.host, 0), Handler)
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
        return f"http://{self.host}:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def openai_base_url(self) -> str:
        """Base URL for an OpenAI-compatible provider (``/chat/completions`` or ``/responses``
        is appended)."""
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
        elif path.endswith("/responses"):
            wire = "responses"
        elif path.endswith((":generateContent", ":streamGenerateContent")):
            wire = "gemini"
        elif path.startswith("/model/") and path.endswith("/converse"):
            wire = "bedrock"
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
        beta = bool(headers.get("anthropic-beta"))
        request.problems = (
            check(wire, body, beta) if isinstance(body, dict) else ["body: not an object"]
        )
        if wire == "bedrock" and isinstance(body, dict):
            denied = self._bedrock(handler, request, raw)
            if denied:
                self._send(handler, 403, {"message": denied})
                return
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
        calls = [(match_tool(name, offered), args) for name, args in reply.tool_calls]
        model = str(body.get("model", "")) or path.rsplit("/", 1)[-1].split(":")[0]
        streamed = body.get("stream") is True or path.endswith(":streamGenerateContent")
        # a Responses stream reports an error in a 200 answer as its ``response.failed`` event
        if streamed and (reply.error_in_200 is None or wire == "responses"):
            if wire == "gemini":
                events = gemini_events(n, model, reply, calls)
            elif wire == "anthropic":
                events = anthropic_events(n, model, reply, calls)
            elif wire == "responses":
                events = responses_events(n, model, reply, calls, body)
            else:
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                events = openai_events(n, model, reply, calls, usage)
            self._stream(handler, events, reply.chunk_delay)
            return
        if wire == "bedrock":
            payload = bedrock_body(n, reply, calls)
        elif wire == "gemini":
            payload = gemini_body(n, model, reply, calls)
        elif wire == "anthropic":
            payload = anthropic_body(n, model, reply, calls)
        elif wire == "responses":
            payload = responses_body(n, model, reply, calls, body)
        else:
            payload = openai_body(n, model, reply, calls)
        self._send(handler, 200, payload)

    def _bedrock(
        self, handler: BaseHTTPRequestHandler, request: RecordedRequest, raw: bytes
    ) -> str:
        """botocore judges the body (Converse's service model) and, with
        :attr:`aws_credentials` set, the request's SigV4 signature; the refusal, if any."""
        model_id = urllib.parse.unquote(request.path.split("/")[2])
        signed = self.aws_credentials is not None
        problems, expected = aws.judge(
            model_id=model_id,
            body=request.body,
            url=f"http://{handler.headers.get('host')}{handler.path}",
            data=raw,
            headers=request.headers,
            region=self.aws_region,
            credentials=self.aws_credentials,
        )
        request.problems += problems
        if signed and expected != request.headers.get("authorization"):
            return (
                "The request signature we calculated does not match the signature you "
                "provided. Check your AWS Secret Access Key and signing method."
            )
        return ""

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
