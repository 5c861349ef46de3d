"""Anthropic Messages API (``POST {base}/v1/messages``).

What the real API refuses is never sent: a text block must hold non-whitespace text (a
whitespace-only answer is dropped from the history, an assistant turn left empty is left
out: consecutive user turns are merged by the API), and no temperature is sent (this API
version has no sampling parameters: :mod:`swarmkit_api.model_rules`).
Answers the API documents besides a message: ``type: error`` with 200 (overloaded and API
errors retried), ``stop_reason: refusal`` (:class:`ModelRefused`), ``stop_reason:
max_tokens`` or ``model_context_window_exceeded`` (``truncated``). Streamed turns read
``message_start`` … ``message_stop``; usage comes from ``message_start`` (input, cache)
and the last ``message_delta`` (output, cumulative).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from swarmkit_api import model_rules

from ..errors import ModelError, ModelRefused
from .base import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResults,
    Usage,
    UserMessage,
)
from .http import HttpProvider, Spent, Transient, body_error, json_event

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The version the official SDK sends since 2.0 (its request types are this version's).
API_VERSION = "2026-10-21"
TRUNCATED_STOPS = frozenset({"max_tokens", "model_context_window_exceeded"})


def messages_url(base_url: str) -> str:
    """``{base}/v1/messages``; a base that already ends in /v1 gets only /messages."""
    base = base_url.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


def to_wire(request: ModelRequest, model: str) -> dict[str, Any]:
    """The Messages API request body for ``request``."""
    messages: list[dict[str, Any]] = []
    for msg in request.messages:
        if isinstance(msg, UserMessage):
            messages.append({"role": "user", "content": msg.text})
        elif isinstance(msg, AssistantMessage):
            content: list[dict[str, Any]] = []
            if msg.text.strip():
                content.append({"type": "text", "text": msg.text})
            for call in msg.tool_calls:
                content.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                )
            if content:
                messages.append({"role": "assistant", "content": content})
        elif isinstance(msg, ToolResults):
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": r.call_id,
                            "content": r.content,
                            "is_error": r.is_error,
                        }
                        for r in msg.results
                    ],
                }
            )
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "messages": messages}
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    return body


def _input_tokens(usage: dict[str, Any]) -> int:
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _cached_tokens(usage: dict[str, Any]) -> int:
    """Cache reads (priced as cached input); cache writes stay input-priced."""
    return int(usage.get("cache_read_input_tokens") or 0)


def answer(provider: str, blocks: list[Any], stop: str, usage: Usage) -> ModelResponse:
    """The response for the content blocks of a (possibly streamed, then assembled) message."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            args = block.get("input")
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError:
                    args = {}
            calls.append(
                ToolCall(
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    arguments=args if isinstance(args, dict) else {},
                )
            )
    text = "".join(texts)
    if stop == "refusal":
        raise ModelRefused(f"model provider {provider}: the model refused: {text or stop}")
    return ModelResponse(
        text=text,
        tool_calls=calls,
        usage=usage,
        stop_reason=stop,
        truncated=stop in TRUNCATED_STOPS,
    )


def from_wire(provider: str, data: dict[str, Any]) -> ModelResponse:
    """A :class:`ModelResponse` from a Messages API response body."""
    if data.get("type") == "error" or (data.get("error") and not data.get("content")):
        raise body_error(provider, data.get("error"))
    usage = data.get("usage") or {}
    return answer(
        provider,
        list(data.get("content") or []),
        str(data.get("stop_reason") or ""),
        Usage(_input_tokens(usage), int(usage.get("output_tokens") or 0), _cached_tokens(usage)),
    )


class AnthropicProvider(HttpProvider):
    type = "anthropic"

    @staticmethod
    def headers(api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    async def complete(self, request: ModelRequest) -> ModelResponse:
        problem = model_rules.temperature_problem("anthropic", self.model, request.temperature)
        if problem:
            raise ModelError(f"model provider {self.name}: {problem}")
        body = to_wire(request, self.model)
        stream = self.streams(request.max_tokens)
        if stream:
            body["stream"] = True
        return await self.exchange(messages_url(self.base_url), body, stream)

    def decode(self, data: dict[str, Any]) -> ModelResponse:
        return from_wire(self.name, data)

    async def decode_stream(
        self, events: AsyncIterator[tuple[str, str]], spent: Spent, t0: float
    ) -> ModelResponse:
        blocks: dict[int, dict[str, Any]] = {}
        partial_json: dict[int, list[str]] = {}
        stop = ""
        first: float | None = None
        stopped = False
        async for event, data in events:
            if event == "ping":
                continue
            payload = json_event(data)
            kind = str(payload.get("type") or event)
            if kind == "error":
                raise body_error(self.name, payload.get("error"))
            if kind == "message_start":
                usage = (payload.get("message") or {}).get("usage") or {}
                spent.input_tokens = _input_tokens(usage)
                spent.cached_input_tokens = _cached_tokens(usage)
                spent.output_tokens = int(usage.get("output_tokens") or 0)
            elif kind == "content_block_start":
                index = int(payload.get("index") or 0)
                blocks[index] = dict(payload.get("content_block") or {})
            elif kind == "content_block_delta":
                index = int(payload.get("index") or 0)
                delta = payload.get("delta") or {}
                block = blocks.setdefault(index, {"type": "text", "text": ""})
                if delta.get("type") == "text_delta":
                    block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
                elif delta.get("type") == "input_json_delta":
                    partial_json.setdefault(index, []).append(str(delta.get("partial_json") or ""))
                else:
                    continue  # thinking and signature deltas are not part of the answer
                first = first if first is not None else time.monotonic()
            elif kind == "message_delta":
                stop = str((payload.get("delta") or {}).get("stop_reason") or stop)
                usage = payload.get("usage") or {}
                if usage.get("output_tokens") is not None:
                    spent.output_tokens = int(usage["output_tokens"])
                if usage.get("input_tokens") is not None:
                    spent.input_tokens = max(spent.input_tokens, _input_tokens(usage))
            elif kind == "message_stop":
                stopped = True
                break
        if not stopped:
            raise Transient("the stream ended before message_stop")
        for index, parts in partial_json.items():
            blocks[index]["input"] = "".join(parts)
        response = answer(self.name, [blocks[i] for i in sorted(blocks)], stop, spent.usage())
        if first is None:
            return response
        return replace(response, first_token_ms=round((first - t0) * 1000, 1))
