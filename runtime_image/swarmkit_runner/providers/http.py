"""HTTP plumbing of the API providers: retries as the official SDKs do them, and streaming.

* **Retries** (429, 408, 409, 5xx, 529, timeouts, dropped connections, and failures a 200
  answer reports: an error body, no choices, a stream that stops early) use the server's
  delay when it gives one: ``retry-after-ms`` first, then ``Retry-After`` (seconds or an
  HTTP date), as the ``openai``/``anthropic`` SDKs do; otherwise exponential backoff with
  jitter. ``x-should-retry: true``/``false`` overrides the status. A delay above
  :data:`RETRY_AFTER_MAX_SECONDS` is not waited out: the call fails saying so.
* **Streaming** (server-sent events): the timeout is then the longest silence between two
  events, so a long generation is not a timeout. Cancelling the call closes the stream
  (the connection), which is how the APIs learn to stop generating.
* Tokens an attempt spent before it failed (a stream that broke after ``message_start``)
  are added to the call's usage: they are billed.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from swarmkit_api.workspace import ModelProvider

from ..errors import ModelError
from ..secrets import SecretStore
from .base import ModelResponse, RetryHook, Usage

if TYPE_CHECKING:
    import httpx

#: Statuses retried with backoff (529 = Anthropic "overloaded").
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
#: Error ``type``s of an error body worth another attempt.
RETRY_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "server_error", "timeout_error"}
)
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 20.0
RETRY_AFTER_MAX_SECONDS = 60.0
MAX_ERROR_BODY = 500
#: The official SDKs plan non-streamed calls at 128,000 tokens an hour (anthropic refuses
#: them past 10 minutes); ``streaming: auto`` streams a turn that could outlast the timeout.
PLANNING_TOKENS_PER_HOUR = 128_000


class Transient(Exception):
    """An attempt failed in a way worth another attempt."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class Spent:
    """Tokens an attempt is known to have spent so far (filled while a stream is read)."""

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_input_tokens = 0

    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cached_input_tokens)


def retry_delay(headers: httpx.Headers | dict[str, str]) -> float | None:
    """The delay the server asks for: ``retry-after-ms``, then ``Retry-After``."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = (headers.get(name) or "").strip()
        if not value:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            pass
        if name == "retry-after":
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            return max(0.0, when.timestamp() - time.time())
    return None


def retry_wanted(status: int, headers: httpx.Headers | dict[str, str]) -> bool:
    """Whether a failed status is retried (``x-should-retry`` decides when present)."""
    verdict = (headers.get("x-should-retry") or "").strip().lower()
    if verdict in ("true", "false"):
        return verdict == "true"
    return status in RETRY_STATUSES


def backoff_seconds(attempt: int) -> float:
    """Exponential backoff with full jitter for retry ``attempt`` (1-based)."""
    ceiling = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * (2 ** (attempt - 1)))
    return random.uniform(ceiling / 2, ceiling)


def body_error(provider: str, error: Any) -> Exception:
    """The exception for an error reported in a 200 body (or a stream's error event)."""
    if isinstance(error, dict):
        kind = str(error.get("type") or "")
        code = error.get("code")
        message = str(error.get("message") or "")
    else:
        kind, code, message = "", None, str(error)
    retry = kind in RETRY_ERROR_TYPES or (str(code).isdigit() and int(str(code)) in RETRY_STATUSES)
    label = ": ".join(p for p in (kind or (str(code) if code is not None else ""), message) if p)
    reason = f"error in the answer: {label or 'unspecified'}"
    return Transient(reason) if retry else ModelError(f"model provider {provider}: {reason}")


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event, data) of a server-sent event stream (comments skipped, data lines joined)."""
    event, data = "", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield event or "message", "\n".join(data)


def json_event(data: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        raise Transient("a stream event is not JSON") from None
    if not isinstance(value, dict):
        raise Transient("a stream event is not a JSON object")
    return value


class HttpProvider:
    """One httpx client per provider and model; subclasses turn requests into bodies and
    answers (:meth:`decode`, :meth:`decode_stream`) into a :class:`ModelResponse`."""

    type = "http"

    def __init__(
        self,
        config: ModelProvider,
        model: str,
        base_url: str,
        headers: dict[str, str],
        secrets: SecretStore,
        on_retry: RetryHook | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self.name = config.name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.max_retries = config.max_retries
        self._secrets = secrets
        self._on_retry = on_retry
        self._sleep = sleep
        import httpx  # only HTTP providers need it (runner start-up cost)

        from .. import egress

        self._client: httpx.AsyncClient = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(config.timeout_seconds),
            **egress.client_kwargs(),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    def streams(self, max_tokens: int) -> bool:
        """Whether a turn of ``max_tokens`` is streamed (``streaming`` of the provider)."""
        if self.config.streaming != "auto":
            return self.config.streaming == "always"
        return max_tokens * 3600 / PLANNING_TOKENS_PER_HOUR > self.config.timeout_seconds

    def decode(self, data: dict[str, Any]) -> ModelResponse:
        raise NotImplementedError

    def signed(self, url: str, body: dict[str, Any]) -> tuple[bytes, dict[str, str]] | None:
        """The exact bytes and per-attempt headers of a signed request (None: unsigned)."""
        return None

    async def decode_stream(
        self, events: AsyncIterator[tuple[str, str]], spent: Spent, t0: float
    ) -> ModelResponse:
        raise NotImplementedError

    async def exchange(self, url: str, body: dict[str, Any], stream: bool) -> ModelResponse:
        """POST ``body`` with retries; the decoded answer with attempts and all usage."""
        import httpx

        attempt = 0
        retried = Usage()
        while True:
            attempt += 1
            spent = Spent()
            delay: float | None = None
            try:
                response = await self._attempt(url, body, stream, spent)
            except Transient as exc:
                reason, delay = exc.reason, exc.delay
            except httpx.TimeoutException:
                reason = "timeout"
            except httpx.TransportError as exc:
                reason = f"connection error: {type(exc).__name__}"
            else:
                return replace(
                    response,
                    attempts=attempt,
                    usage=response.usage + retried,
                    retried_usage=retried,
                )
            retried = retried + spent.usage()
            if attempt > self.max_retries:
                raise ModelError(f"model provider {self.name}: {reason} after {attempt} attempts")
            if delay is not None and delay > RETRY_AFTER_MAX_SECONDS:
                raise ModelError(
                    f"model provider {self.name}: {reason}; the server asks to retry after "
                    f"{delay:g} s, more than the {RETRY_AFTER_MAX_SECONDS:g} s the runner waits"
                )
            if delay is None:
                delay = backoff_seconds(attempt)
            if self._on_retry is not None:
                self._on_retry(attempt, reason, delay)
            await self._sleep(delay)

    async def _attempt(
        self, url: str, body: dict[str, Any], stream: bool, spent: Spent
    ) -> ModelResponse:
        t0 = time.monotonic()
        signed = self.signed(url, body)
        payload: dict[str, Any] = (
            {"json": body} if signed is None else {"content": signed[0], "headers": signed[1]}
        )
        if not stream:
            response = await self._client.post(url, **payload)
            self._check_status(response)
            return self.decode(self._json(response))
        async with self._client.stream("POST", url, **payload) as response:
            if response.status_code >= 400:
                await response.aread()
                self._check_status(response)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                # A server that ignores ``stream: true`` answers with one JSON body.
                await response.aread()
                return self.decode(self._json(response))
            answer = await self.decode_stream(sse_events(response), spent, t0)
            return replace(answer, streamed=True)

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError:
            raise ModelError(f"model provider {self.name}: response is not JSON") from None
        if not isinstance(data, dict):
            raise ModelError(f"model provider {self.name}: unexpected response")
        return data

    def _check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        if retry_wanted(status, response.headers):
            raise Transient(f"HTTP {status}", retry_delay(response.headers))
        text = self._secrets.scrub(response.text[:MAX_ERROR_BODY])
        raise ModelError(f"model provider {self.name}: HTTP {status}: {text}")
