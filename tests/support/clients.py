"""Third-party SDK clients and servers (A2A Go SDK, A2A JavaScript SDK 1.x / 0.3, TypeScript
MCP SDK) as the tests drive them: each a real program printing one JSON report.

The programs live in ``hack/a2a-go-client`` and ``hack/node-clients``; :func:`clients` builds
/ installs them into ``~/.cache/swarmkit-operator`` on first use (``make clients`` does it
up front; a cached one is a no-op).

::

    report = a2a_go(base_url, token)                       # card, send, stream, poll
    report = node("a2a_js_v1.mjs", base_url, token, text)  # the same with @a2a-js/sdk 1.x
    with JsA2AServer(token) as server: server.card_url     # an @a2a-js/sdk 1.x agent
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import subprocess
import threading
import time
from types import TracebackType
from typing import Any

import httpx

from swarmkit_devcluster.clients import ThirdPartyClients, ensure_clients, go_sdk_version

from .served import free_port

#: The SDK versions the reports come from (what the README lists).
A2A_GO_VERSION = "v0.3.3"
A2A_JS_VERSION = "1.3.0"
A2A_JS_V03_VERSION = "0.3.14"
MCP_TS_VERSION = "1.32.2"


@functools.cache
def clients() -> ThirdPartyClients:
    return ensure_clients()


def npm_version(package: str) -> str:
    """The installed version of an npm package (``package`` as named in package.json)."""
    manifest = clients().node_dir.parent / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text())["version"])


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed (make clients installs it)")
    return node


def _report(argv: list[str], timeout: float) -> dict[str, Any]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise AssertionError(
            f"{argv[0]} {argv[1]} exited {done.returncode}:\n{done.stdout[-2000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def a2a_go(
    base_url: str,
    token: str,
    text: str = "What is the answer?",
    scenario: str = "all",
    timeout: float = 180.0,
) -> dict[str, Any]:
    """The a2a-go client's report (see ``hack/a2a-go-client/main.go``)."""
    assert go_sdk_version() == A2A_GO_VERSION
    argv = [str(clients().go_client), "-base", base_url, "-token", token, "-text", text]
    argv += ["-scenario", scenario, "-timeout", f"{int(timeout) - 10}s"]
    return _report(argv, timeout)


def node(script: str, *args: str, timeout: float = 180.0) -> dict[str, Any]:
    """A ``hack/node-clients`` script's report."""
    return _report([node_binary(), str(clients().node_script(script)), *args], timeout)


class JsA2AServer:
    """An A2A agent built with the A2A JavaScript SDK: ``hack/node-clients/a2a_js_server.mjs``
    (@a2a-js/sdk 1.x, A2A 1.0) or ``a2a_js_v03_server.mjs`` (@a2a-js/sdk 0.3.x, A2A 0.3)."""

    def __init__(self, token: str, script: str = "a2a_js_server.mjs", port: int | None = None):
        self.token = token
        self.script = script
        self.port = port or free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._reader: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def card_url(self) -> str:
        return f"{self.base_url}/.well-known/agent-card.json"

    @property
    def protocol(self) -> str:
        """The A2A version the agent's card offers."""
        return "0.3" if self.script == "a2a_js_v03_server.mjs" else "1.0"

    def received(self) -> list[dict[str, Any]]:
        """What the agent logged: ``{"received": text, …}`` and ``{"refused": why}`` lines."""
        return [json.loads(line) for line in list(self.lines) if line.startswith("{")]

    def __enter__(self) -> JsA2AServer:
        script = clients().node_script(self.script)
        self.proc = subprocess.Popen(
            [node_binary(), str(script), str(self.port), self.token],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        stdout = self.proc.stdout
        assert stdout is not None
        self._reader = threading.Thread(
            target=lambda: self.lines.extend(iter(stdout.readline, "")), daemon=True
        )
        self._reader.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the a2a-js server exited: {''.join(self.lines)[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.card_url, timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.1)
        self.__exit__(None, None, None)
        raise TimeoutError(f"the a2a-js server did not answer: {''.join(self.lines)[-2000:]}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._reader is not None:
            self._reader.join(5)


__all__ = [
    "A2A_GO_VERSION",
    "A2A_JS_V03_VERSION",
    "A2A_JS_VERSION",
    "MCP_TS_VERSION",
    "JsA2AServer",
    "a2a_go",
    "clients",
    "node",
    "npm_version",
]
