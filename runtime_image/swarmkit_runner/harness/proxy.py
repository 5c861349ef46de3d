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
checked they match); today: Anthropic Messages (``POST /v1/messages``, and
``/v1/messages/count_tokens``, which is not a model turn and is not charged).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..errors import RunEnded, RunFailed
from ..providers.anthropic import DEFAULT_BASE_URL, AnthropicProvider, _cached_tokens, _input_tokens
from ..providers.base import Usage

if TYPE_CHECKING:
    import httpx
    from starlette.applications import Starlette
    from starlette.responses import Response

    from swarmkit_api.workspace import ModelProvider

    from ..context import RunContext

#: Request headers passed to the provider as the harness sent them.
FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "content-type", "accept")
#: Response headers passed back (hop-by-hop and length headers are the server's own).
RELAYED_HEADERS = ("content-type", "request-id", "anthropic-ratelimit-requests-remaining")


def _token_of(headers: Any) -> str:
    key = headers.get("x-api-key") or ""
    if key:
        return str(key)
    auth = str(headers.get("authorization") or "")
    return auth[7:] if auth.lower().startswith("bearer ") else ""


def refusal(status: int, kind: str, message: str) -> Response:
    """An error answer in the Messages API's shape (the harness shows its message)."""
    from starlette.responses import JSONResponse

    body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status)


class UsageReader:
    """Reads usage from an Anthropic answer as it passes (SSE lines or one JSON body)."""

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
            if line.startswith(b"data:"):
                self._event(line[5:].strip())

    def _event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        if event.get("type") == "message_start":
            usage = (event.get("message") or {}).get("usage") or {}
            self.usage = Usage(
                _input_tokens(usage), int(usage.get("output_tokens") or 0), _cached_tokens(usage)
            )
        elif event.get("type") == "message_delta":
            usage = event.get("usage") or {}
            output = int(usage.get("output_tokens") or self.usage.output_tokens)
            self.usage = Usage(self.usage.input_tokens, output, self.usage.cached_input_tokens)
            self.stop_reason = str((event.get("delta") or {}).get("stop_reason") or "")

    def feed_json(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except ValueError:
            return
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict):
            self.usage = Usage(
                _input_tokens(usage), int(usage.get("output_tokens") or 0), _cached_tokens(usage)
            )
            self.stop_reason = str(data.get("stop_reason") or "")


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
    ) -> None:
        self.ctx = ctx
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
                headers=AnthropicProvider.headers(key),
                timeout=httpx.Timeout(self.config.timeout_seconds),
                **egress.client_kwargs(),
            )
        return self._client

    def url(self, path: str) -> str:
        base = (self.config.base_url or DEFAULT_BASE_URL).rstrip("/")
        return f"{base.removesuffix('/v1')}{path}"

    def check_limits(self, max_tokens: int) -> None:
        """Raise what ends the node when the next call may not be made (audited)."""
        budget = self.ctx.budget
        budget.before_step(self.ctx.audit, self.agent)
        budget.spend.check(self.ctx.audit, self.agent, self.config, self.model, max_tokens)

    def record(self, reader: UsageReader, started: float, status: int) -> None:
        """Charge one model turn (once) and audit it."""
        self.calls += 1
        budget = self.ctx.budget
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
        budget.spend.record(self.agent, self.config, self.model, reader.usage)
        try:
            budget.after_step(self.ctx.audit, self.agent, reader.usage)
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
                return refusal(401, "authentication_error", "invalid x-api-key")
            try:
                body = json.loads(await request.body())
            except ValueError:
                return refusal(400, "invalid_request_error", "the body is not JSON")
            if not isinstance(body, dict):
                return refusal(400, "invalid_request_error", "the body is not an object")
            counting = request.url.path.endswith("/count_tokens")
            if not counting:
                if self.ended is not None:
                    return refusal(400, "invalid_request_error", self.ended.message)
                try:
                    self.check_limits(int(body.get("max_tokens") or 0))
                except RunEnded as exc:
                    self.end(exc)
                    return refusal(400, "invalid_request_error", f"{exc.outcome}: {exc.message}")
            body["model"] = self.model
            headers = {k: request.headers[k] for k in FORWARDED_HEADERS if k in request.headers}
            upstream = self.client().build_request(
                "POST", self.url(request.url.path), json=body, headers=headers
            )
            started = time.monotonic()
            try:
                response = await self.client().send(upstream, stream=True)
            except httpx.HTTPError as exc:
                return refusal(502, "api_error", f"model provider {self.config.name}: {exc}")
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
            reader = UsageReader()
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

        return Starlette(
            routes=[
                Route("/v1/messages", messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", messages, methods=["POST"]),
            ]
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


__all__ = ["ModelProxy", "UsageReader"]
