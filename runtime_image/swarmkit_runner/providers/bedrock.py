"""AWS Bedrock, through its Converse API (``POST {base}/model/{modelId}/converse``).

One wire format for every model Bedrock serves. Authentication is AWS Signature Version 4
(``aws.auth: sigv4``, the default; ``apiKey`` holds credentials as ``credential_process``
JSON, :class:`.sigv4.AwsCredentials`) or a Bedrock API key (``aws.auth: api-key``, sent as
``Authorization: Bearer``). What Converse refuses is never sent: roles must alternate
starting with ``user`` (consecutive turns are merged), a text block must not be blank, and
the temperature range is 0 to 1 (the service model's). ``stopReason`` ``max_tokens`` /
``model_context_window_exceeded`` is a truncation, ``guardrail_intervened`` /
``content_filtered`` a refusal, ``malformed_model_output`` / ``malformed_tool_use`` retried.

Not streamed: ConverseStream answers in AWS's binary event-stream framing, not server-sent
events; raise ``timeoutSeconds`` for long generations (``streaming: always`` is refused at
admission for bedrock providers).
"""

from __future__ import annotations

import json
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
from .http import HttpProvider, Transient
from .sigv4 import AwsCredentials, sign

REFUSALS = frozenset({"guardrail_intervened", "content_filtered"})
RETRIED = frozenset({"malformed_model_output", "malformed_tool_use"})
TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})


def base_url(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def _turn(messages: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].extend(blocks)  # Converse wants the roles to alternate
    else:
        messages.append({"role": role, "content": blocks})


def to_wire(request: ModelRequest) -> dict[str, Any]:
    """The Converse request body for ``request`` (``modelId`` goes in the URL)."""
    messages: list[dict[str, Any]] = []
    for msg in request.messages:
        if isinstance(msg, UserMessage):
            _turn(messages, "user", [{"text": msg.text}] if msg.text.strip() else [])
        elif isinstance(msg, AssistantMessage):
            blocks: list[dict[str, Any]] = [{"text": msg.text}] if msg.text.strip() else []
            blocks += [
                {"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}}
                for c in msg.tool_calls
            ]
            _turn(messages, "assistant", blocks)
        elif isinstance(msg, ToolResults):
            results = [
                {
                    "toolResult": {
                        "toolUseId": r.call_id,
                        "content": [{"text": r.content or "(empty)"}],
                        "status": "error" if r.is_error else "success",
                    }
                }
                for r in msg.results
            ]
            _turn(messages, "user", results)
    config: dict[str, Any] = {"maxTokens": request.max_tokens}
    if request.temperature is not None:
        config["temperature"] = request.temperature
    body: dict[str, Any] = {"messages": messages, "inferenceConfig": config}
    if request.system:
        body["system"] = [{"text": request.system}]
    if request.tools:
        body["toolConfig"] = {
            "tools": [
                {
                    "toolSpec": {
                        "name": t.name,
                        "description": t.description or t.name,
                        "inputSchema": {"json": t.input_schema},
                    }
                }
                for t in request.tools
            ]
        }
    return body


def from_wire(provider: str, data: dict[str, Any]) -> ModelResponse:
    """A :class:`ModelResponse` from a Converse response body."""
    stop = str(data.get("stopReason") or "")
    if stop in RETRIED:
        raise Transient(f"stopReason {stop}")
    message = (data.get("output") or {}).get("message") or {}
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        use = block.get("toolUse")
        if isinstance(use, dict):
            args = use.get("input")
            calls.append(
                ToolCall(
                    str(use.get("toolUseId") or ""),
                    str(use.get("name") or ""),
                    args if isinstance(args, dict) else {},
                )
            )
    if stop in REFUSALS:
        raise ModelRefused(f"model provider {provider}: the model refused (stopReason {stop})")
    usage = data.get("usage") or {}
    inputs = sum(
        int(usage.get(k) or 0)
        for k in ("inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
    )
    return ModelResponse(
        text="".join(texts),
        tool_calls=calls,
        usage=Usage(
            inputs,
            int(usage.get("outputTokens") or 0),
            int(usage.get("cacheReadInputTokens") or 0),
        ),
        stop_reason=stop,
        truncated=stop in TRUNCATED,
    )


class BedrockProvider(HttpProvider):
    type = "bedrock"

    def configure(self, secret: str | None, region: str, auth: str) -> None:
        self._region = region
        self._credentials: AwsCredentials | None = None
        if secret and auth == "sigv4":
            self._credentials = AwsCredentials.parse(secret)
            for part in (self._credentials.secret_access_key, self._credentials.session_token):
                if part:
                    self._secrets.remember(part)

    @staticmethod
    def headers(secret: str | None, auth: str) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if secret and auth == "api-key":
            headers["authorization"] = f"Bearer {secret}"
        return headers

    def streams(self, max_tokens: int) -> bool:
        return False  # see the module docstring

    async def complete(self, request: ModelRequest) -> ModelResponse:
        problem = model_rules.temperature_problem("bedrock", self.model, request.temperature)
        if problem:
            raise ModelError(f"model provider {self.name}: {problem}")
        url = f"{self.base_url}/model/{quote(self.model, safe='')}/converse"
        return await self.exchange(url, to_wire(request), stream=False)

    def signed(self, url: str, body: dict[str, Any]) -> tuple[bytes, dict[str, str]] | None:
        if self._credentials is None:
            return None
        data = json.dumps(body, separators=(",", ":")).encode()
        return data, sign(url, data, self._credentials, self._region)

    def decode(self, data: dict[str, Any]) -> ModelResponse:
        return from_wire(self.name, data)
