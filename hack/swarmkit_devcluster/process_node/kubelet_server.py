"""The node's kubelet port, so that ``kubectl logs [-f]`` works (the apiserver proxies to the
``daemonEndpoints.kubeletEndpoint`` port the node reports).

``GET /containerLogs/<namespace>/<pod>/<container>`` serves ``<pods dir>/<ns>_<pod>/
<container>.log`` with ``tailLines``, ``limitBytes`` and ``follow`` (chunked, until the
container has stopped and the log is idle); ``GET /healthz`` says ok. TLS when the node has a
serving certificate.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

log = logging.getLogger("process-node")

# (namespace, pod, container) -> whether the container is running or may run again
ContainerRunning = Callable[[str, str, str], bool]


class KubeletServer(ThreadingHTTPServer):
    def __init__(
        self, pods_dir: Path, container_running: ContainerRunning, stop_event: threading.Event
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pods_dir = pods_dir
        self.container_running = container_running
        self.stop_event = stop_event


def start_kubelet_server(
    pods_dir: Path,
    container_running: ContainerRunning,
    stop_event: threading.Event,
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> KubeletServer:
    """Listen on a free loopback port and serve in a daemon thread; ``.shutdown()`` stops it."""
    httpd = KubeletServer(pods_dir, container_running, stop_event)
    httpd.daemon_threads = True
    if tls_cert and tls_key:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls_cert, tls_key)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, name="kubelet-api", daemon=True).start()
    return httpd


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: KubeletServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("kubelet-api: " + format, *args)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        if parts == ["healthz"]:
            self._send(200, b"ok")
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            self._send(404, b"not found")
            return
        ns, pod, container = parts[1:]
        path = self.server.pods_dir / f"{ns}_{pod}" / f"{container}.log"
        if not path.exists():
            self._send(404, f"no logs for {ns}/{pod}/{container}".encode())
            return
        follow = q.get("follow", ["false"])[0] == "true"
        tail = q.get("tailLines", [None])[0]
        limit = q.get("limitBytes", [None])[0]
        data = path.read_bytes()
        if tail is not None:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(tail) :]) if int(tail) > 0 else b""
        if limit is not None:
            data = data[: int(limit)]
        if not follow:
            self._send(200, data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        offset = path.stat().st_size
        try:
            self._chunk(data)
            idle = 0.0
            while not self.server.stop_event.is_set():
                size = path.stat().st_size
                if size > offset:
                    with open(path, "rb") as fh:
                        fh.seek(offset)
                        chunk = fh.read(size - offset)
                    offset = size
                    self._chunk(chunk)
                    idle = 0.0
                    continue
                if not self.server.container_running(ns, pod, container):
                    idle += 0.2
                    if idle > 1.0:
                        break
                time.sleep(0.2)
            self._chunk(b"")
        except (BrokenPipeError, ConnectionError):
            pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
