"""The scripted model server holds requests to the real APIs' contracts and answers in shapes
the official SDKs parse.

The official ``openai`` and ``anthropic`` SDKs are the clients here: what they send must be
accepted (the server's checks refuse nothing real), and what the server answers, whole or
streamed, including each documented odd answer, must parse with their own response types
and stream readers. Then bodies the real APIs refuse are refused with the APIs' reasons.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from pydantic import TypeAdapter

from tests.support.model_contract import check
from tests.support.model_replies import (
    Reply,
    anthropic_body,
    anthropic_events,
    openai_body,
    openai_events,
)
from tests.support.model_server import ScriptedModelServer, error, text, tool_call

TOOL = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as s:
        yield s


def oai(server: ScriptedModelServer, max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=max_retries)


def ant(server: ScriptedModelServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)


def test_what_the_openai_sdk_sends_is_accepted_and_its_answers_parse(
    server: ScriptedModelServer,
) -> None:
    server.push(tool_call("lookup", q="x"), text("done", input_tokens=11, output_tokens=4))
    client = oai(server)
    tools: Any = [
        {"type": "function", "function": {"name": "lookup", "description": "d", "parameters": TOOL}}
    ]
    first = client.chat.completions.create(
        model="o3-mini",
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
        max_completion_tokens=50,
        tools=tools,
    )
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert first.choices[0].finish_reason == "tool_calls"
    second = client.chat.completions.create(
        model="o3-mini",
        messages=[
            {"role": "user", "content": "hi"},
            first.choices[0].message.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": call.id, "content": "found"},
        ],
        max_completion_tokens=50,
    )
    assert second.choices[0].message.content == "done"
    assert second.usage is not None and second.usage.prompt_tokens == 11
    assert server.refused == []


def test_the_openai_sdk_reads_the_servers_stream(server: ScriptedModelServer) -> None:
    server.push(Reply(text="streamed answer", tool_calls=[("lookup", {"q": "y"})], output_tokens=9))
    tools: Any = [
        {"type": "function", "function": {"name": "lookup", "description": "d", "parameters": TOOL}}
    ]
    chunks = list(
        oai(server).chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=50,
            tools=tools,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    args = "".join(
        (t.function.arguments or "") if t.function else ""
        for c in chunks
        if c.choices
        for t in c.choices[0].delta.tool_calls or []
    )
    assert content == "streamed answer"
    assert args == '{"q": "y"}'
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 9
    assert server.refused == []


def test_what_the_anthropic_sdk_sends_is_accepted_and_its_stream_accumulates(
    server: ScriptedModelServer,
) -> None:
    server.push(
        Reply(text="thinking aloud", tool_calls=[("lookup", {"q": "z"})]),
        text("final", output_tokens=3, cache_read_tokens=5),
    )
    client = ant(server)
    tools: Any = [{"name": "lookup", "description": "d", "input_schema": TOOL}]
    with client.messages.stream(
        model="claude-sonnet-4-6",
        max_tokens=100,
        system="s",
        messages=[{"role": "user", "content": "hi"}],
        tools=tools,
    ) as stream:
        message = stream.get_final_message()
    assert [b.type for b in message.content] == ["text", "tool_use"]
    use = message.content[1]
    assert use.type == "tool_use" and use.input == {"q": "z"}
    assert message.stop_reason == "tool_use"
    final = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=100,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": message.content},  # type: ignore[typeddict-item]
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "ok"}],
            },
        ],
        tools=tools,
    )
    assert final.content[0].type == "text" and final.content[0].text == "final"
    assert final.usage.cache_read_input_tokens == 5
    assert server.refused == []


def test_every_odd_answer_matches_the_sdks_response_types() -> None:
    chat = TypeAdapter(openai.types.chat.ChatCompletion)
    chunk = TypeAdapter(openai.types.chat.ChatCompletionChunk)
    message = TypeAdapter(anthropic.types.Message)
    event = TypeAdapter(anthropic.types.RawMessageStreamEvent)
    odd = [
        Reply(text="cut", truncate=True),
        Reply(refusal="I can't help with that."),
        Reply(content_filter=True),
        Reply(empty_choices=True),
        Reply(text="a", tool_calls=[("t", {"a": 1})]),
    ]
    calls = [("t", {"a": 1})]
    for reply in odd:
        chat.validate_python(openai_body(1, "m", reply, calls))
        for _, data in openai_events(1, "m", reply, calls, usage=True):
            if data != "[DONE]":
                chunk.validate_python(data)
        if not reply.empty_choices and not reply.content_filter:
            message.validate_python(anthropic_body(1, "m", reply, calls))
            for name, data in anthropic_events(1, "m", reply, calls):
                if name != "ping":  # a keep-alive the SDK skips, not a message event
                    event.validate_python(data)
    stops = {
        anthropic_body(1, "m", r, [])["stop_reason"] for r in (odd[0], odd[1], Reply(text="x"))
    }
    assert stops == {"max_tokens", "refusal", "end_turn"}


def test_the_sdks_raise_on_the_documented_error_answers(server: ScriptedModelServer) -> None:
    server.push(Reply(text="partial", stream_error={"type": "overloaded_error", "message": "busy"}))
    with (
        pytest.raises(anthropic.APIStatusError, match="busy"),
        ant(server).messages.stream(
            model="c", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        ) as stream,
    ):
        stream.get_final_message()
    server.push(Reply(text="partial", stream_error={"message": "upstream failed", "code": 502}))
    with pytest.raises(openai.APIError, match="upstream failed"):
        list(
            oai(server).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5, stream=True
            )
        )


def test_the_sdk_waits_retry_after_ms_and_obeys_x_should_retry(
    server: ScriptedModelServer,
) -> None:
    server.push(Reply(status=429, retry_after=30, retry_after_ms=300), text("ok"))
    client = oai(server, max_retries=1)
    start = time.monotonic()
    answer = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5
    )
    assert answer.choices[0].message.content == "ok"
    # retry-after-ms (0.3 s) wins over retry-after (30 s), as the SDK reads them
    assert 0.3 <= time.monotonic() - start < 5
    server.push(Reply(status=503, should_retry="false"), text("never asked"))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5
        )
    assert server.pending == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"model": "o3-mini", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5},
            "Use 'max_completion_tokens' instead",
        ),
        (
            {"model": "gpt-5", "messages": [{"role": "user", "content": "x"}], "temperature": 0.2},
            "Only the default (1) value is supported",
        ),
        (
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}], "temperature": 2.5},
            "is not in [0, 2]",
        ),
        (
            {
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "content": None},
                ],
            },
            "expected a string, got null",
        ),
        (
            {
                "model": "gpt-4o",
                "messages": [{"role": "tool", "tool_call_id": "a", "content": "x"}],
            },
            "must be a response to a preceeding message with 'tool_calls'",
        ),
        (
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}], "top_x": 1},
            "body.top_x: unknown field",
        ),
        (
            {
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "x"}],
                "stream_options": {},
            },
            "only allowed when 'stream' is true",
        ),
    ],
)
def test_openai_bodies_the_real_api_refuses(body: dict[str, Any], reason: str) -> None:
    assert any(reason in p for p in check("openai", body)), check("openai", body)


def _ant(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": list(messages), **extra}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            _ant({"role": "user", "content": "x"}, temperature=0.5),
            "body.temperature: unknown field",
        ),
        (
            {"model": "c", "messages": [{"role": "user", "content": "x"}]},
            "body.max_tokens: field required",
        ),
        (
            _ant(
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": [{"type": "text", "text": " \n"}]},
                {"role": "user", "content": "y"},
            ),
            "text content blocks must contain non-whitespace text",
        ),
        (
            _ant({"role": "user", "content": "x"}, {"role": "assistant", "content": "So: "}),
            "final assistant content cannot end with trailing whitespace",
        ),
        (
            _ant(
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": []},
                {"role": "user", "content": "y"},
            ),
            "all messages must have non-empty content",
        ),
        (
            _ant({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}),
            "must have a corresponding `tool_use` block",
        ),
        (
            _ant({"role": "user", "content": [{"type": "text", "text": "x", "bold": True}]}),
            "content[0].bold: unknown field (not in TextBlockParam)",
        ),
    ],
)
def test_anthropic_bodies_the_real_api_refuses(body: dict[str, Any], reason: str) -> None:
    assert any(reason in p for p in check("anthropic", body)), check("anthropic", body)


def test_a_refused_body_gets_the_apis_400_and_is_listed(server: ScriptedModelServer) -> None:
    with pytest.raises(openai.BadRequestError, match="max_completion_tokens"):
        oai(server).chat.completions.create(
            model="o1", messages=[{"role": "user", "content": "x"}], max_tokens=5
        )
    assert [r.body["model"] for r in server.refused] == ["o1"]
    server.push(error(429))  # never used: the refused request consumed no scripted reply
    assert server.pending == 1
