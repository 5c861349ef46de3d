"""A2A JSON-RPC on the wire, both dialects: 1.0 (protobuf JSON) and 0.3.

The method name says which dialect a call speaks, and the answer is in the same one:

========================  ====================  =================
operation                 A2A 1.0               A2A 0.3
========================  ====================  =================
send a message            ``SendMessage``       ``message/send``
send and stream (SSE)     ``SendStreamingMessage``  ``message/stream``
read a task               ``GetTask``           ``tasks/get``
cancel a task             ``CancelTask``        ``tasks/cancel``
========================  ====================  =================

1.0 writes task states as ``TASK_STATE_INPUT_REQUIRED`` and roles as ``ROLE_AGENT``, wraps a
send result as ``{"task": …}`` and stream events as ``{"task"|"statusUpdate"|
"artifactUpdate": …}``; 0.3 writes ``input-required`` / ``agent``, tags every object with
``kind`` and streams ``status-update`` events with ``final``. Internally states are the 0.3
words (as :func:`swarmkit_runner.a2a_client.normalize_state` returns them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Dialect = Literal["1.0", "0.3"]

#: method → (operation, dialect)
METHODS: dict[str, tuple[str, Dialect]] = {
    "SendMessage": ("send", "1.0"),
    "SendStreamingMessage": ("stream", "1.0"),
    "GetTask": ("get", "1.0"),
    "CancelTask": ("cancel", "1.0"),
    "message/send": ("send", "0.3"),
    "message/stream": ("stream", "0.3"),
    "tasks/get": ("get", "0.3"),
    "tasks/cancel": ("cancel", "0.3"),
}
TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
INTERRUPTED = frozenset({"input-required", "auth-required"})

# JSON-RPC and A2A error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004


class RpcError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Msg:
    """One message of a task's history."""

    role: Literal["user", "agent"]
    text: str
    message_id: str
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class Incoming:
    """What a send call carries."""

    text: str
    message_id: str
    context_id: str | None
    task_id: str | None
    metadata: dict[str, Any]
    blocking: bool


def state_wire(state: str, dialect: Dialect) -> str:
    if dialect == "0.3":
        return state
    return "TASK_STATE_" + state.upper().replace("-", "_")


def parts_text(parts: Any) -> str:
    """The text of a message's parts (data parts as JSON), joined by newlines."""
    out: list[str] = []
    for part in parts or ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            out.append(part["text"])
        elif "data" in part:
            out.append(json.dumps(part["data"], ensure_ascii=False))
    return "\n".join(out)


def parse_send(params: Any, dialect: Dialect) -> Incoming:
    """The message of a ``SendMessage`` / ``message/send`` call."""
    if not isinstance(params, dict) or not isinstance(params.get("message"), dict):
        raise RpcError(INVALID_PARAMS, "params.message is required")
    message = params["message"]
    text = parts_text(message.get("parts"))
    if not text.strip():
        raise RpcError(INVALID_PARAMS, "params.message has no text or data part")
    config = params.get("configuration") or {}
    if dialect == "1.0":
        blocking = not bool(config.get("returnImmediately", False))
    else:
        blocking = bool(config.get("blocking", True))
    metadata = {
        **(message.get("metadata") or {}),
        **(params.get("metadata") or {}),
    }
    return Incoming(
        text=text,
        message_id=str(message.get("messageId") or ""),
        context_id=str(message["contextId"]) if message.get("contextId") else None,
        task_id=str(message["taskId"]) if message.get("taskId") else None,
        metadata=metadata if isinstance(metadata, dict) else {},
        blocking=blocking,
    )


def task_id_param(params: Any) -> str:
    if not isinstance(params, dict) or not params.get("id"):
        raise RpcError(INVALID_PARAMS, "params.id (the task id) is required")
    return str(params["id"])


def message_wire(msg: Msg, context_id: str, task_id: str, dialect: Dialect) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messageId": msg.message_id,
        "contextId": context_id,
        "taskId": task_id,
    }
    if dialect == "1.0":
        out["role"] = "ROLE_USER" if msg.role == "user" else "ROLE_AGENT"
        out["parts"] = [{"text": msg.text}]
    else:
        out["kind"] = "message"
        out["role"] = msg.role
        out["parts"] = [{"kind": "text", "text": msg.text}]
    if msg.metadata:
        out["metadata"] = dict(msg.metadata)
    return out


def status_wire(
    state: str,
    message: Msg | None,
    timestamp: str,
    context_id: str,
    task_id: str,
    dialect: Dialect,
) -> dict[str, Any]:
    status: dict[str, Any] = {"state": state_wire(state, dialect), "timestamp": timestamp}
    if message is not None:
        status["message"] = message_wire(message, context_id, task_id, dialect)
    return status


def artifact_wire(artifact_id: str, text: str, dialect: Dialect) -> dict[str, Any]:
    part: dict[str, Any] = {"text": text} if dialect == "1.0" else {"kind": "text", "text": text}
    return {"artifactId": artifact_id, "name": "answer", "parts": [part]}


def rpc_result(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def sse(payload: dict[str, Any]) -> bytes:
    """One Server-Sent Event carrying ``payload`` as JSON."""
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


__all__ = [
    "INTERRUPTED",
    "METHODS",
    "TERMINAL",
    "Dialect",
    "Incoming",
    "Msg",
    "RpcError",
    "artifact_wire",
    "message_wire",
    "parse_send",
    "rpc_error",
    "rpc_result",
    "sse",
    "state_wire",
    "status_wire",
    "task_id_param",
]
