"""Gemini, native (``type: gemini``): the scripted model server speaks ``generateContent``,
checked both ways with the official ``google-genai`` SDK (its client is accepted and parses
every answer, streamed too), then the runner is held to the same contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import types as gtypes

from swarmkit_api.bundle import secret_env_name
from swarmkit_api.workspace import ModelProvider
from tests.support.bundles import agent, bundle, secret_ref, write_bundle
from tests.support.model_contract import check
from tests.support.model_replies import signature
from tests.support.model_server import Reply, ScriptedModelServer, error, text
from tests.support.runner import RunOutput, run_in_process

KEY = "AIza-test-7c2e"
TOOL = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(api_key=KEY) as s:
        yield s


def client(server: ScriptedModelServer) -> genai.Client:
    return genai.Client(
        api_key=KEY,
        http_options=gtypes.HttpOptions(base_url=server.url, api_version="v1beta"),
    )


def test_what_the_google_genai_sdk_sends_is_accepted_and_its_answers_parse(
    server: ScriptedModelServer,
) -> None:
    server.push(Reply(text="Looking.", tool_calls=[("lookup", {"q": "x"})]), text("found it"))
    tools = [
        gtypes.Tool(
            function_declarations=[
                gtypes.FunctionDeclaration(
                    name="lookup", description="d", parameters_json_schema=TOOL
                )
            ]
        )
    ]
    config = gtypes.GenerateContentConfig(
        system_instruction="Be brief.", tools=tools, max_output_tokens=100, temperature=0.4
    )
    sdk = client(server)  # kept: the client closes its connection pool when collected
    first = sdk.models.generate_content(model="gemini-2.5-flash", contents="hi", config=config)
    assert first.function_calls and first.function_calls[0].args == {"q": "x"}
    assert first.candidates and first.candidates[0].content
    history = [
        gtypes.Content(role="user", parts=[gtypes.Part(text="hi")]),
        first.candidates[0].content,
        gtypes.Content(
            role="user",
            parts=[gtypes.Part.from_function_response(name="lookup", response={"output": "ok"})],
        ),
    ]
    second = sdk.models.generate_content(model="gemini-2.5-flash", contents=history, config=config)
    assert second.text == "found it"
    assert server.refused == []
    # the signature the model gave its call went back with it
    assert server.requests[1].body["contents"][1]["parts"][1]["thoughtSignature"] == signature(1, 0)


def test_the_google_genai_sdk_reads_the_servers_stream(server: ScriptedModelServer) -> None:
    server.push(Reply(text="a streamed answer", output_tokens=6))
    sdk = client(server)
    chunks = list(sdk.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"))
    assert "".join(c.text or "" for c in chunks) == "a streamed answer"
    assert chunks[-1].usage_metadata and chunks[-1].usage_metadata.candidates_token_count == 6
    assert server.requests[0].path.endswith(":streamGenerateContent")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"contents": [{"role": "user", "parts": [{"text": "x"}]}], "n": 1},
            "body.n: unknown field",
        ),
        (
            {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]},
            "Please use a valid role",
        ),
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "x"}]},
                    {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}]},
                    {"role": "user", "parts": []},
                ]
            },
            "must not be empty",
        ),
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "x"}]},
                    {
                        "role": "model",
                        "parts": [
                            {"functionCall": {"name": "a", "args": {}}},
                            {"functionCall": {"name": "b", "args": {}}},
                        ],
                    },
                    {
                        "role": "user",
                        "parts": [{"functionResponse": {"name": "a", "response": {}}}],
                    },
                ]
            },
            "number of function response parts is equal",
        ),
        (
            {
                "contents": [{"role": "user", "parts": [{"text": "x"}]}],
                "generationConfig": {"maxOutputTokens": 5, "max_tokens": 5},
            },
            "generationConfig.max_tokens",
        ),
    ],
)
def test_gemini_bodies_the_real_api_refuses(body: dict[str, Any], reason: str) -> None:
    assert any(reason in p for p in check("gemini", body)), check("gemini", body)


def gemini(server: ScriptedModelServer, **kw: Any) -> ModelProvider:
    return ModelProvider.model_validate(
        {
            "name": "g",
            "type": "gemini",
            "baseUrl": server.url,
            "apiKey": {"name": "gemini", "key": "key"},
            **kw,
        }
    )


async def run(tmp_path: Path, prov: ModelProvider, **kw: Any) -> RunOutput:
    b = bundle(
        agents=[agent("solo", provider="g", model="gemini-2.5-flash", flow_data_access=["n.txt"])],
        providers=[prov],
        workspace={"flowData": [{"path": "n.txt", "content": "hi"}]},
        **kw,
    )
    env = {secret_env_name(secret_ref("gemini", "key")): KEY}
    return await run_in_process(b, write_bundle(b, tmp_path), env)


@pytest.mark.parametrize("streaming", ["never", "always"])
async def test_a_tool_call_round_trips_with_its_signature(
    streaming: str, tmp_path: Path, server: ScriptedModelServer
) -> None:
    server.push(
        Reply(text="Reading.", tool_calls=[("read_flow_data", {"path": "n.txt"})], input_tokens=9),
        text("The note says hi.", input_tokens=20, output_tokens=4),
    )
    out = await run(tmp_path, gemini(server, streaming=streaming))
    assert out.outcome == "Succeeded", out.result["message"]
    assert out.result["output"] == "The note says hi."
    usage = out.result["usage"]
    assert {k: usage[k] for k in ("inputTokens", "outputTokens")} == {
        "inputTokens": 29,
        "outputTokens": 9,
    }
    assert usage["costUnknown"] is True  # the provider has no prices
    first, second = server.requests
    assert first.headers["x-goog-api-key"] == KEY
    assert first.path == "/v1beta/models/gemini-2.5-flash:" + (
        "streamGenerateContent" if streaming == "always" else "generateContent"
    )
    assert first.body["generationConfig"] == {"maxOutputTokens": 1024}
    assert "read_flow_data" in first.tools
    call_turn = second.body["contents"][1]
    assert call_turn["role"] == "model"
    assert call_turn["parts"][1]["thoughtSignature"] == signature(1, 0)
    assert second.tool_results() == [("hi", False)]
    assert server.refused == []
    assert KEY not in out.stdout


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(text="half", truncate=True), "Truncated: agent solo's answer was cut off"),
        (Reply(refusal=""), "the model refused (finishReason SAFETY)"),
        (Reply(empty_choices=True), "the prompt was blocked (SAFETY)"),
    ],
)
async def test_truncation_and_refusals_are_failures(
    reply: Reply, expected: str, tmp_path: Path, server: ScriptedModelServer
) -> None:
    server.push(reply)
    out = await run(tmp_path, gemini(server))
    failed = "Truncated" if expected.startswith("Truncated:") else "Failed"
    assert out.outcome == failed and expected in out.result["message"]
    assert len(server.requests) == 1


async def test_a_rate_limit_is_retried(tmp_path: Path, server: ScriptedModelServer) -> None:
    body = '{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}'
    server.push(error(429, retry_after=0, body=body), text("ok"))
    out = await run(tmp_path, gemini(server))
    assert out.result["output"] == "ok"
    assert [r["reason"] for r in out.events("model.retry")] == ["HTTP 429"]
