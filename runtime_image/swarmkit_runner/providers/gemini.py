"""Google Gemini, native (``POST {base}/v1beta/models/{model}:generateContent``).

The wire format is the one the official ``google-genai`` SDK sends for the Gemini Developer
API: ``contents`` (roles ``user`` and ``model``; tool calls are ``functionCall`` parts, their
results ``functionResponse`` parts in the next user turn, one per call), a
``systemInstruction``, ``tools[].functionDeclarations`` with each tool's JSON Schema as
``parametersJsonSchema`` (``parameters`` takes only Gemini's OpenAPI subset), and
``generationConfig {maxOutputTokens, temperature}``. The key goes in ``x-goog-api-key``.

A call's ``thoughtSignature`` is kept and sent back with it (thinking models refuse a
function call turn without it). ``finishReason: MAX_TOKENS`` is a truncation; ``SAFETY``,
``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII`` and a prompt blocked by
``promptFeedback.blockReason`` are refusals; no candidate at all is retried. Streamed turns
use ``:streamGenerateContent?alt=sse`` (every event a partial response; the last one carries
the finish reason and the usage).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from urllib.parse import quote

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

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
REFUSALS = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"})


def to_wire(request: ModelRequest) -> dict[str, Any]:
    """The generateContent request body for ``request``."""
    contents: list[dict[str, Any]] = []
    for msg in request.messages:
        if isinstance(msg, UserMessage):
            contents.append({"role": "user", "parts": [{"text": msg.text}]})
        elif isinstance(msg, AssistantMessage):
            parts: list[dict[str, Any]] = []
            if msg.text:
                parts.append({"text": msg.text})
            for call in msg.tool_calls:
                part: dict[str, Any] = {"functionCall": {"name": call.name, "args": call.arguments}}
                if call.signature:
                    part["thoughtSignature"] = call.signature
                parts.append(part)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif isinstance(msg, ToolResults):
            contents.append(
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "name": r.name,
                                "response": {"error" if r.is_error else "output": r.content},
                            }
                        }
                        for r in msg.results
                    ],
                }
            )
    config: dict[str, Any] = {"maxOutputTokens": request.max_tokens}
    if request.temperature is not None:
        config["temperature"] = request.temperature
    body: dict[str, Any] = {"contents": contents, "generationConfig": config}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parametersJsonSchema": t.input_schema,
                    }
                    for t in request.tools
                ]
            }
        ]
    return body


def _usage(data: dict[str, Any]) -> Usage:
    usage = data.get("usageMetadata") or {}
    output = int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0)
    # promptTokenCount includes cachedContentTokenCount (context caching).
    cached = int(usage.get("cachedContentTokenCount") or 0)
    return Usage(int(usage.get("promptTokenCount") or 0), output, cached)


def answer(provider: str, parts: list[Any], finish: str, usage: Usage) -> ModelResponse:
    """The response for a candidate's parts (a whole answer, or a stream's parts joined)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in parts:
        if not isinstance(part, dict) or part.get("thought"):
            continue  # a thought summary is not the answer
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        call = part.get("functionCall")
        if isinstance(call, dict):
            args = call.get("args")
            calls.append(
                ToolCall(
                    id=str(call.get("id") or f"gemini-call-{len(calls)}"),
                    name=str(call.get("name") or ""),
                    arguments=args if isinstance(args, dict) else {},
                    signature=str(part.get("thoughtSignature") or ""),
                )
            )
    if finish in REFUSALS:
        raise ModelRefused(f"model provider {provider}: the model refused (finishReason {finish})")
    return ModelResponse(
        text="".join(texts),
        tool_calls=calls,
        usage=usage,
        stop_reason=finish,
        truncated=finish == "MAX_TOKENS",
    )


def _candidate(provider: str, data: dict[str, Any]) -> dict[str, Any] | None:
    if data.get("error"):
        raise body_error(provider, data["error"])
    blocked = (data.get("promptFeedback") or {}).get("blockReason")
    if blocked:
        raise ModelRefused(f"model provider {provider}: the prompt was blocked ({blocked})")
    candidates = data.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
        return candidates[0]
    return None


def from_wire(provider: str, data: dict[str, Any]) -> ModelResponse:
    """A :class:`ModelResponse` from a generateContent response body."""
    candidate = _candidate(provider, data)
    if candidate is None:
        raise Transient("the answer has no candidates")
    parts = list((candidate.get("content") or {}).get("parts") or [])
    return answer(provider, parts, str(candidate.get("finishReason") or ""), _usage(data))


class GeminiProvider(HttpProvider):
    type = "gemini"

    @staticmethod
    def headers(api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if api_key:
            headers["x-goog-api-key"] = api_key
        return headers

    async def complete(self, request: ModelRequest) -> ModelResponse:
        problem = model_rules.temperature_problem("gemini", self.model, request.temperature)
        if problem:
            raise ModelError(f"model provider {self.name}: {problem}")
        stream = self.streams(request.max_tokens)
        model = quote(self.model.removeprefix("models/"), safe="")
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        base = self.base_url.removesuffix("/v1beta")
        url = f"{base}/v1beta/models/{model}:{method}"
        return await self.exchange(url, to_wire(request), stream)

    def decode(self, data: dict[str, Any]) -> ModelResponse:
        return from_wire(self.name, data)

    async def decode_stream(
        self, events: AsyncIterator[tuple[str, str]], spent: Spent, t0: float
    ) -> ModelResponse:
        parts: list[dict[str, Any]] = []
        finish = ""
        usage = Usage()
        first: float | None = None
        async for _event, data in events:
            chunk = json_event(data)
            if chunk.get("usageMetadata"):
                usage = _usage(chunk)
                spent.input_tokens, spent.output_tokens = usage.input_tokens, usage.output_tokens
            candidate = _candidate(self.name, chunk)
            if candidate is None:
                continue
            for part in (candidate.get("content") or {}).get("parts") or []:
                if isinstance(part, dict) and not part.get("thought"):
                    if part.get("text") or part.get("functionCall"):
                        first = first if first is not None else time.monotonic()
                    parts.append(part)
            if candidate.get("finishReason"):
                finish = str(candidate["finishReason"])
        if not finish:
            raise Transient("the stream ended without a finishReason")
        response = answer(self.name, parts, finish, usage)
        if first is None:
            return response
        return replace(response, first_token_ms=round((first - t0) * 1000, 1))
