"""OpenAI-compatible Chat Completions (``POST {base}/chat/completions``).

Covers OpenAI, vLLM, Ollama (``/v1``), LiteLLM and other compatible gateways. What the real
API refuses is never sent: the token limit goes in ``max_completion_tokens`` for reasoning
models (:func:`swarmkit_api.model_rules.max_tokens_parameter`), an assistant turn with
neither text nor tool calls (``content: null`` alone is a 400) is left out, and a
temperature the model does not take fails before any request. Answers the API documents
besides a plain completion: an ``error`` body with 200 and empty ``choices`` (retried),
``refusal`` and ``finish_reason: content_filter`` (:class:`ModelRefused`),
``finish_reason: length`` (``truncated``). Streamed turns ask for the usage chunk
(``stream_options.include_usage``).
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

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def to_wire(request: ModelRequest, model: str, max_tokens_field: str) -> dict[str, Any]:
    """The Chat Completions request body for ``request``."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for msg in request.messages:
        if isinstance(msg, UserMessage):
            messages.append({"role": "user", "content": msg.text})
        elif isinstance(msg, AssistantMessage):
            if not msg.text and not msg.tool_calls:
                continue  # an empty answer adds nothing, and content null alone is refused
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
    body: dict[str, Any] = {"model": model, max_tokens_field: request.max_tokens}
    body["messages"] = messages
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


def _calls(raw_calls: list[Any]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for n, raw in enumerate(raw_calls):
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
    return calls


def answer(provider: str, message: dict[str, Any], finish: str, usage: Usage) -> ModelResponse:
    """The response for a (possibly streamed, then assembled) assistant message."""
    if message.get("refusal"):
        raise ModelRefused(f"model provider {provider}: the model refused: {message['refusal']}")
    if finish == "content_filter":
        raise ModelRefused(f"model provider {provider}: the content filter stopped the answer")
    return ModelResponse(
        text=str(message.get("content") or ""),
        tool_calls=_calls(list(message.get("tool_calls") or [])),
        usage=usage,
        stop_reason=finish,
        truncated=finish == "length",
    )


def _usage(data: dict[str, Any]) -> Usage:
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return Usage(
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        # prompt_tokens includes the cached part (Chat Completions' prompt caching).
        int(details.get("cached_tokens") or 0),
    )


def from_wire(provider: str, data: dict[str, Any]) -> ModelResponse:
    """A :class:`ModelResponse` from a Chat Completions response body."""
    if data.get("error"):
        raise body_error(provider, data["error"])
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise Transient("the answer has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    return answer(provider, message, str(choice.get("finish_reason") or ""), _usage(data))


class OpenAIProvider(HttpProvider):
    type = "openai"

    @staticmethod
    def headers(api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    async def complete(self, request: ModelRequest) -> ModelResponse:
        problem = model_rules.temperature_problem("openai", self.model, request.temperature)
        if problem:
            raise ModelError(f"model provider {self.name}: {problem}")
        field = model_rules.max_tokens_parameter(
            self.config.max_tokens_parameter, self.config.base_url, self.model, self.config.type
        )
        body = to_wire(request, self.model, field)
        stream = self.streams(request.max_tokens)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return await self.exchange(self.endpoint(), body, stream)

    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def decode(self, data: dict[str, Any]) -> ModelResponse:
        return from_wire(self.name, data)

    async def decode_stream(
        self, events: AsyncIterator[tuple[str, str]], spent: Spent, t0: float
    ) -> ModelResponse:
        text: list[str] = []
        refusal: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish = ""
        usage = Usage()
        first: float | None = None
        done = False
        async for _event, data in events:
            if data.strip() == "[DONE]":
                done = True
                break
            chunk = json_event(data)
            if chunk.get("error"):
                raise body_error(self.name, chunk["error"])
            if chunk.get("usage"):
                usage = _usage(chunk)
                spent.input_tokens, spent.output_tokens = usage.input_tokens, usage.output_tokens
            for choice in chunk.get("choices") or []:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("tool_calls"):
                    first = first if first is not None else time.monotonic()
                text.append(str(delta.get("content") or ""))
                refusal.append(str(delta.get("refusal") or ""))
                for raw in delta.get("tool_calls") or []:
                    slot = calls.setdefault(
                        int(raw.get("index") or 0), {"id": "", "name": "", "arguments": ""}
                    )
                    slot["id"] = str(raw.get("id") or slot["id"])
                    fn = raw.get("function") or {}
                    slot["name"] += str(fn.get("name") or "")
                    slot["arguments"] += str(fn.get("arguments") or "")
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
        if not done:
            raise Transient("the stream ended before [DONE]")
        if not finish:
            raise Transient("the stream ended without a finish_reason")
        message: dict[str, Any] = {
            "content": "".join(text),
            "refusal": "".join(refusal),
            "tool_calls": [
                {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
                for _, c in sorted(calls.items())
            ],
        }
        response = answer(self.name, message, finish, usage)
        if first is None:
            return response
        return replace(response, first_token_ms=round((first - t0) * 1000, 1))
