"""Model providers against the scripted model server (both wire formats) and replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmkit_api.bundle import secret_env_name
from swarmkit_api.workspace import ModelProvider
from tests.support.bundles import (
    agent,
    anthropic_provider,
    bundle,
    openai_provider,
    replay_provider,
    secret_ref,
    write_bundle,
)
from tests.support.model_server import ScriptedModelServer, error, text, tool_call
from tests.support.runner import run_in_process, run_subprocess

WIRES = ["anthropic", "openai"]


def provider(wire: str, server: ScriptedModelServer, **kw: object) -> ModelProvider:
    if wire == "anthropic":
        return anthropic_provider("m", server.anthropic_base_url, **kw)  # type: ignore[arg-type]
    return openai_provider("m", server.openai_base_url, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("wire", WIRES)
async def test_tool_call_round_trip_and_usage(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("read_flow_data", path="notes.txt"),
        text("The notes say hello.", input_tokens=7, output_tokens=3),
    )
    b = bundle(
        agents=[
            agent("solo", provider="m", system_prompt="Be brief.", flow_data_access=["notes.txt"])
        ],
        providers=[provider(wire, model_server)],
        workspace={"flowData": [{"path": "notes.txt", "content": "hello"}]},
        input="What do the notes say?",
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded"
    assert out.result["output"] == "The notes say hello."
    usage = out.result["usage"]
    assert {k: usage[k] for k in ("inputTokens", "outputTokens")} == {
        "inputTokens": 17,
        "outputTokens": 8,
    }
    assert usage["costUnknown"] is True  # the provider has no prices
    assert out.result["toolCalls"] == 1
    first, second = model_server.requests
    assert {first.wire, second.wire} == {wire}
    assert first.system == "Be brief."
    assert first.first_user_text == "What do the notes say?"
    assert first.body["model"] == "test-model"
    assert second.tool_results() == [("hello", False)]


@pytest.mark.parametrize("wire", WIRES)
async def test_retries_on_429_then_succeeds(
    wire: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(error(429, retry_after=0), error(503, retry_after=0), text("finally"))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[provider(wire, model_server, max_retries=3)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded"
    assert out.result["output"] == "finally"
    assert len(model_server.requests) == 3
    retries = out.events("model.retry")
    assert [r["reason"] for r in retries] == ["HTTP 429", "HTTP 503"]
    assert out.events("model.call")[0]["attempts"] == 3


async def test_gives_up_after_max_retries(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(*[error(500, retry_after=0)] * 3)
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url, max_retries=2)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "Failed"
    assert out.result["message"] == "model provider m: HTTP 500 after 3 attempts"


async def test_model_timeout_is_retried(tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.push(text("slow", delay=1.5), text("fast"))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[
            openai_provider("m", model_server.openai_base_url, timeout_seconds=1, max_retries=1)
        ],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.result["output"] == "fast"
    assert out.events("model.retry")[0]["reason"] == "timeout"


@pytest.mark.parametrize("wire", WIRES)
def test_api_key_comes_from_the_job_env_and_is_never_printed(wire: str, tmp_path: Path) -> None:
    key = "sk-test-5d9a0c1e7f"
    ref = secret_ref("model-api", "key")
    with ScriptedModelServer([text(f"echoing {key} back")], api_key=key) as server:
        b = bundle(
            agents=[agent("solo", provider="m")],
            providers=[provider(wire, server, api_key=ref)],
        )
        out = run_subprocess(write_bundle(b, tmp_path), env={secret_env_name(ref): key})

    assert out.outcome == "Succeeded"
    header = server.requests[0].headers
    assert header.get("x-api-key") == key or header.get("authorization") == f"Bearer {key}"
    assert key not in out.stdout + out.stderr
    assert key not in out.layout.termination_log.read_text()  # type: ignore[union-attr]
    assert "[REDACTED]" in out.result["output"]


def test_missing_api_key_env_fails_with_a_clear_message(tmp_path: Path) -> None:
    ref = secret_ref("model-api", "key")
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", "http://127.0.0.1:9", api_key=ref)],
    )
    out = run_subprocess(write_bundle(b, tmp_path))
    assert out.exit_code == 1
    assert out.result["message"] == (
        f"secret model-api/key is not available (env {secret_env_name(ref)} unset)"
    )


async def test_replay_provider_plays_turns_without_http(tmp_path: Path) -> None:
    replay = [
        {
            "text": "Let me check.",
            "toolCalls": [{"name": "read_flow_data", "arguments": {"path": "a.txt"}}],
        },
        {"text": "The file says A."},
        {"toolCalls": [{"name": "read_flow_data", "arguments": {"path": "a.txt"}}]},
    ]
    b = bundle(
        agents=[agent("solo", provider="replay", replay=replay, flow_data_access=["a.txt"])],
        providers=[replay_provider()],
        workspace={"flowData": [{"path": "a.txt", "content": "A"}]},
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    # Turn 2 has no tool calls, so it is the final answer.
    assert out.outcome == "Succeeded"
    assert out.result["output"] == "The file says A."
    assert out.result["toolCalls"] == 1
    assert out.tool_calls("read_flow_data")[0]["output"] == "A"


async def test_replay_ends_with_the_last_text_when_turns_run_out(tmp_path: Path) -> None:
    replay = [
        {
            "text": "Reading.",
            "toolCalls": [{"name": "read_flow_data", "arguments": {"path": "a.txt"}}],
        },
    ]
    b = bundle(
        agents=[agent("solo", replay=replay, flow_data_access=["a.txt"])],
        workspace={"flowData": [{"path": "a.txt", "content": "A"}]},
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "Succeeded"
    assert out.result["output"] == "Reading."
    assert out.result["steps"] == 2
