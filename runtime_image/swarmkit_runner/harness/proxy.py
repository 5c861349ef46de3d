"""The model proxy a harness calls instead of the model API: per-Run token in, provider key out.

The harness gets ``http://127.0.0.1:<port>`` as its model base URL and a random per-Run
token as its API key; it never sees the Workspace provider's credential. Each request:

1. the token is checked (``x-api-key`` or ``Authorization: Bearer``; constant time), else 401;
2. the Run's limits are checked *before* the call, as for a model node: steps and tokens per
   run (:meth:`.context.Budget.before_step`) and the spend cap (:meth:`.spend.SpendMeter.check`
   with the request's ``max_tokens``). A call that would cross one is answered 400 (an
   ``invalid_request_error`` naming the limit) and the node ends with that outcome
   (:attr:`ModelProxy.ended`; the harness is stopped);
3. the body goes to the provider unchanged except ``model`` (always the Agent's model), with
   the provider's own auth headers, through the run's egress guard;
4. the answer is relayed as it arrives (streamed or not) while its usage is read from it
   (``message_start`` + the last ``message_delta``, or the JSON ``usage``) and recorded once
   on the Run's meter (:meth:`.spend.SpendMeter.record`, :meth:`.context.Budget.after_step`)
   and audited as ``model.call``: the Run's ``usage`` and spend are exact. A provider that
   refuses the credential (401/403) ends the node ``Failed`` at once: the harness would
   retry it for minutes.

Only the wire format the harness needs and the provider speaks is forwarded (admission
checked they match), one :class:`Dialect` per entry of
``swarmkit_api.harness.PROXIED_WIRE_FORMATS``: Anthropic Messages (``POST /v1/messages``,
and ``/v1/messages/count_tokens``, which is not a model turn and is not charged) for Claude
Code; the OpenAI Responses API (``POST /v1/responses``; usage from ``response.completed``)
for Codex. Each dialect names its provider auth headers, its max-tokens field and its error
shape, so the harness reads a refusal as its own API's.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from swarmkit_api.harness import PROXIED_WIRE_FORMATS

from ..errors import RunEnded, RunFailed
from ..model_calls import charge_turn, check_turn
from ..providers import anthropic, gemini, openai
from ..providers.anthropic import AnthropicProvider, _cached_tokens, _input_tokens
from ..providers.base import Usage
from ..providers.gemini import GeminiProvider
from ..providers.openai import OpenAIProvider

if TYPE_CHECKING:
    import httpx
    from starlette.applications import Starlette
    from starlette.responses import Response

    from swarmkit_api.workspace import ModelProvider

    from ..context import RunContext

#: Request headers passed to the provider as the harness sent them.
FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "content-type", "accept")
#: Response headers passed back (hop-by-hop and length headers are the server's own).
RELAYED_HEADERS = (
    "content-type",
    "request-id",
    "x-request-id",
    "anthropic-ratelimit-requests-remaining",
)


def _token_of(headers: Any) -> str:
    key = headers.get("x-api-key") or headers.get("x-goog-api-key") or ""
    if key:
        return str(key)
    auth = str(headers.get("authorization") or "")
    return auth[7:] if auth.lower().startswith("bearer ") else ""


def _json_object(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class UsageReader:
    """Reads usage from an Anthropic answer as it passes (SSE lines or one JSON body);
    a subclass per other wire format reads its own events (:meth:`on_event`) and bodies
    (:meth:`on_body`)."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.stop_reason = ""
        self._pending = b""

    def feed_sse(self, chunk: bytes) -> None:
        data = self._pending + chunk
        lines = data.split(b"\n")
        self._pending = lines.pop()
        for raw in lines:
            line = raw.strip()
            if line.startswith(b"data:") and (event := _json_object(line[5:].strip())):
                self.on_event(event)

    def feed_json(self, body: bytes) -> None:
        if (data := _json_object(body)) is not None:
            self.on_body(data)

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "message_start":
            self.on_body(event.get("message") or {})
        elif event.get("type") == "message_delta":
            usage = event.get("usage") or {}
            output = int(usage.get("output_tokens") or self.usage.output_tokens)
            self.usage = Usage(self.usage.input_tokens, output, self.usage.cached_input_tokens)
            self.stop_reason = str((event.get("delta") or {}).get("stop_reason") or "")

    def on_body(self, data: dict[str, Any]) -> None:
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.usage = Usage(
                _input_tokens(usage), int(usage.get("output_tokens") or 0), _cached_tokens(usage)
            )
            self.stop_reason = str(data.get("stop_reason") or "")


class ResponsesUsageReader(UsageReader):
    """Reads usage from an OpenAI Responses answer: the final ``response.completed`` (or
    ``.incomplete``/``.failed``) event's ``response``, or the JSON body itself."""

    def on_event(self, event: dict[str, Any]) -> None:
        if str(event.get("type", "")) in FINAL_RESPONSE_EVENTS:
            self.on_body(event.get("response") or {})

    def on_body(self, data: dict[str, Any]) -> None:
        usage = data.get("usage")
        if isinstance(usage, dict):
            details = usage.get("input_tokens_details") or {}
            self.usage = Usage(
                int(usage.get("input_tokens") or 0),
                int(usage.get("output_tokens") or 0),
                int(details.get("cached_tokens") or 0),
            )
        self.stop_reason = str(data.get("status") or "")


#: The Responses API's last streamed event of an answer (it carries the usage).
FINAL_RESPONSE_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class GeminiUsageReader(UsageReader):
    """Reads usage from a Gemini answer: every chunk's ``usageMetadata`` is the total so far
    (the last one wins), or the JSON body's."""

    def on_event(self, event: dict[str, Any]) -> None:
        self.on_body(event)

    def on_body(self, data: dict[str, Any]) -> None:
        if data.get("usageMetadata"):
            self.usage = gemini._usage(data)
        candidates = data.get("candidates") or []
        if candidates and isinstance(candidates[0], dict) and candidates[0].get("finishReason"):
            self.stop_reason = str(candidates[0]["finishReason"])


def _anthropic_error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _openai_error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "code": None, "param": None}}


def _gemini_error(status: int, kind: str, message: str) -> dict[str, Any]:
    code = {401: "UNAUTHENTICATED", 502: "UNAVAILABLE"}.get(status, "INVALID_ARGUMENT")
    return {"error": {"code": status, "message": message, "status": code}}


def _body_model(free: tuple[str, ...]) -> Callable[[str, dict[str, Any], str], tuple[str, bool]]:
    """Messages and Responses: the model is the body's ``model``; ``free`` paths are no turn."""

    def target(path: str, body: dict[str, Any], model: str) -> tuple[str, bool]:
        body["model"] = model
        return path, path not in free

    return target


def _gemini_target(path: str, body: dict[str, Any], model: str) -> tuple[str, bool]:
    # The model is in the path (``/v1beta/models/<model>:<method>``), never the body.
    method = path.rpartition(":")[2]
    name = quote(model.removeprefix("models/"), safe="")
    return f"/v1beta/models/{name}:{method}", method in GEMINI_TURNS


#: Gemini methods that are a model turn (``countTokens`` is not).
GEMINI_TURNS = frozenset({"generateContent", "streamGenerateContent"})


def _gemini_max_tokens(body: dict[str, Any]) -> int:
    config = body.get("generationConfig")
    return int(config.get("maxOutputTokens") or 0) if isinstance(config, dict) else 0


@dataclass(frozen=True)
class Dialect:
    """One wire format the proxy forwards: routes, auth, limits field, usage, errors."""

    wire_format: str
    #: The routes the harness may call (Starlette paths).
    routes: tuple[str, ...]
    #: (harness path, body, the Agent's model) → (provider path, whether it is a model
    #: turn: checked against the limits before and metered after); sets the model.
    target: Callable[[str, dict[str, Any], str], tuple[str, bool]]
    #: The most output tokens the call may take, from its body (the spend cap's estimate).
    max_tokens: Callable[[dict[str, Any]], int]
    default_base_url: str
    headers: Callable[[str | None], dict[str, str]]
    #: (provider base URL, provider path) → URL.
    url: Callable[[str, str], str]
    reader: type[UsageReader]
    #: (status, kind, message) → the API's own error body.
    error: Callable[[int, str, str], dict[str, Any]]


DIALECTS: dict[str, Dialect] = {
    "anthropic-messages": Dialect(
        wire_format="anthropic-messages",
        routes=("/v1/messages", "/v1/messages/count_tokens"),
        target=_body_model(("/v1/messages/count_tokens",)),
        max_tokens=lambda body: int(body.get("max_tokens") or 0),
        default_base_url=anthropic.DEFAULT_BASE_URL,
        headers=AnthropicProvider.headers,
        # The Anthropic base URL has no version; ``/v1`` is part of the harness's path.
        url=lambda base, path: f"{base.removesuffix('/v1')}{path}",
        reader=UsageReader,
        error=_anthropic_error,
    ),
    "openai-responses": Dialect(
        wire_format="openai-responses",
        routes=("/v1/responses",),
        target=_body_model(()),
        max_tokens=lambda body: int(body.get("max_output_tokens") or 0),
        default_base_url=openai.DEFAULT_BASE_URL,
        headers=OpenAIProvider.headers,
        # An OpenAI base URL ends with its version (``…/v1``); the path's is the proxy's.
        url=lambda base, path: f"{base}{path.removeprefix('/v1')}",
        reader=ResponsesUsageReader,
        error=_openai_error,
    ),
    "gemini-generate-content": Dialect(
        wire_format="gemini-generate-content",
        routes=("/v1beta/models/{target:path}",),
        target=_gemini_target,
        max_tokens=_gemini_max_tokens,
        default_base_url=gemini.DEFAULT_BASE_URL,
        headers=GeminiProvider.headers,
        url=lambda base, path: f"{base.removesuffix('/v1beta')}{path}",
        reader=GeminiUsageReader,
        error=_gemini_error,
    ),
}
assert set(DIALECTS) == set(PROXIED_WIRE_FORMATS), "one dialect per proxied wire format"


class ModelProxy:
    """The proxy for one harness node (one agent, one provider, one model)."""

    def __init__(
        self,
        ctx: RunContext,
        agent: str,
        config: ModelProvider,
        model: str,
        token: str,
        stop: asyncio.Event,
        dialect: Dialect = DIALECTS["anthropic-messages"],
    ) -> None:
        self.ctx = ctx
        self.dialect = dialect
        self.agent = agent
        self.config = config
        self.model = model
        self.token = token
        #: What ended the node from here (a limit before a call), if anything.
        self.ended: RunEnded | None = None
        self.calls = 0
        #: Set when :attr:`ended` is: the node's driver stops the harness.
        self.stop = stop
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            from .. import egress

            key = self.ctx.secrets.get(self.config.api_key) if self.config.api_key else None
            self._client = httpx.AsyncClient(
                headers=self.dialect.headers(key),
                timeout=httpx.Timeout(self.config.timeout_seconds),
                **egress.client_kwargs(),
            )
        return self._client

    def url(self, path: str) -> str:
        base = (self.config.base_url or self.dialect.default_base_url).rstrip("/")
        return self.dialect.url(base, path)

    def refusal(self, status: int, kind: str, message: str) -> Response:
        """An error answer in the dialect's shape (the harness shows its message)."""
        from starlette.responses import JSONResponse

        return JSONResponse(self.dialect.error(status, kind, message), status_code=status)

    def check_limits(self, max_tokens: int) -> None:
        """Raise what ends the node when the next call may not be made (audited)."""
        check_turn(self.ctx, self.agent, self.config, self.model, max_tokens)

    def record(self, reader: UsageReader, started: float, status: int) -> None:
        """Charge one model turn (once) and audit it."""
        self.calls += 1
        self.ctx.audit.emit(
            "model.call",
            agent=self.agent,
            provider=self.config.name,
            model=self.model,
            step=self.calls,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
            input_tokens=reader.usage.input_tokens,
            output_tokens=reader.usage.output_tokens,
            stop_reason=reader.stop_reason or None,
            via="harness-proxy",
            outcome="ok" if status < 400 else f"http {status}",
        )
        try:
            charge_turn(self.ctx, self.agent, self.config, self.model, reader.usage)
        except RunEnded as exc:
            self.end(exc)

    def end(self, exc: RunEnded) -> None:
        """End the node with ``exc`` (the first reason wins) and stop the harness."""
        self.ended = self.ended or exc
        self.stop.set()

    def app(self) -> Starlette:
        import httpx
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response, StreamingResponse
        from starlette.routing import Route

        async def messages(request: Request) -> Response:
            if not hmac.compare_digest(_token_of(request.headers).encode(), self.token.encode()):
                self.ctx.audit.emit(
                    "auth.refused", agent=self.agent, reason="model proxy token", outcome="refused"
                )
                return self.refusal(401, "authentication_error", "invalid x-api-key")
            try:
                body = json.loads(await request.body())
            except ValueError:
                return self.refusal(400, "invalid_request_error", "the body is not JSON")
            if not isinstance(body, dict):
                return self.refusal(400, "invalid_request_error", "the body is not an object")
            path, turn = self.dialect.target(request.url.path, body, self.model)
            counting = not turn
            if turn:
                if self.ended is not None:
                    return self.refusal(400, "invalid_request_error", self.ended.message)
                try:
                    self.check_limits(self.dialect.max_tokens(body))
                except RunEnded as exc:
                    self.end(exc)
                    message = f"{exc.outcome}: {exc.message}"
                    return self.refusal(400, "invalid_request_error", message)
            headers = {k: request.headers[k] for k in FORWARDED_HEADERS if k in request.headers}
            url = self.url(path) + (f"?{request.url.query}" if request.url.query else "")
            upstream = self.client().build_request("POST", url, json=body, headers=headers)
            started = time.monotonic()
            try:
                response = await self.client().send(upstream, stream=True)
            except httpx.HTTPError as exc:
                return self.refusal(502, "api_error", f"model provider {self.config.name}: {exc}")
            if response.status_code in (401, 403):
                # The Workspace's credential is refused: the harness would retry it for
                # minutes; the node ends now, saying so (no key in the message).
                self.end(
                    RunFailed(
                        f"model provider {self.config.name} refused the "
                        f"credential (HTTP {response.status_code})"
                    )
                )
            relayed = {k: response.headers[k] for k in RELAYED_HEADERS if k in response.headers}
            reader = self.dialect.reader()
            streamed = "text/event-stream" in response.headers.get("content-type", "")

            async def relay() -> AsyncIterator[bytes]:
                try:
                    async for chunk in response.aiter_bytes():
                        if streamed:
                            reader.feed_sse(chunk)
                        yield chunk
                finally:
                    await response.aclose()
                    if not counting and response.status_code < 400:
                        self.record(reader, started, response.status_code)

            if streamed:
                return StreamingResponse(relay(), response.status_code, relayed)
            content = await response.aread()
            await response.aclose()
            if not counting and response.status_code < 400:
                reader.feed_json(content)
                self.record(reader, started, response.status_code)
            return Response(content, response.status_code, relayed)

        routes = [Route(path, messages, methods=["POST"]) for path in self.dialect.routes]
        return Starlette(routes=routes)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


__all__ = [
    "DIALECTS",
    "Dialect",
    "GeminiUsageReader",
    "ModelProxy",
    "ResponsesUsageReader",
    "UsageReader",
]
