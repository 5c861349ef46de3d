"""Provider-neutral conversation types (the HTTP plumbing is :mod:`.http`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolCall:
    """A tool call requested by the model (``name`` as the model wrote it)."""

    id: str
    name: str
    arguments: dict[str, Any]
    #: Gemini's ``thoughtSignature`` of the call: it must go back with the call in the
    #: history (thinking models refuse a function call turn without it).
    signature: str = ""


@dataclass(frozen=True)
class UserMessage:
    text: str


@dataclass(frozen=True)
class AssistantMessage:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class ToolResultItem:
    call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class ToolResults:
    results: list[ToolResultItem]


Message = UserMessage | AssistantMessage | ToolResults


@dataclass(frozen=True)
class ToolDef:
    """A tool as offered to the model (``name`` is the wire-safe name)."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    #: The part of ``input_tokens`` read from the provider's prompt cache (priced apart).
    cached_input_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
        )


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: list[Message]
    tools: list[ToolDef]
    max_tokens: int
    temperature: float | None = None


@dataclass(frozen=True)
class ModelResponse:
    text: str
    tool_calls: list[ToolCall]
    #: Every attempt's tokens: a retried attempt that got as far as a partial stream counts.
    usage: Usage
    stop_reason: str = ""
    attempts: int = 1
    #: The answer was cut at max_tokens (``finish_reason: length``, ``stop_reason:
    #: max_tokens``): the text is partial, tool call arguments may be incomplete.
    truncated: bool = False
    streamed: bool = False
    #: Milliseconds from sending the request to the first streamed text or tool call.
    first_token_ms: float | None = None
    #: The part of ``usage`` spent by attempts that were retried.
    retried_usage: Usage = field(default_factory=Usage)


def encode_response(response: ModelResponse) -> dict[str, Any]:
    """A response as JSON (the run's journal records every model call)."""
    data: dict[str, Any] = {
        "text": response.text,
        "toolCalls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments}
            | ({"signature": c.signature} if c.signature else {})
            for c in response.tool_calls
        ],
        "usage": [
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.usage.cached_input_tokens,
        ],
        "stop": response.stop_reason,
    }
    if response.truncated:
        data["truncated"] = True
    return data


def decode_response(data: Any) -> ModelResponse:
    """The response :func:`encode_response` recorded."""
    usage = data.get("usage") or [0, 0]
    return ModelResponse(
        str(data.get("text") or ""),
        [
            ToolCall(
                str(c["id"]),
                str(c["name"]),
                dict(c.get("arguments") or {}),
                str(c.get("signature") or ""),
            )
            for c in data.get("toolCalls") or ()
        ],
        Usage(int(usage[0]), int(usage[1]), int(usage[2]) if len(usage) > 2 else 0),
        str(data.get("stop") or ""),
        truncated=bool(data.get("truncated")),
    )


RetryHook = Callable[[int, str, float], None]
"""Called before sleeping for a retry: (attempt number, reason, delay seconds)."""


class Provider(Protocol):
    """A model API (or the replay script)."""

    name: str
    type: str
    model: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    async def aclose(self) -> None: ...
