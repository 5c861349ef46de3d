"""Provider-neutral conversation types and the shared HTTP retry logic."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ModelError
from ..secrets import SecretStore

if TYPE_CHECKING:
    import httpx

#: Statuses retried with backoff (529 = Anthropic "overloaded").
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 20.0
RETRY_AFTER_MAX_SECONDS = 60.0
MAX_ERROR_BODY = 500


@dataclass(frozen=True)
class ToolCall:
    """A tool call requested by the model (``name`` as the model wrote it)."""

    id: str
    name: str
    arguments: dict[str, Any]


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

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


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
    usage: Usage
    stop_reason: str = ""
    attempts: int = 1


def encode_response(response: ModelResponse) -> dict[str, Any]:
    """A response as JSON (the run's journal records every model call)."""
    return {
        "text": response.text,
        "toolCalls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
        ],
        "usage": [response.usage.input_tokens, response.usage.output_tokens],
        "stop": response.stop_reason,
    }


def decode_response(data: Any) -> ModelResponse:
    """The response :func:`encode_response` recorded."""
    usage = data.get("usage") or [0, 0]
    return ModelResponse(
        str(data.get("text") or ""),
        [
            ToolCall(str(c["id"]), str(c["name"]), dict(c.get("arguments") or {}))
            for c in data.get("toolCalls") or ()
        ],
        Usage(int(usage[0]), int(usage[1])),
        str(data.get("stop") or ""),
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


def retry_after_seconds(value: str | None) -> float | None:
    """Parse a Retry-After header (seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_seconds(attempt: int) -> float:
    """Exponential backoff with full jitter for retry ``attempt`` (1-based)."""
    ceiling = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * (2 ** (attempt - 1)))
    return random.uniform(ceiling / 2, ceiling)


class HttpProvider:
    """Shared HTTP plumbing: one httpx client, POST with retries on 429/5xx/timeouts."""

    type = "http"

    def __init__(
        self,
        name: str,
        model: str,
        base_url: str,
        headers: dict[str, str],
        timeout_seconds: float,
        max_retries: int,
        secrets: SecretStore,
        on_retry: RetryHook | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self._secrets = secrets
        self._on_retry = on_retry
        self._sleep = sleep
        import httpx  # only HTTP providers need it (runner start-up cost)

        self._client: httpx.AsyncClient = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_seconds)
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def post_json(self, url: str, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """POST ``body``; returns the decoded JSON and the number of attempts."""
        import httpx

        attempt = 0
        while True:
            attempt += 1
            reason: str
            delay: float | None = None
            try:
                response = await self._client.post(url, json=body)
            except httpx.TimeoutException:
                reason = "timeout"
            except httpx.TransportError as exc:
                reason = f"connection error: {type(exc).__name__}"
            else:
                if response.status_code < 400:
                    try:
                        data = response.json()
                    except ValueError:
                        raise ModelError(
                            f"model provider {self.name}: response is not JSON"
                        ) from None
                    if not isinstance(data, dict):
                        raise ModelError(f"model provider {self.name}: unexpected response")
                    return data, attempt
                status = response.status_code
                body_text = self._secrets.scrub(response.text[:MAX_ERROR_BODY])
                if status not in RETRY_STATUSES:
                    raise ModelError(f"model provider {self.name}: HTTP {status}: {body_text}")
                reason = f"HTTP {status}"
                delay = retry_after_seconds(response.headers.get("retry-after"))
            if attempt > self.max_retries:
                raise ModelError(f"model provider {self.name}: {reason} after {attempt} attempts")
            if delay is None:
                delay = backoff_seconds(attempt)
            delay = min(delay, RETRY_AFTER_MAX_SECONDS)
            if self._on_retry is not None:
                self._on_retry(attempt, reason, delay)
            await self._sleep(delay)
