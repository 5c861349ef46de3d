"""The runner's spans in the OpenTelemetry GenAI semantic conventions.

* ``invoke_agent {agent}`` (internal) per agent invocation: ``gen_ai.operation.name``,
  ``gen_ai.agent.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.conversation.id`` (the Run's correlation id).
* ``chat {model}`` (client) per model call: ``gen_ai.provider.name``,
  ``gen_ai.request.model``, ``gen_ai.request.max_tokens``/``temperature``,
  ``gen_ai.usage.input_tokens``/``output_tokens``, ``gen_ai.response.finish_reasons``;
  with content on, ``gen_ai.system_instructions``, ``gen_ai.input.messages`` and
  ``gen_ai.output.messages``.
* The metrics ``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage`` per
  model call: over OTLP when metrics are on, and always in the run's report
  (:mod:`.genai_stats`), which the operator serves on its Prometheus endpoint.
* ``execute_tool {tool}`` (internal) per tool call: ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` and our governance attributes
  ``swarmkit.tool.kind``, ``swarmkit.skill``, ``swarmkit.permission.tier``,
  ``swarmkit.permission.effects``, ``swarmkit.decision`` (allowed, refused, review,
  error) and ``swarmkit.review.key``/``swarmkit.review.name`` when a person decides;
  with content on, ``gen_ai.tool.call.arguments``/``result``.
* ``{mcp.method.name} {tool}`` (client) per MCP call, its context sent in
  ``params._meta`` (the MCP conventions' propagation).
* ``tools/call {tool}`` (server) per call the MCP gateway serves, continuing the harness's
  trace when its request carries ``traceparent`` in ``params._meta``.
* ``{a2a.method.name}`` (client: ``SendMessage``, ``GetTask``, ``CancelTask``) per A2A call,
  its context in the W3C ``traceparent`` header; a served Topology's server span of the
  same name continues the caller's trace (the A2A conventions).

The attribute names are the GenAI conventions' (``tests/unit/runner/test_tracing_semconv.py``
records the upstream documents they come from).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from . import genai_stats
from .span_api import Span
from .spans import tracer

if TYPE_CHECKING:
    from .providers import ModelRequest, ModelResponse, Provider, ToolCall, ToolResultItem

#: The runner's provider types → ``gen_ai.provider.name`` (the conventions' well-known values;
#: a generic HTTP endpoint and the replay script are ours).
PROVIDER_NAMES = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure-openai": "azure.ai.openai",
    "bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "http": "swarmkit.http",
    "replay": "swarmkit.replay",
}

#: The catalog's tool kinds → ``gen_ai.tool.type`` (function: runs in the agent's process or
#: through a call it makes; extension: an MCP server or HTTP API outside it).
TOOL_TYPES = {"mcp": "extension", "http": "extension"}


def provider_name(provider_type: str) -> str:
    return PROVIDER_NAMES.get(provider_type, provider_type)


@contextlib.contextmanager
def agent_span(agent: str, provider: Provider, conversation: str, depth: int) -> Iterator[Span]:
    with tracer().span(
        f"invoke_agent {agent}",
        "internal",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.provider.name": provider_name(provider.type),
            "gen_ai.request.model": provider.model,
            "gen_ai.conversation.id": conversation,
            "swarmkit.agent.depth": depth,
        },
    ) as span:
        yield span


def _messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The request's messages in the conventions' ``gen_ai.input.messages`` shape."""
    from .providers import AssistantMessage, UserMessage

    out: list[dict[str, Any]] = []
    for m in request.messages:
        if isinstance(m, UserMessage):
            out.append({"role": "user", "parts": [{"type": "text", "content": m.text}]})
        elif isinstance(m, AssistantMessage):
            parts: list[dict[str, Any]] = [{"type": "text", "content": m.text}]
            parts += [
                {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "parts": parts})
        else:
            parts = [
                {"type": "tool_call_response", "id": r.call_id, "response": r.content}
                for r in m.results
            ]
            out.append({"role": "tool", "parts": parts})
    return out


async def chat(provider: Provider, request: ModelRequest) -> ModelResponse:
    """``provider.complete(request)`` inside a ``chat {model}`` span, and the GenAI client
    metrics of the call."""
    metric_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(provider.type),
        "gen_ai.request.model": provider.model,
    }
    started = time.monotonic()
    try:
        response = await _chat(provider, request)
    except Exception as exc:
        code = getattr(exc, "code", None)
        error = {"error.type": code if isinstance(code, str) else type(exc).__name__}
        seconds = time.monotonic() - started
        tracer().record_chat({**metric_attrs, **error}, seconds, 0, 0)
        _report_call(metric_attrs, seconds, 0, 0, error["error.type"])
        raise
    usage = response.usage
    seconds = time.monotonic() - started
    tracer().record_chat(metric_attrs, seconds, usage.input_tokens, usage.output_tokens)
    _report_call(metric_attrs, seconds, usage.input_tokens, usage.output_tokens, None)
    return response


def _report_call(
    attrs: dict[str, Any], seconds: float, input_tokens: int, output_tokens: int, error: str | None
) -> None:
    """Count the call for the run's report (the operator's Prometheus histograms)."""
    genai_stats.current().record(
        attrs["gen_ai.operation.name"],
        attrs["gen_ai.provider.name"],
        attrs["gen_ai.request.model"],
        seconds,
        input_tokens,
        output_tokens,
        error,
    )


async def _chat(provider: Provider, request: ModelRequest) -> ModelResponse:
    with tracer().span(
        f"chat {provider.model}",
        "client",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(provider.type),
            "gen_ai.request.model": provider.model,
            "gen_ai.request.max_tokens": request.max_tokens,
            "gen_ai.request.temperature": request.temperature,
        },
    ) as span:
        if span.capturing:
            system = [{"type": "text", "content": request.system}]
            span.content("gen_ai.system_instructions", system)
            span.content("gen_ai.input.messages", _messages(request))
        response = await provider.complete(request)
        span.set("gen_ai.usage.input_tokens", response.usage.input_tokens)
        span.set("gen_ai.usage.output_tokens", response.usage.output_tokens)
        if response.stop_reason:
            span.set("gen_ai.response.finish_reasons", [response.stop_reason])
        if response.attempts > 1:
            span.set("swarmkit.model.attempts", response.attempts)
        if span.capturing:
            parts: list[dict[str, Any]] = [{"type": "text", "content": response.text}]
            parts += [
                {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
                for c in response.tool_calls
            ]
            span.content("gen_ai.output.messages", [{"role": "assistant", "parts": parts}])
        return response


class ToolLike(Protocol):
    """What a tool span reads of the catalog's entry (``catalog.ToolEntry``; named
    structurally: the catalog imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def skill(self) -> str | None: ...

    @property
    def gate(self) -> Any: ...


@contextlib.contextmanager
def tool_span(entry: ToolLike | None, call: ToolCall) -> Iterator[Span]:
    name = entry.name if entry is not None else call.name
    gate = entry.gate if entry is not None else None
    kind = entry.kind if entry is not None else None
    with tracer().span(
        f"execute_tool {name}",
        "internal",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": TOOL_TYPES.get(kind or "", "function"),
            "swarmkit.tool.kind": kind,
            "swarmkit.skill": entry.skill if entry is not None else None,
            "swarmkit.permission.tier": gate.tier if gate is not None else None,
            "swarmkit.permission.effects": gate.effects if gate is not None else None,
        },
    ) as span:
        span.content("gen_ai.tool.call.arguments", call.arguments)
        try:
            yield span
        except BaseException as exc:
            items = getattr(exc, "items", None)
            if getattr(exc, "outcome", None) == "AwaitingReview" and items:
                span.set("swarmkit.decision", "review")
                span.set("swarmkit.review.key", items[0].key)
            raise


def tool_result(span: Span, result: ToolResultItem, refused: bool) -> None:
    """The outcome of an ``execute_tool`` span."""
    if refused:
        span.set("swarmkit.decision", "refused")
        span.error("refused", result.content.split(":", 1)[0])
    elif result.is_error:
        span.set("swarmkit.decision", "allowed")
        span.error(result.content.split(":", 1)[0] or "tool_error")
    else:
        span.set("swarmkit.decision", "allowed")
        span.content("gen_ai.tool.call.result", result.content)


@contextlib.contextmanager
def mcp_span(
    method: str, target: str, server: str, transport: str, url: str | None
) -> Iterator[tuple[Span, dict[str, str]]]:
    """An MCP client span; yields it and the ``params._meta`` carrying its context."""
    attrs: dict[str, Any] = {
        "mcp.method.name": method,
        "gen_ai.tool.name": target,
        "gen_ai.operation.name": "execute_tool" if method == "tools/call" else None,
        "network.transport": "pipe" if transport == "stdio" else "tcp",
        "swarmkit.mcp.server": server,
    }
    if url:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        attrs["server.address"] = parts.hostname
        attrs["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    with tracer().span(f"{method} {target}", "client", attrs) as span:
        meta: dict[str, str] = {}
        tracer().inject(meta)
        yield span, meta


#: A2A operations → the logical ``a2a.method.name`` (the same for 0.3 and 1.0 peers).
A2A_METHODS = {
    "send": "SendMessage",
    "stream": "SendStreamingMessage",
    "get": "GetTask",
    "cancel": "CancelTask",
}


def a2a_state(state: object) -> str | None:
    """A task state (``input-required``) as ``a2a.task.state`` (``TASK_STATE_INPUT_REQUIRED``)."""
    if not isinstance(state, str) or not state:
        return None
    name = state.upper().replace("-", "_")
    return name if name.startswith("TASK_STATE_") else f"TASK_STATE_{name}"


def _address(url: str) -> dict[str, Any]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return {
        "server.address": parts.hostname,
        "server.port": parts.port or (443 if parts.scheme == "https" else 80),
    }


@contextlib.contextmanager
def a2a_client_span(
    op: str, endpoint: str, agent: str, version: str
) -> Iterator[tuple[Span, dict[str, str]]]:
    """An A2A client span; yields it and the headers carrying its context."""
    method = A2A_METHODS.get(op, op)
    attrs: dict[str, Any] = {
        "a2a.method.name": method,
        "a2a.protocol.version": version,
        "gen_ai.agent.name": agent or None,
        **_address(endpoint),
    }
    with tracer().span(method, "client", attrs) as span:
        headers: dict[str, str] = {}
        tracer().inject(headers)
        yield span, headers


def a2a_result(span: Span, result: object) -> None:
    """Task id and state of an A2A answer on its span."""
    if not isinstance(result, dict):
        return
    task = result.get("task") if isinstance(result.get("task"), dict) else result
    if not isinstance(task, dict):
        return
    if task.get("id"):
        span.set("a2a.task.id", str(task["id"]))
    if task.get("contextId"):
        span.set("gen_ai.conversation.id", str(task["contextId"]))
    status = task.get("status")
    if isinstance(status, dict):
        span.set("a2a.task.state", a2a_state(status.get("state")))


@contextlib.contextmanager
def a2a_server_span(op: str, agent: str, version: str) -> Iterator[Span]:
    """A served Topology's span of one A2A request (its parent: the caller's context)."""
    method = A2A_METHODS.get(op, op)
    with tracer().span(
        method,
        "server",
        {"a2a.method.name": method, "a2a.protocol.version": version, "gen_ai.agent.name": agent},
    ) as span:
        yield span


def _meta_dict(meta: object) -> dict[str, Any]:
    if meta is None:
        return {}
    if isinstance(meta, dict):
        return meta
    dump = getattr(meta, "model_dump", None)
    if callable(dump):
        found = dump(by_alias=True)
        return found if isinstance(found, dict) else {}
    return {}


@contextlib.contextmanager
def mcp_server_span(tool: str, meta: object, session: str | None) -> Iterator[Span]:
    """The MCP gateway's span of one ``tools/call`` (parent: the context in ``_meta``)."""
    found = _meta_dict(meta)
    carrier = {k: v for k in ("traceparent", "tracestate") if isinstance(v := found.get(k), str)}
    attrs: dict[str, Any] = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "gen_ai.operation.name": "execute_tool",
        "mcp.session.id": session,
        "network.transport": "tcp",
    }
    with tracer().remote(carrier), tracer().span(f"tools/call {tool}", "server", attrs) as span:
        yield span
