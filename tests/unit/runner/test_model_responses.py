"""The scripted model server speaks the OpenAI Responses API as the real one does.

The official ``openai`` SDK is the client: what it sends to ``POST /v1/responses`` must be
accepted, and what the server answers, whole or streamed (``response.created`` …
``response.completed``), including each odd answer, must parse with the SDK's own
``Response`` and ``ResponseStreamEvent`` types and stream reader. Then bodies the real API
refuses are refused with its reasons, and the recorded request reads the same facts (tools,
instructions, messages, tool outputs) as for the other wire formats.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.support.model_contract import check
from tests.support.model_replies import Reply, responses_body, responses_events
from tests.support.model_server import ScriptedModelServer, text, tool_call

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
TOOLS: Any = [
    {
        "type": "function",
        "name": "lookup",
        "description": "d",
        "parameters": SCHEMA,
        "strict": False,
    }
]


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as s:
        yield s


def client(server: ScriptedModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0)


def test_what_the_sdk_sends_is_accepted_and_a_tool_round_trip_parses(
    server: ScriptedModelServer,
) -> None:
    server.push(tool_call("lookup", q="x"), text("done", input_tokens=11, output_tokens=4))
    oai = client(server)
    first = oai.responses.create(
        model="gpt-5-codex",
        instructions="be brief",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        tools=TOOLS,
        store=False,
    )
    call = first.output[0]
    assert call.type == "function_call" and call.name == "lookup"
    assert call.arguments == '{"q": "x"}'
    second = oai.responses.create(
        model="gpt-5-codex",
        input=[
            {"role": "user", "content": "hi"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "found"},
        ],
        tools=TOOLS,
        store=False,
    )
    assert second.output_text == "done"
    assert second.usage is not None and second.usage.input_tokens == 11
    assert server.refused == []
    recorded = server.requests[1]
    assert recorded.wire == "responses" and recorded.path == "/v1/responses"
    assert recorded.tool_names == ["lookup"] and recorded.tool_description("lookup") == "d"
    assert recorded.tool_results() == [("found", False)]
    assert server.requests[0].system == "be brief"
    assert server.requests[0].first_user_text == "hi"


def test_the_sdk_reads_the_servers_stream(server: ScriptedModelServer) -> None:
    server.push(Reply(text="streamed answer", tool_calls=[("lookup", {"q": "y"})], output_tokens=9))
    with client(server).responses.stream(
        model="gpt-4.1", input="hi", tools=TOOLS, max_output_tokens=64
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert "response.function_call_arguments.delta" in kinds
    assert final.output_text == "streamed answer"
    call = final.output[1]
    assert call.type == "function_call" and call.arguments == '{"q": "y"}'
    assert final.usage is not None and final.usage.output_tokens == 9
    assert server.refused == []


def test_every_odd_answer_matches_the_sdks_response_types() -> None:
    whole = TypeAdapter(Response)
    event = TypeAdapter(ResponseStreamEvent)
    calls = [("t", {"a": 1})]
    request = {"model": "m", "input": "hi", "tools": TOOLS}
    odd = [
        Reply(text="cut", truncate=True),
        Reply(refusal="I can't help with that."),
        Reply(content_filter=True),
        Reply(error_in_200={"code": "server_error", "message": "upstream failed"}),
        Reply(text="a", tool_calls=calls),
    ]
    statuses = []
    for reply in odd:
        statuses.append(whole.validate_python(responses_body(1, "m", reply, calls, request)).status)
        numbers = []
        for _, data in responses_events(1, "m", reply, calls, request):
            numbers.append(event.validate_python(data).sequence_number)
        assert numbers == list(range(len(numbers)))
    assert statuses == ["incomplete", "completed", "incomplete", "failed", "completed"]
    kinds = [data["type"] for _, data in responses_events(1, "m", odd[0], [], request)]
    assert kinds[-1] == "response.incomplete"
    kinds = [data["type"] for _, data in responses_events(1, "m", odd[1], [], request)]
    assert "response.refusal.delta" in kinds and "response.output_text.delta" not in kinds
    kinds = [data["type"] for _, data in responses_events(1, "m", odd[3], [], request)]
    assert kinds == ["response.created", "response.in_progress", "response.failed"]


def test_a_stream_error_reaches_the_sdk_as_an_error_event(server: ScriptedModelServer) -> None:
    server.push(Reply(text="partial", stream_error={"code": "server_error", "message": "busy"}))
    events = list(client(server).responses.create(model="gpt-4.1", input="hi", stream=True))
    assert events[-1].type == "error" and events[-1].message == "busy"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"input": "hi"}, "Missing required parameter: 'model'"),
        ({"model": "gpt-4.1", "input": "hi", "messages": []}, "body.messages: unknown field"),
        ({"model": "o3", "input": "hi", "temperature": 0.2}, "'temperature' is not supported"),
        ({"model": "gpt-4.1", "input": "hi", "max_output_tokens": 8}, "Expected a value >= 16"),
        ({"model": "gpt-4.1", "input": "hi", "stream_options": {}}, "only allowed when 'stream'"),
        (
            {"model": "gpt-4.1", "input": "hi", "previous_response_id": "resp_x"},
            "Previous response with id 'resp_x' not found",
        ),
        (
            {
                "model": "gpt-4.1",
                "input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}],
            },
            "No tool call found for function call output with call_id c1",
        ),
        (
            {
                "model": "gpt-4.1",
                "input": [
                    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
                ],
            },
            "No tool output found for function call c1",
        ),
        (
            {"model": "gpt-4.1", "input": "hi", "tools": [{"type": "function", "name": "a.b"}]},
            "Invalid 'tools[0].name'",
        ),
        (
            {"model": "gpt-4.1", "input": "hi", "tools": [{"name": "lookup", "parameters": {}}]},
            "body.tools[0]",
        ),
    ],
)
def test_bodies_the_real_api_refuses(body: dict[str, Any], reason: str) -> None:
    assert any(reason in problem for problem in check("responses", body)), check("responses", body)


def test_a_refused_body_gets_the_apis_400(server: ScriptedModelServer) -> None:
    with pytest.raises(openai.BadRequestError, match="Expected a value >= 16"):
        client(server).responses.create(model="gpt-4.1", input="hi", max_output_tokens=8)
    assert len(server.refused) == 1 and server.refused[0].wire == "responses"


def test_a_client_tool_search_and_a_namespaced_call(server: ScriptedModelServer) -> None:
    """What codex does to reach MCP tools: the model runs the client's ``tool_search``, the
    client answers with a namespace of tools, the model calls one by namespace and name."""
    search: Any = {
        "type": "tool_search",
        "execution": "client",
        "description": "find tools",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    }
    server.push(tool_call("tool_search", query="echo"), tool_call("mcp__t.echo", text="hi"))
    oai = client(server)
    first = oai.responses.create(model="gpt-5.5", input="hi", tools=[search], store=False)
    found = first.output[0]
    assert found.type == "tool_search_call" and found.arguments == {"query": "echo"}
    assert found.execution == "client" and found.call_id
    namespace = {
        "type": "namespace",
        "name": "mcp__t",
        "description": "the t server",
        "tools": [{"type": "function", "name": "echo", "description": "say", "parameters": SCHEMA}],
    }
    history: Any = [
        {"role": "user", "content": "hi"},
        {
            "type": "tool_search_call",
            "call_id": found.call_id,
            "arguments": found.arguments,
            "execution": "client",
            "status": "completed",
        },
        {
            "type": "tool_search_output",
            "call_id": found.call_id,
            "execution": "client",
            "status": "completed",
            "tools": [namespace],
        },
    ]
    second = oai.responses.create(model="gpt-5.5", input=history, tools=[search], store=False)
    call = second.output[0]
    assert call.type == "function_call" and (call.namespace, call.name) == ("mcp__t", "echo")
    assert server.requests[1].tool_names == ["tool_search", "mcp__t.echo"]
    assert server.requests[1].tool_description("mcp__t.echo") == "say"  # loaded by the search
    assert server.refused == []
    unanswered = [
        {"type": "tool_search_call", "call_id": "s1", "arguments": {}, "execution": "client"}
    ]
    assert "No tool output found for function call s1." in check(
        "responses", {"model": "gpt-5.5", "input": unanswered}
    )
