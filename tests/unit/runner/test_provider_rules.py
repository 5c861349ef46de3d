"""The runner's model providers obey the real APIs' rules (issue 32), against the scripted
model server, which refuses (400) every body the real API would refuse
(:mod:`tests.support.model_contract`): each test that succeeds also proves its requests
passed the official SDKs' request types."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.workspace import ModelProvider
from swarmkit_runner.providers import ModelRequest, UserMessage, make_provider_for
from swarmkit_runner.secrets import SecretStore
from tests.support.bundles import (
    agent,
    anthropic_provider,
    bundle,
    openai_provider,
    skill,
    write_bundle,
)
from tests.support.model_server import Reply, ScriptedModelServer, error, text, tool_call
from tests.support.runner import RunOutput, run_in_process

WIRES = ["anthropic", "openai"]


def provider(wire: str, server: ScriptedModelServer, **kw: Any) -> ModelProvider:
    if wire == "anthropic":
        return anthropic_provider("m", server.anthropic_base_url, **kw)
    return openai_provider("m", server.openai_base_url, **kw)


def tuned(a: BundleAgent, **model: Any) -> BundleAgent:
    """``a`` with its model selection changed (temperature, max_continuations, ...)."""
    assert a.spec.model is not None
    spec = a.spec.model_copy(update={"model": a.spec.model.model_copy(update=model)})
    return a.model_copy(update={"spec": spec})


async def run(tmp_path: Path, prov: ModelProvider, *agents: BundleAgent, **kw: Any) -> RunOutput:
    b = bundle(agents=list(agents) or [agent("solo", provider="m")], providers=[prov], **kw)
    return await run_in_process(b, write_bundle(b, tmp_path))


# -- 1. the token limit's parameter name per model family -------------------------------------
@pytest.mark.parametrize(
    ("model", "setting", "field"),
    [
        ("o3-mini", "auto", "max_completion_tokens"),
        ("gpt-5", "auto", "max_completion_tokens"),
        ("llama3", "auto", "max_tokens"),  # a local OpenAI-compatible server
        ("my-o1-deployment", "max_completion_tokens", "max_completion_tokens"),  # Azure-style
    ],
)
async def test_the_token_limit_goes_where_the_model_takes_it(
    model: str, setting: str, field: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    prov = openai_provider("m", model_server.openai_base_url, max_tokens_parameter=setting)
    out = await run(tmp_path, prov, agent("solo", provider="m", model=model, max_tokens=321))
    assert out.outcome == "Succeeded", out.result["message"]
    (request,) = model_server.requests
    other = {"max_tokens", "max_completion_tokens"} - {field}
    assert request.body[field] == 321 and not other & set(request.body)


# -- 2. failures a 200 answer reports ----------------------------------------------------------
async def test_an_error_body_with_200_fails_the_run_with_its_message(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(Reply(error_in_200={"message": "No endpoints found", "code": 404}))
    out = await run(tmp_path, provider("openai", model_server))
    assert out.outcome == "Failed"
    assert out.result["message"] == (
        "model provider m: error in the answer: 404: No endpoints found"
    )
    assert out.result["output"] == ""


@pytest.mark.parametrize("wire", WIRES)
async def test_transient_failures_in_a_200_answer_are_retried(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    overloaded = {"type": "overloaded_error", "message": "Overloaded"}
    first = Reply(error_in_200=overloaded) if wire == "anthropic" else Reply(empty_choices=True)
    model_server.push(first, text("recovered"))
    out = await run(tmp_path, provider(wire, model_server, max_retries=2))
    assert out.outcome == "Succeeded" and out.result["output"] == "recovered"
    reason = out.events("model.retry")[0]["reason"]
    expected = (
        "error in the answer: overloaded_error: Overloaded"
        if wire == "anthropic"
        else "the answer has no choices"
    )
    assert reason == expected


# -- 3. / 4. messages the APIs refuse are never sent --------------------------------------------
async def test_anthropic_whitespace_only_text_is_not_sent_back(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        Reply(text=" \n", tool_calls=[("read_flow_data", {"path": "n.txt"})]), text("done")
    )
    out = await run(
        tmp_path,
        provider("anthropic", model_server),
        agent("solo", provider="m", flow_data_access=["n.txt"]),
        workspace={"flowData": [{"path": "n.txt", "content": "hi"}]},
    )
    assert out.outcome == "Succeeded", out.result["message"]
    assert model_server.refused == []
    sent = model_server.requests[1].messages[1]["content"]
    assert [b["type"] for b in sent] == ["tool_use"]


@pytest.mark.parametrize("wire", WIRES)
async def test_an_empty_answer_is_re_asked_with_a_body_the_api_accepts(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text(""), text('{"x": 1}'))
    schema = {"type": "object", "required": ["x"]}
    out = await run(
        tmp_path, provider(wire, model_server), agent("judge", provider="m", outputSchema=schema)
    )
    assert out.outcome == "Succeeded", out.result["message"]
    assert model_server.refused == []
    assert [m["role"] for m in model_server.requests[1].messages if m["role"] != "system"] == [
        "user",
        "user",
    ]


# -- 5. temperature ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("wire", "model", "temperature", "expected"),
    [
        ("anthropic", "claude-sonnet-4-6", 0.5, "takes no sampling temperature"),
        ("openai", "o3-mini", 0.2, "takes only the default temperature"),
    ],
)
async def test_a_temperature_the_api_refuses_fails_before_any_request(
    wire: str,
    model: str,
    temperature: float,
    expected: str,
    tmp_path: Path,
    model_server: ScriptedModelServer,
) -> None:
    solo = tuned(agent("solo", provider="m", model=model), temperature=temperature)
    out = await run(tmp_path, provider(wire, model_server), solo)
    failed = "Truncated" if expected.startswith("Truncated:") else "Failed"
    assert out.outcome == failed and expected in out.result["message"]
    assert model_server.requests == []


async def test_openai_temperature_is_sent_for_chat_models(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    solo = tuned(agent("solo", provider="m", model="gpt-4o"), temperature=1.5)
    out = await run(tmp_path, provider("openai", model_server), solo)
    assert out.outcome == "Succeeded"
    assert model_server.requests[0].body["temperature"] == 1.5


# -- 6. streaming -----------------------------------------------------------------------------
@pytest.mark.parametrize("wire", WIRES)
async def test_a_streamed_turn_round_trips_tool_calls_and_reads_usage(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        Reply(
            text="Let me look.",
            tool_calls=[("read_flow_data", {"path": "n.txt"})],
            input_tokens=40,
            output_tokens=12,
        ),
        Reply(text="The note says hi, streamed.", input_tokens=60, output_tokens=7),
    )
    out = await run(
        tmp_path,
        provider(wire, model_server, streaming="always"),
        agent("solo", provider="m", flow_data_access=["n.txt"]),
        workspace={"flowData": [{"path": "n.txt", "content": "hi"}]},
    )
    assert out.outcome == "Succeeded", out.result["message"]
    assert out.result["output"] == "The note says hi, streamed."
    usage = out.result["usage"]
    assert {k: usage[k] for k in ("inputTokens", "outputTokens")} == {
        "inputTokens": 100,
        "outputTokens": 19,
    }
    assert usage["costUnknown"] is True  # the provider has no prices
    assert all(r.body["stream"] is True for r in model_server.requests)
    assert model_server.requests[1].tool_results() == [("hi", False)]
    calls = out.events("model.call")
    assert all(c["streamed"] and c["first_token_ms"] >= 0 for c in calls)


@pytest.mark.parametrize(("max_tokens", "streamed"), [(4096, False), (4267, True)])
async def test_auto_streams_a_turn_that_could_outlast_the_timeout(
    max_tokens: int, streamed: bool, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    # 128,000 tokens an hour: 4,267 tokens may take 120.009 s, past the 120 s timeout
    out = await run(
        tmp_path,
        provider("anthropic", model_server),
        agent("solo", provider="m", max_tokens=max_tokens),
    )
    assert out.outcome == "Succeeded"
    assert model_server.requests[0].body.get("stream", False) is streamed


@pytest.mark.parametrize("wire", WIRES)
async def test_a_slow_stream_is_not_a_timeout(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    # ~2.4 s in all, never more than 0.3 s of silence, with a 1 s timeout
    model_server.push(Reply(text="x" * 32, chunk_chars=4, chunk_delay=0.3))
    prov = provider(wire, model_server, streaming="always", timeout_seconds=1, max_retries=0)
    out = await run(tmp_path, prov)
    assert out.outcome == "Succeeded", out.result["message"]
    assert out.result["output"] == "x" * 32
    assert out.events("model.call")[0]["attempts"] == 1


@pytest.mark.parametrize("wire", WIRES)
async def test_cancelling_a_call_closes_its_stream(
    wire: str, model_server: ScriptedModelServer
) -> None:
    model_server.push(Reply(text="y" * 400, chunk_chars=4, chunk_delay=0.05))
    config = provider(wire, model_server, streaming="always")
    prov = make_provider_for(config, "test-model", (), SecretStore({}))
    request = ModelRequest("s", [UserMessage("hi")], [], max_tokens=100)
    task = asyncio.create_task(prov.complete(request))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await prov.aclose()
    deadline = time.monotonic() + 5
    while model_server.disconnects == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert model_server.disconnects == 1


@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_that_breaks_is_retried_and_its_tokens_are_counted(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        Reply(text="partial answer", stream_cut=True, input_tokens=30),
        text("whole", input_tokens=30),
    )
    out = await run(tmp_path, provider(wire, model_server, streaming="always", max_retries=1))
    assert out.outcome == "Succeeded" and out.result["output"] == "whole"
    call = out.events("model.call")[0]
    assert call["attempts"] == 2
    if wire == "anthropic":  # message_start told the input tokens before the cut
        assert call["retried_input_tokens"] == 30
        assert out.result["usage"]["inputTokens"] == 60
    assert out.events("model.retry")[0]["reason"].startswith(
        ("the stream ended", "connection error")
    )


@pytest.mark.parametrize("wire", WIRES)
async def test_an_error_event_mid_stream_is_retried(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        Reply(text="partial", stream_error={"type": "overloaded_error", "message": "busy"}),
        text("after"),
    )
    out = await run(tmp_path, provider(wire, model_server, streaming="always", max_retries=1))
    assert out.result["output"] == "after"
    assert out.events("model.retry")[0]["reason"] == ("error in the answer: overloaded_error: busy")


# -- 7. truncation and refusals -------------------------------------------------------------------
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("streaming", ["never", "always"])
async def test_a_truncated_answer_is_not_a_success(
    wire: str, streaming: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(Reply(text="The first half of", truncate=True))
    out = await run(tmp_path, provider(wire, model_server, streaming=streaming))
    assert out.outcome == "Truncated"  # Succeeded=False, reason Truncated on the Run
    assert out.result["message"].startswith(
        "Truncated: agent solo's answer was cut off at maxTokens=1024 in the final answer"
    )
    assert out.events("model.truncated")[0]["outcome"] == "Truncated"


@pytest.mark.parametrize("wire", WIRES)
async def test_a_truncated_answer_is_continued_when_configured(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        Reply(text="The first half ", truncate=True, output_tokens=100), text("and the rest.")
    )
    solo = tuned(agent("solo", provider="m"), max_continuations=1)
    out = await run(tmp_path, provider(wire, model_server), solo)
    assert out.outcome == "Succeeded", out.result["message"]
    assert out.result["output"] == "The first half and the rest."
    assert model_server.refused == []
    last = model_server.requests[1].messages[-1]
    assert last["role"] == "user" and "cut off" in str(last["content"])
    assert out.result["usage"]["outputTokens"] == 105


@pytest.mark.parametrize("wire", WIRES)
async def test_a_tool_call_cut_off_is_never_run(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(Reply(tool_calls=[("read_flow_data", {"path": "n.txt"})], truncate=True))
    solo = tuned(agent("solo", provider="m", flow_data_access=["n.txt"]), max_continuations=3)
    out = await run(
        tmp_path,
        provider(wire, model_server),
        solo,
        workspace={"flowData": [{"path": "n.txt", "content": "hi"}]},
    )
    assert out.outcome == "Truncated"
    assert "inside a tool call" in out.result["message"]
    assert out.events("tool.call") == []


@pytest.mark.parametrize(
    ("wire", "reply", "expected"),
    [
        ("openai", Reply(refusal="I can't help with that."), "refused: I can't help with that."),
        ("openai", Reply(text="", content_filter=True), "content filter stopped the answer"),
        ("anthropic", Reply(text="I won't do that.", refusal=""), "refused: I won't do that."),
    ],
)
async def test_a_refusal_fails_the_run_and_says_so(
    wire: str, reply: Reply, expected: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(reply)
    out = await run(tmp_path, provider(wire, model_server, max_retries=2))
    failed = "Truncated" if expected.startswith("Truncated:") else "Failed"
    assert out.outcome == failed and expected in out.result["message"]
    assert len(model_server.requests) == 1  # never retried


# -- 8. retry headers -------------------------------------------------------------------------
async def test_retry_after_ms_wins_over_retry_after(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(Reply(status=429, retry_after=30, retry_after_ms=250), text("ok"))
    start = time.monotonic()
    out = await run(tmp_path, provider("openai", model_server))
    assert out.result["output"] == "ok"
    assert out.events("model.retry")[0]["delay_s"] == 0.25
    assert time.monotonic() - start < 10


@pytest.mark.parametrize(
    ("reply", "requests", "outcome"),
    [
        (Reply(status=503, should_retry="false"), 1, "Failed"),
        (Reply(status=400, should_retry="true", retry_after=0), 2, "Succeeded"),
    ],
)
async def test_x_should_retry_decides_over_the_status(
    reply: Reply,
    requests: int,
    outcome: str,
    tmp_path: Path,
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(reply, text("ok"))
    out = await run(tmp_path, provider("anthropic", model_server, max_retries=3))
    assert out.outcome == outcome
    assert len(model_server.requests) == requests


async def test_a_retry_after_past_the_cap_fails_at_once(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(error(429, retry_after=3600))
    start = time.monotonic()
    out = await run(tmp_path, provider("openai", model_server, max_retries=3))
    assert out.outcome == "Failed"
    assert out.result["message"] == (
        "model provider m: HTTP 429; the server asks to retry after 3600 s, more than the "
        "60 s the runner waits"
    )
    assert time.monotonic() - start < 5


async def test_llm_prompt_retries_are_audited_too(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_call("summarize", input="a"), error(503, retry_after=0), text("s"))
    summarize = skill("summarize", implementation={"type": "llm_prompt", "prompt": "Summarize."})
    b = bundle(
        agents=[agent("solo", provider="m", skills=["summarize"])],
        skills=[summarize],
        providers=[provider("openai", model_server)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "Succeeded", out.result["message"]
    assert [r["reason"] for r in out.events("model.retry")] == ["HTTP 503"]
