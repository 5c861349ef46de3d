"""Misbehaving peers for the adversarial runner tests, all real processes / sockets.

* ``python adversaries.py mcp MODE`` - a stdio MCP server speaking raw JSON-RPC (no SDK, so
  it can break the protocol on purpose). It answers ``initialize`` and ``tools/list``
  (one tool, ``poke``) correctly; ``tools/call`` then: ``hang`` never answers, ``crash``
  exits mid-call, ``big`` answers 50 MB of text, ``large`` 2 MB, ``malformed`` writes lines
  that are not JSON-RPC (and never a real answer), ``ok`` answers ``poked``.
* :class:`RawModelServer` - an HTTP server on loopback answering every POST with a fixed
  raw body (garbage, truncated JSON) so the runner's model client meets broken wire data.

Self-contained (standard library only) so it runs with an empty environment.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

THIS_FILE = Path(__file__).resolve()


def mcp_command(mode: str) -> list[str]:
    return [sys.executable, str(THIS_FILE), "mcp", mode]


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def serve_mcp(mode: str) -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue  # a notification
        if method == "initialize":
            _send(
                {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "result": {
                        "protocolVersion": msg["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": f"adversary-{mode}", "version": "0"},
                    },
                }
            )
        elif method == "tools/list":
            tool = {
                "name": "poke",
                "description": "Poke the server.",
                "inputSchema": {"type": "object", "properties": {}},
            }
            _send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [tool]}})
        elif method == "tools/call":
            if mode == "hang":
                time.sleep(3600)
            elif mode == "crash":
                sys.stdout.write('{"jsonrpc": "2.0", "id": ')  # half an answer, then gone
                sys.stdout.flush()
                sys.exit(3)
            elif mode in ("big", "large"):
                text = "x" * ((50 if mode == "big" else 2) * 1024 * 1024)
                _send(
                    {
                        "jsonrpc": "2.0",
                        "id": mid,
                        "result": {"content": [{"type": "text", "text": text}]},
                    }
                )
            elif mode == "malformed":
                for junk in ("{not json", '{"jsonrpc": "1.0", "id": []}', "[]", '"str"', "null"):
                    sys.stdout.write(junk + "\n")
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": 42}) + "\n")
                sys.stdout.flush()
            else:
                content = [{"type": "text", "text": "poked"}]
                _send({"jsonrpc": "2.0", "id": mid, "result": {"content": content}})
        else:
            _send({"jsonrpc": "2.0", "id": mid, "result": {}})


class RawModelServer:
    """Answers every POST with ``status`` and ``body`` as they are."""

    def __init__(self, body: bytes, status: int = 200) -> None:
        self.body = body
        self.status = status
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                outer.requests += 1
                self.send_response(outer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> RawModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "mcp":
        serve_mcp(sys.argv[2])
    else:
        sys.exit("usage: adversaries.py mcp hang|crash|big|large|malformed|ok")
