"""An A2A test agent built with the public ``a2a-sdk`` (JSON-RPC, A2A 1.0 and 0.3).

Self-contained (``a2a-sdk``, ``starlette``, ``uvicorn`` and the standard library) so that it
runs as ``python tests/support/a2a_server.py --port N [--token T]``; :class:`A2AServer`
starts it in a subprocess on a free loopback port.

One JSON-RPC endpoint (``/a2a``, the SDK's handler with v0.3 compatibility on) and three
Agent Cards:

* ``/.well-known/agent-card.json`` — an A2A 1.0 card (``supportedInterfaces``);
* ``/v03/.well-known/agent-card.json`` — an A2A 0.3 card (``url``, ``protocolVersion``);
* ``/elsewhere/.well-known/agent-card.json`` — a 1.0 card whose endpoint is on another
  origin (``localhost`` instead of ``127.0.0.1``).

Skills on the cards: ``research`` and ``review``. What a task does depends on the first
word of the first message's text:

* ``ask N …`` asks ``question k?`` (input-required) N times, then completes with
  ``answers: a1, a2, …``;
* ``gate …`` asks for input with status metadata ``{kind: human_gate, gate:
  deploy-approval}``;
* ``fail …`` fails with ``remote failure: …``;
* ``slow …`` works until cancelled;
* ``json {...}`` completes with that JSON as its artifact;
* anything else completes with ``remote answer: <text> [context=<contextId>]``.

``GET /_records`` returns what the server saw: every JSON-RPC call (method, contextId,
taskId, message text, metadata, whether the bearer token matched, the A2A-Version header)
and every cancellation (task ids).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

THIS_FILE = Path(__file__).resolve()


def build_app(port: int, token: str | None) -> Any:
    from a2a.helpers import new_task_from_user_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types.a2a_pb2 import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
    )
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    records: dict[str, list[Any]] = {"calls": [], "cancels": []}
    state: dict[str, dict[str, Any]] = {}

    class TestAgent(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task
            if task is None:
                assert context.message is not None
                task = new_task_from_user_message(context.message)
                await event_queue.enqueue_event(task)
            up = TaskUpdater(event_queue, task.id, task.context_id)
            text = context.get_user_input()
            st = state.get(task.id)
            if st is None:
                st = state[task.id] = {"first": text, "answers": []}
            else:
                st["answers"].append(text)
            first: str = st["first"]
            word = first.split(" ", 1)[0]
            await up.start_work()
            await asyncio.sleep(0.05)
            if word == "ask":
                parts = first.split()
                wanted = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 1
                if len(st["answers"]) < wanted:
                    n = len(st["answers"]) + 1
                    await up.requires_input(up.new_agent_message([new_text_part(f"question {n}?")]))
                    return
                await up.add_artifact([new_text_part("answers: " + ", ".join(st["answers"]))])
                await up.complete()
            elif word == "gate":
                message = up.new_agent_message(
                    [new_text_part("waiting for deploy approval")],
                    metadata={"kind": "human_gate", "gate": "deploy-approval"},
                )
                await up.requires_input(message)
            elif word == "fail":
                await up.failed(up.new_agent_message([new_text_part(f"remote failure: {first}")]))
            elif word == "slow":
                await asyncio.sleep(3600)
            elif word == "json":
                await up.add_artifact([new_text_part(first.split(" ", 1)[1])])
                await up.complete()
            else:
                answer = f"remote answer: {first} [context={task.context_id}]"
                await up.add_artifact([new_text_part(answer)])
                await up.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            records["cancels"].append(context.task_id)
            assert context.task_id is not None and context.context_id is not None
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    base = f"http://127.0.0.1:{port}"
    skills = [
        AgentSkill(id="research", name="Research", description="Researches.", tags=["r"]),
        AgentSkill(id="review", name="Review", description="Reviews.", tags=["r"]),
    ]

    def card(endpoint: str) -> Any:
        return AgentCard(
            name="test-remote",
            description="An A2A test agent.",
            version="1.0.0",
            supported_interfaces=[
                AgentInterface(url=endpoint, protocol_binding="JSONRPC", protocol_version="1.0")
            ],
            capabilities=AgentCapabilities(streaming=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=skills,
        )

    main_card = card(f"{base}/a2a")
    handler = DefaultRequestHandler(
        agent_executor=TestAgent(), task_store=InMemoryTaskStore(), agent_card=main_card
    )
    v03_card = {
        "name": "test-remote",
        "description": "An A2A test agent (0.3 card).",
        "url": f"{base}/a2a",
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "version": "1.0.0",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": s.id, "name": s.name, "description": s.description} for s in skills],
    }

    async def records_route(request: Request) -> JSONResponse:
        return JSONResponse(records)

    async def v03_route(request: Request) -> JSONResponse:
        return JSONResponse(v03_card)

    routes = [
        *create_agent_card_routes(main_card),
        *create_agent_card_routes(
            card(f"http://localhost:{port}/a2a"),
            card_url="/elsewhere/.well-known/agent-card.json",
        ),
        Route("/v03/.well-known/agent-card.json", v03_route),
        Route("/_records", records_route),
        *create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=True),
    ]
    app = Starlette(routes=routes)

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] == "/_records":
            await app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers") or []}
        authorized = token is None or headers.get("authorization") == f"Bearer {token}"
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if scope["path"] == "/a2a" and body:
            try:
                rpc = json.loads(body)
            except ValueError:
                rpc = {}
            params = rpc.get("params") or {}
            msg = params.get("message") or {}
            texts = [p.get("text") for p in msg.get("parts") or [] if isinstance(p, dict)]
            records["calls"].append(
                {
                    "method": rpc.get("method"),
                    "contextId": msg.get("contextId"),
                    "taskId": msg.get("taskId") or params.get("id"),
                    "text": " ".join(t for t in texts if t),
                    "metadata": params.get("metadata"),
                    "authorized": authorized,
                    "version": headers.get("a2a-version"),
                }
            )
        if not authorized:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return guarded


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class A2AServer:
    """The A2A test agent in a subprocess (context manager)."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def card_url(self) -> str:
        return f"{self.base}/.well-known/agent-card.json"

    @property
    def v03_card_url(self) -> str:
        return f"{self.base}/v03/.well-known/agent-card.json"

    @property
    def elsewhere_card_url(self) -> str:
        return f"{self.base}/elsewhere/.well-known/agent-card.json"

    def records(self) -> dict[str, list[Any]]:
        with urllib.request.urlopen(f"{self.base}/_records", timeout=5) as response:
            data: dict[str, list[Any]] = json.loads(response.read())
            return data

    def start(self, timeout: float = 30.0) -> A2AServer:
        argv = [sys.executable, str(THIS_FILE), "--port", str(self.port)]
        if self.token:
            argv.append(f"--token={self.token}")  # a token may start with "-"
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"A2A test server exited with {self._proc.returncode}")
            try:
                self.records()
                return self
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError("A2A test server did not start in time")

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> A2AServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token")
    args = parser.parse_args(argv)
    app = build_app(args.port, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
