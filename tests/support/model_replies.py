"""The answers the scripted model server sends, in both wire formats, whole or streamed.

Shapes follow the official SDKs' response types (``openai.types.chat.ChatCompletion`` and
``ChatCompletionChunk``, ``anthropic.types.Message`` and ``RawMessageStreamEvent``; the
server's own tests validate every shape here against them). Besides a plain answer, each
odd answer the APIs document can be sent: ``finish_reason: length`` / ``stop_reason:
max_tokens`` (``truncate``), a refusal (OpenAI's ``refusal`` field, Anthropic's ``stop_reason:
refusal``), ``content_filter``, empty ``choices``, an error body with status 200, and in a
stream an ``error`` event or a connection that drops before the end. Gemini's
``generateContent`` answers are here too (``google.genai.types.GenerateContentResponse``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    """One scripted answer."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: Non-200 answers an error (e.g. 429 or 503) with ``error_body``.
    status: int = 200
    retry_after: float | None = None
    #: ``retry-after-ms`` header (milliseconds), as OpenAI and Anthropic send it.
    retry_after_ms: float | None = None
    #: ``x-should-retry`` header ("true" / "false").
    should_retry: str | None = None
    error_body: str = '{"error": {"type": "rate_limit_error", "message": "slow down"}}'
    #: Seconds to wait before answering (to exercise timeouts).
    delay: float = 0.0
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_tokens: int = 0
    #: The answer was cut at max_tokens (finish_reason length / stop_reason max_tokens).
    truncate: bool = False
    #: The model refuses (OpenAI ``refusal`` text; Anthropic ``stop_reason: refusal``).
    refusal: str | None = None
    #: OpenAI ``finish_reason: content_filter``.
    content_filter: bool = False
    #: A 200 answer whose body is this error (OpenRouter-style; Anthropic ``type: error``).
    error_in_200: dict[str, Any] | None = None
    #: A 200 Chat Completions answer with ``choices: []``.
    empty_choices: bool = False
    #: Streaming: characters per text delta, seconds between events.
    chunk_chars: int = 8
    chunk_delay: float = 0.0
    #: Streaming: an ``error`` event (this error object) after the first text delta.
    stream_error: dict[str, Any] | None = None
    #: Streaming: the connection drops after the first text delta (no final event).
    stream_cut: bool = False


def openai_body(n: int, model: str, reply: Reply, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """A Chat Completions response body."""
    if reply.error_in_200 is not None:
        return {"error": reply.error_in_200}
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    message["refusal"] = reply.refusal
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ]
    choices = (
        []
        if reply.empty_choices
        else [
            {
                "index": 0,
                "message": message,
                "finish_reason": _openai_finish(reply, calls),
                "logprobs": None,
            }
        ]
    )
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": choices,
        "usage": _openai_usage(reply),
    }


def _openai_finish(reply: Reply, calls: list[Any]) -> str:
    if reply.truncate:
        return "length"
    if reply.content_filter:
        return "content_filter"
    return "tool_calls" if calls else "stop"


def _openai_usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def anthropic_body(
    n: int, model: str, reply: Reply, calls: list[tuple[str, dict[str, Any]]]
) -> Any:
    """A Messages API response body."""
    if reply.error_in_200 is not None:
        return {"type": "error", "error": reply.error_in_200}
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for i, (name, args) in enumerate(calls):
        content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args})
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _anthropic_stop(reply, calls),
        "stop_sequence": None,
        "usage": _anthropic_usage(reply),
    }


def _anthropic_stop(reply: Reply, calls: list[Any]) -> str:
    if reply.truncate:
        return "max_tokens"
    if reply.refusal is not None:
        return "refusal"
    return "tool_use" if calls else "end_turn"


def _anthropic_usage(reply: Reply) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
        "cache_creation_input_tokens": 0,
    }


class StreamCut(Exception):
    """Raised by a stream generator where the connection must drop."""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


def openai_events(
    n: int, model: str, reply: Reply, calls: list[tuple[str, dict[str, Any]]], usage: bool
) -> Iterator[tuple[str | None, Any]]:
    """(event name, data) of a streamed Chat Completion; data "[DONE]" ends it."""
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield None, chunk({"role": "assistant", "content": ""})
    for i, piece in enumerate(_pieces(reply.text or reply.refusal or "", reply.chunk_chars)):
        yield None, chunk({"refusal": piece} if reply.refusal else {"content": piece})
        if i == 0 and reply.stream_error is not None:
            yield None, {"error": reply.stream_error}
            return
        if i == 0 and reply.stream_cut:
            raise StreamCut
    for i, (name, args) in enumerate(calls):
        encoded = json.dumps(args)
        half = len(encoded) // 2
        yield (
            None,
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": f"call_{n}_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": encoded[:half]},
                        }
                    ]
                }
            ),
        )
        yield None, chunk({"tool_calls": [{"index": i, "function": {"arguments": encoded[half:]}}]})
    yield None, chunk({}, _openai_finish(reply, calls))
    if usage:
        yield None, {**base, "choices": [], "usage": _openai_usage(reply)}
    yield None, "[DONE]"


def anthropic_events(
    n: int, model: str, reply: Reply, calls: list[tuple[str, dict[str, Any]]]
) -> Iterator[tuple[str | None, Any]]:
    """(event name, data) of a streamed Message (``message_start`` … ``message_stop``)."""
    start_usage = {**_anthropic_usage(reply), "output_tokens": 1}
    message = {**anthropic_body(n, model, Reply(), []), "content": [], "stop_reason": None}
    yield "message_start", {"type": "message_start", "message": {**message, "usage": start_usage}}
    yield "ping", {"type": "ping"}
    index = 0
    if reply.text:
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        for i, piece in enumerate(_pieces(reply.text, reply.chunk_chars)):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
            if i == 0 and reply.stream_error is not None:
                yield "error", {"type": "error", "error": reply.stream_error}
                return
            if i == 0 and reply.stream_cut:
                raise StreamCut
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    for i, (name, args) in enumerate(calls):
        encoded = json.dumps(args)
        half = len(encoded) // 2
        at = index + i
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": at,
                "content_block": {
                    "type": "tool_use",
                    "id": f"toolu_{n}_{i}",
                    "name": name,
                    "input": {},
                },
            },
        )
        for part in (encoded[:half], encoded[half:]):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": at,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": at}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _anthropic_stop(reply, calls), "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _gemini_finish(reply: Reply) -> str:
    if reply.truncate:
        return "MAX_TOKENS"
    if reply.refusal is not None or reply.content_filter:
        return "SAFETY"
    return "STOP"


def _gemini_usage(reply: Reply) -> dict[str, int]:
    return {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    }


def signature(n: int, i: int) -> str:
    """The ``thoughtSignature`` (base64 bytes) of call ``i`` in answer ``n``."""
    return base64.b64encode(f"signature of call {i} in answer {n}".encode()).decode()


def _gemini_parts(n: int, reply: Reply, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    for i, (name, args) in enumerate(calls):
        # thinking models sign their calls; the signature must come back with the call
        parts.append(
            {"functionCall": {"name": name, "args": args}, "thoughtSignature": signature(n, i)}
        )
    return parts


def gemini_body(n: int, model: str, reply: Reply, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """A generateContent response body (``empty_choices``: the prompt was blocked)."""
    if reply.error_in_200 is not None:
        return {"error": reply.error_in_200}
    if reply.empty_choices:
        return {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": _gemini_usage(reply)}
    candidate = {
        "content": {"role": "model", "parts": _gemini_parts(n, reply, calls)},
        "finishReason": _gemini_finish(reply),
        "index": 0,
    }
    return {
        "candidates": [candidate],
        "usageMetadata": _gemini_usage(reply),
        "modelVersion": model,
        "responseId": f"resp-{n}",
    }


def gemini_events(
    n: int, model: str, reply: Reply, calls: list[tuple[str, dict[str, Any]]]
) -> Iterator[tuple[str | None, Any]]:
    """The events of ``:streamGenerateContent?alt=sse``: partial responses, the last with
    the finish reason and the usage (no end marker: the stream just ends)."""
    pieces = _pieces(reply.text, reply.chunk_chars)
    for i, piece in enumerate(pieces):
        content = {"role": "model", "parts": [{"text": piece}]}
        yield None, {"candidates": [{"content": content, "index": 0}], "modelVersion": model}
        if i == 0 and reply.stream_error is not None:
            yield None, {"error": reply.stream_error}
            return
        if i == 0 and reply.stream_cut:
            raise StreamCut
    final = {
        "content": {"role": "model", "parts": _gemini_parts(n, Reply(), calls) or [{"text": ""}]},
        "finishReason": _gemini_finish(reply),
        "index": 0,
    }
    yield (
        None,
        {"candidates": [final], "usageMetadata": _gemini_usage(reply), "modelVersion": model},
    )


def bedrock_body(n: int, reply: Reply, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """A Converse response body (``refusal``: ``guardrail_intervened``)."""
    content: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    for i, (name, args) in enumerate(calls):
        content.append({"toolUse": {"toolUseId": f"tooluse_{n}_{i}", "name": name, "input": args}})
    if reply.truncate:
        stop = "max_tokens"
    elif reply.refusal is not None:
        stop = "guardrail_intervened"
    else:
        stop = "tool_use" if calls else "end_turn"
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {
            "inputTokens": reply.input_tokens,
            "outputTokens": reply.output_tokens,
            "totalTokens": reply.input_tokens + reply.output_tokens,
        },
        "metrics": {"latencyMs": 1},
    }


# -- OpenAI Responses API (``POST /v1/responses``) ----------------------------------------
# Shapes follow ``openai.types.responses.Response`` and ``ResponseStreamEvent`` (the server's
# own tests validate every one against them): a message item holds ``output_text`` (or a
# ``refusal``) parts, each call is a ``function_call`` item with its own ``call_id``, and the
# stream ends with ``response.completed`` (``response.incomplete`` when cut at
# ``max_output_tokens`` or filtered, ``response.failed`` for an error in a 200 answer).


def _responses_usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": reply.cache_read_tokens, "cache_write_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _responses_part(reply: Reply, text: str) -> dict[str, Any]:
    if reply.refusal is not None:
        return {"type": "refusal", "refusal": text}
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _responses_output(
    n: int,
    reply: Reply,
    calls: list[tuple[str, dict[str, Any]]],
    status: str,
    searchable: bool,
    custom: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    said = reply.refusal if reply.refusal is not None else reply.text
    if said:
        output.append(
            {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "status": status,
                "content": [_responses_part(reply, said)],
            }
        )
    for i, (name, args) in enumerate(calls):
        call = _responses_call(n, i, name, args, searchable, custom)
        output.append(call if call["type"] == "custom_tool_call" else {**call, "status": status})
    return output


def _responses_call(
    n: int,
    i: int,
    name: str,
    args: dict[str, Any],
    searchable: bool,
    custom: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The output item of call ``i``: a ``tool_search_call`` the client runs (when the
    request offered ``tool_search``), a ``custom_tool_call`` of a freeform tool the request
    offered (its text is ``args["input"]``), or a ``function_call`` (``<namespace>.<name>``
    is a namespaced tool: function names cannot hold a dot)."""
    call_id = f"call_{n}_{i}"
    if name in custom:
        text = str(args.get("input", ""))
        item = {"id": f"ctc_{n}_{i}", "type": "custom_tool_call", "call_id": call_id}
        return {**item, "name": name, "input": text}
    if name == "tool_search" and searchable:
        return {
            "id": f"ts_{n}_{i}",
            "type": "tool_search_call",
            "call_id": call_id,
            "execution": "client",
            "arguments": args,
        }
    namespace, _, bare = name.rpartition(".")
    item = {"id": f"fc_{n}_{i}", "type": "function_call", "call_id": call_id, "name": bare}
    return {
        **item,
        "arguments": json.dumps(args),
        **({"namespace": namespace} if namespace else {}),
    }


def _custom(request: dict[str, Any]) -> frozenset[str]:
    """The freeform (``type: custom``) tools the request offered."""
    tools = request.get("tools") or []
    return frozenset(
        str(t.get("name")) for t in tools if isinstance(t, dict) and t.get("type") == "custom"
    )


def _searchable(request: dict[str, Any]) -> bool:
    tools = request.get("tools") or []
    return any(isinstance(t, dict) and t.get("type") == "tool_search" for t in tools)


def _responses_status(reply: Reply) -> tuple[str, dict[str, str] | None]:
    if reply.truncate:
        return "incomplete", {"reason": "max_output_tokens"}
    if reply.content_filter:
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def responses_object(
    n: int,
    model: str,
    reply: Reply,
    calls: list[tuple[str, dict[str, Any]]],
    request: dict[str, Any],
    status: str | None = None,
) -> dict[str, Any]:
    """A Response object; ``status`` ``in_progress`` gives the one ``response.created``
    carries (no output, no usage). Request fields the API echoes back are echoed."""
    final, incomplete = _responses_status(reply)
    status = status or final
    done = status != "in_progress"
    error = None
    if reply.error_in_200 is not None:
        status, error = "failed", reply.error_in_200
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1,
        "status": status,
        "error": error,
        "incomplete_details": incomplete if done else None,
        "instructions": request.get("instructions"),
        "model": model,
        "output": (
            _responses_output(n, reply, calls, "completed", _searchable(request), _custom(request))
            if done and not error
            else []
        ),
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "temperature": request.get("temperature"),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": list(request.get("tools") or []),
        "top_p": request.get("top_p"),
        "max_output_tokens": request.get("max_output_tokens"),
        "previous_response_id": None,
        "store": request.get("store", True),
        "usage": _responses_usage(reply) if done and not error else None,
    }


def responses_body(
    n: int,
    model: str,
    reply: Reply,
    calls: list[tuple[str, dict[str, Any]]],
    request: dict[str, Any],
) -> Any:
    """A Responses API answer (not streamed)."""
    return responses_object(n, model, reply, calls, request)


def responses_events(
    n: int,
    model: str,
    reply: Reply,
    calls: list[tuple[str, dict[str, Any]]],
    request: dict[str, Any],
) -> Iterator[tuple[str | None, Any]]:
    """(event name, data) of a streamed Response, numbered by ``sequence_number``."""
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(seq), **fields}

    started = responses_object(n, model, reply, calls, request, status="in_progress")
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    if reply.error_in_200 is not None:
        yield event("response.failed", response=responses_object(n, model, reply, [], request))
        return
    index = 0
    said = reply.refusal if reply.refusal is not None else reply.text
    if said:
        if (yield from _responses_message_events(n, reply, said, event)):
            return  # the stream ended in an ``error`` event
        index = 1
    for i, (name, args) in enumerate(calls):
        item = _responses_call(n, i, name, args, _searchable(request), _custom(request))
        yield from _responses_call_events(item, index + i, event)
    final = responses_object(n, model, reply, calls, request)
    kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
    yield event(kind, response=final)


def _responses_message_events(
    n: int, reply: Reply, said: str, event: Callable[..., tuple[str, dict[str, Any]]]
) -> Generator[tuple[str | None, Any], None, bool]:
    """The message item's events; returns True when it ended the stream with an error."""
    item = {"id": f"msg_{n}", "type": "message", "role": "assistant"}
    at = {"item_id": item["id"], "output_index": 0}
    refusal = reply.refusal is not None
    delta_kind = "response.refusal.delta" if refusal else "response.output_text.delta"
    yield event(
        "response.output_item.added",
        output_index=0,
        item={**item, "status": "in_progress", "content": []},
    )
    yield event(
        "response.content_part.added", **at, content_index=0, part=_responses_part(reply, "")
    )
    for i, piece in enumerate(_pieces(said, reply.chunk_chars)):
        extra = {} if refusal else {"logprobs": []}
        yield event(delta_kind, **at, content_index=0, delta=piece, **extra)
        if i == 0 and reply.stream_error is not None:
            error = reply.stream_error
            code = error.get("code")
            yield event(
                "error",
                code=None if code is None else str(code),
                message=str(error.get("message", "")),
                param=None,
            )
            return True
        if i == 0 and reply.stream_cut:
            raise StreamCut
    if refusal:
        yield event("response.refusal.done", **at, content_index=0, refusal=said)
    else:
        yield event("response.output_text.done", **at, content_index=0, text=said, logprobs=[])
    part = _responses_part(reply, said)
    yield event("response.content_part.done", **at, content_index=0, part=part)
    done = {**item, "status": "completed", "content": [part]}
    yield event("response.output_item.done", output_index=0, item=done)
    return False


def _responses_call_events(
    item: dict[str, Any], index: int, event: Callable[..., tuple[str, dict[str, Any]]]
) -> Iterator[tuple[str | None, Any]]:
    """A call's events: added, its arguments in two deltas (a function call), done."""
    at = {"item_id": item["id"], "output_index": index}
    if item["type"] == "function_call":
        added = {**item, "arguments": "", "status": "in_progress"}
        yield event("response.output_item.added", output_index=index, item=added)
        encoded = item["arguments"]
        half = len(encoded) // 2
        for part in (encoded[:half], encoded[half:]):
            yield event("response.function_call_arguments.delta", **at, delta=part)
        yield event("response.function_call_arguments.done", **at, arguments=encoded)
    elif item["type"] == "custom_tool_call":  # it has no status
        yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
        return
    else:
        added = {**item, "status": "in_progress"}
        yield event("response.output_item.added", output_index=index, item=added)
    done = {**item, "status": "completed"}
    yield event("response.output_item.done", output_index=index, item=done)
