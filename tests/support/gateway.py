"""Drive the MCP gateway: the real ``python -m swarmkit_runner gateway`` and the public SDK client.

* :class:`GatewayProcess` starts the gateway as a subprocess on a free loopback port (or
  the port the caller gives), waits for ``/healthz`` and collects its audit lines.
* :func:`mcp_client` opens a session with the public ``mcp`` client over streamable HTTP
  (``httpx2``, as ``mcp`` 2.x wants) with a bearer token.
* :func:`status_of` is the HTTP status of one raw request (for 401 checks).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from .bundles import BundleLayout
from .mcp_servers import free_port
from .runner import runner_env


class GatewayProcess:
    """``python -m swarmkit_runner gateway`` on ``layout`` (context manager)."""

    def __init__(
        self, layout: BundleLayout, env: Mapping[str, str], port: int | None = None
    ) -> None:
        self.layout = layout
        self.env = dict(env)
        self.port = port or free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.stderr = ""
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout: float = 60.0) -> GatewayProcess:
        argv = [sys.executable, "-m", "swarmkit_runner", "gateway"]
        argv += [
            "--bundle",
            str(self.layout.bundle_dir),
            "--skills-dir",
            str(self.layout.skills_dir),
        ]
        argv += ["--scratch", str(self.layout.scratch), "--host", "127.0.0.1"]
        argv += ["--port", str(self.port)]
        self.proc = subprocess.Popen(
            argv,
            env=runner_env(self.env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stdout = self.proc.stdout
        assert stdout is not None
        self._reader = threading.Thread(
            target=lambda: self.lines.extend(iter(stdout.readline, "")), daemon=True
        )
        self._reader.start()
        if until_healthy(self.proc, f"http://127.0.0.1:{self.port}/healthz", timeout):
            return self
        if self.proc.poll() is not None:
            self.stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"gateway exited {self.proc.returncode}: {self.stderr}")
        self.stop()
        raise RuntimeError("the gateway did not become healthy in time")

    def audit(self, event: str | None = None) -> list[dict[str, Any]]:
        events = [json.loads(line) for line in list(self.lines) if line.startswith("{")]
        return [e for e in events if event is None or e.get("event") == event]

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        stop_process(self.proc, timeout)
        if self._reader is not None:
            self._reader.join(5)
        if self.proc.stderr is not None and not self.stderr:
            self.stderr = self.proc.stderr.read()
        return self.proc.returncode

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def until_healthy(proc: subprocess.Popen[Any], url: str, timeout: float) -> bool:
    """Poll ``url`` until it answers 200 (True); False once ``proc`` exited or ``timeout``
    passed (the caller says which)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if status_of(url) == 200:
            return True
        time.sleep(0.1)
    return False


def stop_process(proc: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """SIGTERM ``proc`` if it runs, wait ``timeout``, then kill it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def status_of(
    url: str, token: str | None = None, method: str = "GET", session: str | None = None
) -> int:
    """The HTTP status of one request (0 when nothing answers); a POST is an
    ``initialize`` (with ``session``: a ``tools/list`` in that MCP session)."""
    return exchange(url, token, method, session)[0]


def exchange(
    url: str, token: str | None = None, method: str = "GET", session: str | None = None
) -> tuple[int, dict[str, str]]:
    """(HTTP status, response headers) of one request (see :func:`status_of`)."""
    request = urllib.request.Request(url, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if session is not None:
        request.add_header("Mcp-Session-Id", session)
        request.add_header("Mcp-Protocol-Version", "2025-11-25")
    if method == "POST":
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json, text/event-stream")
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        if session is None:
            message["method"] = "initialize"
            message["params"] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "probe", "version": "0"},
            }
        request.data = json.dumps(message).encode()
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return int(exc.code), dict(exc.headers)
    except OSError:
        return 0, {}


@asynccontextmanager
async def mcp_client(url: str, token: str, name: str = "test-harness") -> AsyncIterator[Any]:
    """A connected public SDK client (streamable HTTP, bearer ``token``)."""
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)
    ) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport) as client:
            yield client


__all__ = ["GatewayProcess", "exchange", "mcp_client", "status_of"]
