"""OpenAI-compatible Chat Completions (``POST {base}/chat/completions``).

Covers OpenAI, vLLM, Ollama (``/v1``), LiteLLM and other compatible gateways.
"""

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

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def to_wire(request: ModelRequest, model: str) -> dict[str, Any]:
    """The Chat Completions request body for ``request``."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for msg in request.messages:
        if isinstance(msg, UserMessage):
            messages.append({"role": "user", "content": msg.text})
        elif isinstance(msg, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": msg.text or None}
            if msg.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in msg.tool_calls
                ]
            messages.append(entry)
        elif isinstance(msg, ToolResults):
            for r in msg.results:
                content = f"ERROR: {r.content}" if r.is_error else r.content
                messages.append({"role": "tool", "tool_call_id": r.call_id, "content": content})
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def from_wire(data: dict[str, Any]) -> ModelResponse:
    """A :class:`ModelResponse` from a Chat Completions response body."""
    choices = data.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    calls: list[ToolCall] = []
    for n, raw in enumerate(message.get("tool_calls") or []):
        fn = raw.get("function") or {}
        args: Any = fn.get("arguments") or "{}"
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                args = {"_unparsed_arguments": args}
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{n}"),
                name=str(fn.get("name", "")),
                arguments=args if isinstance(args, dict) else {},
            )
        )
    usage = data.get("usage") or {}
    return ModelResponse(
        text=str(message.get("content") or ""),
        tool_calls=calls,
        usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
        stop_reason=str(choice.get("finish_reason") or ""),
    )


class OpenAIProvider(HttpProvider):
    type = "openai"

    @staticmethod
    def headers(api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    async def complete(self, request: ModelRequest) -> ModelResponse:
        data, attempts = await self.post_json(
            f"{self.base_url}/chat/completions", to_wire(request, self.model)
        )
        response = from_wire(data)
        return ModelResponse(
            response.text, response.tool_calls, response.usage, response.stop_reason, attempts
        )
