"""A tiny recording HTTP server on 127.0.0.1 (for HTTP tools and web search).

Each request is recorded (method, path, query, headers, JSON body); the answer comes from
``responder(request) -> (status, body)`` or ``(status, body, headers)`` (default: 200 with a
JSON echo of the request).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class HttpRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


Responder = Callable[[HttpRequest], tuple[int, Any] | tuple[int, Any, dict[str, str]]]


def echo(request: HttpRequest) -> tuple[int, Any]:
    return 200, {
        "method": request.method,
        "path": request.path,
        "query": request.query,
        "body": request.body,
    }


class QuietHandler(BaseHTTPRequestHandler):
    """The test servers' request handler base: HTTP/1.1 keep-alive, no Nagle delay (a small
    reply is not held back ~40 ms), no access log on stderr."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return


class RecordingHttpServer:
    def __init__(self, responder: Responder = echo, port: int = 0) -> None:
        self.responder = responder
        self.port = port  # 0: a free one
        self.requests: list[HttpRequest] = []
        self._httpd: ThreadingHTTPServer | None = None

    def start(self) -> RecordingHttpServer:
        server = self

        class Handler(QuietHandler):
            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                parts = urlsplit(self.path)
                request = HttpRequest(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                server.requests.append(request)
                status, payload, *more = server.responder(request)
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for name, value in (more[0] if more else {}).items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> RecordingHttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
