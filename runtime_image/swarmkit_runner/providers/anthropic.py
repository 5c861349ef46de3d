"""Anthropic Messages API (``POST {base}/v1/messages``)."""

from __future__ import annotations

import json
from typing import Any

from .base import (
    AssistantMessage,
    HttpProvider,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResults,
    Usage,
    UserMessage,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


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
            if msg.text:
                content.append({"type": "text", "text": msg.text})
            for call in msg.tool_calls:
                content.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                )
            messages.append({"role": "assistant", "content": content or msg.text or "(empty)"})
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
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def from_wire(data: dict[str, Any]) -> ModelResponse:
    """A :class:`ModelResponse` from a Messages API response body."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in data.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            args = block.get("input")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {}
            calls.append(
                ToolCall(
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    arguments=args if isinstance(args, dict) else {},
                )
            )
    usage = data.get("usage") or {}
    input_tokens = sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return ModelResponse(
        text="".join(texts),
        tool_calls=calls,
        usage=Usage(input_tokens, int(usage.get("output_tokens") or 0)),
        stop_reason=str(data.get("stop_reason") or ""),
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
        data, attempts = await self.post_json(
            messages_url(self.base_url), to_wire(request, self.model)
        )
        response = from_wire(data)
        return ModelResponse(
            response.text, response.tool_calls, response.usage, response.stop_reason, attempts
        )
