"""The A2A wire client: Agent Cards, JSON-RPC calls (A2A 1.0 and 0.3) and task texts.

What the remote-agent skill (:mod:`.a2a`) sends and reads, with no policy of its own: the
card's JSON-RPC endpoint and protocol version, ``SendMessage``/``GetTask``/``CancelTask``
(1.0, with ``A2A-Version: 1.0``) or ``message/send``/``tasks/get``/``tasks/cancel`` (0.3),
the bearer token only to the card's own origin, states normalized to the 0.3 words, and an
answer's text from a task's artifacts or status message.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from . import traced
from .context import RunContext
from .errors import ToolError

HTTP_TIMEOUT_SECONDS = 30.0
TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
INTERRUPTED = frozenset({"input-required", "auth-required"})

_V1_METHODS = {"send": "SendMessage", "get": "GetTask", "cancel": "CancelTask"}
_V03_METHODS = {"send": "message/send", "get": "tasks/get", "cancel": "tasks/cancel"}


def normalize_state(state: Any) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` / ``input-required`` → ``input-required``."""
    text = str(state or "unknown")
    if text.startswith("TASK_STATE_"):
        text = text.removeprefix("TASK_STATE_").lower().replace("_", "-")
    return "canceled" if text == "cancelled" else text


@dataclass(frozen=True)
class Card:
    """The parts of an Agent Card the runner uses."""

    url: str
    name: str
    skills: tuple[str, ...]
    endpoint: str
    version: str  # "1.0" or "0.3"


@dataclass
class RemoteTask:
    """A remote task the calling agent may still answer."""

    task_id: str
    skill: str
    agent: str
    card: Card
    started: float
    answers: int = 0
    human_gate: str | None = None
    question: str = ""


def parse_card(url: str, data: Any) -> Card:
    if not isinstance(data, dict):
        raise ToolError(f"agent card {url} is not a JSON object", "A2ACardInvalid")
    skills = tuple(
        str(s.get("id")) for s in data.get("skills") or () if isinstance(s, dict) and s.get("id")
    )
    name = str(data.get("name") or "")
    for iface in data.get("supportedInterfaces") or ():
        if not isinstance(iface, dict):
            continue
        binding = str(iface.get("protocolBinding") or iface.get("transport") or "")
        if binding.upper() == "JSONRPC" and iface.get("url"):
            version = str(iface.get("protocolVersion") or "1.0")
            return Card(
                url, name, skills, str(iface["url"]), "0.3" if version.startswith("0.") else "1.0"
            )
    transport = str(data.get("preferredTransport") or "JSONRPC")
    if data.get("url") and transport.upper() == "JSONRPC":
        return Card(url, name, skills, str(data["url"]), "0.3")
    for iface in data.get("additionalInterfaces") or ():
        if isinstance(iface, dict) and str(iface.get("transport", "")).upper() == "JSONRPC":
            return Card(url, name, skills, str(iface["url"]), "0.3")
    raise ToolError(
        f"agent card {url} offers no JSON-RPC interface (this runner speaks A2A JSON-RPC)",
        "A2ACardInvalid",
    )


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


@dataclass
class Client:
    """JSON-RPC calls to one remote agent."""

    ctx: RunContext
    card: Card
    token: str | None
    methods: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.methods = _V1_METHODS if self.card.version == "1.0" else _V03_METHODS

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.card.version == "1.0":
            headers["A2A-Version"] = "1.0"
        if self.token is not None:
            if _origin(self.card.endpoint) != _origin(self.card.url):
                raise ToolError(
                    f"the card at {self.card.url} points its endpoint to another origin "
                    f"({self.card.endpoint}); the credentials are not sent there",
                    "A2ACredentialsOrigin",
                )
            headers["authorization"] = f"Bearer {self.token}"
        return headers

    async def rpc(self, op: str, params: dict[str, Any]) -> Any:
        """:meth:`_rpc` in an A2A client span (tracing hook, :mod:`.traced`)."""
        with traced.a2a_client_span(op, self.card.endpoint, self.card.name, self.card.version) as (
            span,
            carrier,
        ):
            result = await self._rpc(op, params, carrier)
            traced.a2a_result(span, result)
            return result

    async def _rpc(self, op: str, params: dict[str, Any], carrier: dict[str, str]) -> Any:
        body = {
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": self.methods[op],
            "params": params,
        }
        try:
            response = await self.ctx.http.post(
                self.card.endpoint,
                json=body,
                headers={**self.headers(), **carrier},
                timeout=HTTP_TIMEOUT_SECONDS,
            )
        except httpx.HTTPError as exc:
            raise ToolError(
                f"{self.methods[op]} to {self.card.endpoint} failed: {type(exc).__name__}",
                "A2AUnreachable",
            ) from None
        if response.status_code >= 300:
            raise ToolError(
                f"{self.methods[op]}: HTTP {response.status_code}: {response.text[:300]}",
                "A2AError",
            )
        try:
            data = response.json()
        except ValueError:
            raise ToolError(f"{self.methods[op]}: the answer is not JSON", "A2AError") from None
        if isinstance(data, dict) and data.get("error"):
            err = data["error"]
            code = err.get("code") if isinstance(err, dict) else None
            message = err.get("message") if isinstance(err, dict) else err
            raise ToolError(f"{self.methods[op]}: {message} (code {code})", "A2AError")
        return data.get("result") if isinstance(data, dict) else None

    def message(self, text: str, task_id: str | None) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "messageId": str(uuid.uuid4()),
            "contextId": self.ctx.run_id,
            "parts": [{"text": text}]
            if self.card.version == "1.0"
            else [{"kind": "text", "text": text}],
            "role": "ROLE_USER" if self.card.version == "1.0" else "user",
        }
        if self.card.version != "1.0":
            msg["kind"] = "message"
        if task_id is not None:
            msg["taskId"] = task_id
        return msg

    async def send(self, text: str, skill_id: str | None, task_id: str | None) -> dict[str, Any]:
        """Send a message; returns a task (a direct message reply becomes a completed one)."""
        config: dict[str, Any] = (
            {"returnImmediately": True} if self.card.version == "1.0" else {"blocking": False}
        )
        config["acceptedOutputModes"] = ["text/plain", "application/json"]
        metadata = {"correlationId": self.ctx.audit.correlation_id}
        if skill_id:
            metadata["skillId"] = skill_id
        result = await self.rpc(
            "send",
            {"message": self.message(text, task_id), "configuration": config, "metadata": metadata},
        )
        if not isinstance(result, dict):
            raise ToolError("message/send returned no task", "A2AError")
        if "task" in result and isinstance(result["task"], dict):
            return dict(result["task"])
        if "message" in result and isinstance(result["message"], dict):
            return {
                "id": task_id or "",
                "status": {"state": "completed", "message": result["message"]},
            }
        if result.get("kind") == "message" or ("parts" in result and "status" not in result):
            return {"id": task_id or "", "status": {"state": "completed", "message": result}}
        return dict(result)

    async def get(self, task_id: str) -> dict[str, Any]:
        result = await self.rpc("get", {"id": task_id})
        if not isinstance(result, dict):
            raise ToolError("tasks/get returned no task", "A2AError")
        return result

    async def cancel(self, task_id: str, why: str) -> None:
        """Cancel ``task_id`` (best effort, audited)."""
        outcome, error = "ok", None
        try:
            await self.rpc("cancel", {"id": task_id})
        except ToolError as exc:
            outcome, error = "error", str(exc)
        self.ctx.audit.emit(
            "a2a.cancel",
            task_id=task_id,
            url=self.card.endpoint,
            reason=why,
            outcome=outcome,
            error=error,
        )


def _parts_text(parts: Any) -> list[str]:
    out: list[str] = []
    for part in parts or ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            out.append(part["text"])
        elif "data" in part:
            out.append(json.dumps(part["data"], ensure_ascii=False))
    return out


def answer_text(task: dict[str, Any]) -> str:
    texts: list[str] = []
    for artifact in task.get("artifacts") or ():
        if isinstance(artifact, dict):
            texts += _parts_text(artifact.get("parts"))
    if not texts:
        message = (task.get("status") or {}).get("message") or {}
        texts = _parts_text(message.get("parts") if isinstance(message, dict) else None)
    return "\n".join(texts)


def status_text(task: dict[str, Any]) -> str:
    message = (task.get("status") or {}).get("message") or {}
    return "\n".join(_parts_text(message.get("parts") if isinstance(message, dict) else None))


def status_metadata(task: dict[str, Any]) -> dict[str, Any]:
    message = (task.get("status") or {}).get("message") or {}
    meta = message.get("metadata") if isinstance(message, dict) else None
    return meta if isinstance(meta, dict) else {}
