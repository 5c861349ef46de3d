"""Codex and Gemini CLI harness nodes end to end in the runner, through the model proxy.

``python -m swarmkit_runner run`` (a real process, as in the Job) on a Topology whose root
node is ``harness: {kind: codex}`` (the Agent's provider of type ``openai``) or
``harness: {kind: gemini-cli}`` (type ``gemini``): the runner's model proxy forwards the
OpenAI Responses API or the Gemini API (streamed; the scripted model server checks every
body against the openai or google-genai SDK's request types) with the provider key, meters
each answer's usage and checks the Run's limits before each call. Codex finds the gateway's
tool with its ``tool_search``; both call it and answer with its result.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.bundle import secret_env_name
from swarmkit_api.harness import HARNESSES
from swarmkit_api.model_provider import ModelProvider
from swarmkit_devcluster.harness_clis import ensure_harness_clis
from tests.support.bundles import (
    agent,
    bundle,
    secret_ref,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_subprocess

from .test_claude_code_node import harness_topology

PROVIDER_KEY = "sk-provider-key-never-leaves-the-proxy-5d1e"
KEY_REF = secret_ref("provider", "apiKey")
#: Per harness: the provider type, its base URL on the scripted server, the Agent's model,
#: the path every model call takes and the header the provider key travels in.
KINDS: dict[str, tuple[str, str, str, str, str]] = {
    "codex": ("openai", "openai_base_url", "gpt-5.5", "/v1/responses", "authorization"),
    "gemini-cli": (
        "gemini",
        "url",
        "gemini-2.5-flash",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        "x-goog-api-key",
    ),
}
#: Seconds one runner process may take (the machine is shared).
RUN_TIMEOUT = 240.0


@functools.cache
def harness_dir() -> Path:
    return ensure_harness_clis()


def search_call_then_finish(request: RecordedRequest) -> Reply:
    """Find the echo tool with Codex's tool_search, call it, answer with its result."""
    results = request.tool_results()
    if results:
        return text(f"The tool said: {results[0][0]}")
    echo = next((n for n in request.tool_names if n.endswith("echo")), None)
    if echo:
        return tool_call(echo, text="harness-ping")
    if "tool_search" in request.tool_names:
        return tool_call("tool_search", query="echo text")
    return text("no tool found")


def harness_bundle(kind: str, server: ScriptedModelServer, **governance: Any) -> Any:
    provider_type, base, model, _path, _header = KINDS[kind]
    b = bundle(
        agents=[agent("coder", provider="m", tools=["t.echo"], model=model)],
        providers=[
            ModelProvider(
                name="m", type=provider_type, base_url=getattr(server, base), api_key=KEY_REF
            )
        ],
        mcp_servers=[stdio_server("t", stdio_command("t"))],
        topology=harness_topology(kind=kind),
        input="Call the echo tool with the text harness-ping and tell me what it said.",
        timeout_seconds=180,
    )
    if governance:
        b = b.model_copy(update={"governance": b.governance.model_copy(update=governance)})
    return b


def run(b: Any, tmp: Path) -> RunOutput:
    env = {secret_env_name(KEY_REF): PROVIDER_KEY, "SWARMKIT_HARNESS_DIR": str(harness_dir())}
    return run_subprocess(write_bundle(b, tmp), env=env, timeout=RUN_TIMEOUT)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_harness_node_calls_a_granted_tool_and_succeeds(tmp_path: Path, kind: str) -> None:
    _type, _base, _model, path, header = KINDS[kind]
    with ScriptedModelServer(default=search_call_then_finish, api_key=PROVIDER_KEY) as server:
        out = run(harness_bundle(kind, server), tmp_path)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    # The answer the scripted model built from the tool result the harness handed back
    # (Codex prefixes it with its wall time, Gemini CLI wraps it as untrusted context).
    output = out.result["output"]
    assert output.startswith("The tool said: ") and "harness-ping" in output, output
    [call] = out.tool_calls("t.echo")
    assert call["outcome"] == "ok"
    [start] = out.events("harness.start")
    assert start["harness"] == kind and start["version"] == HARNESSES[kind].version
    # Every call was one the SDK's types accept, for the Agent's model, and usage is
    # counted once: exactly what the model server answered, read by the proxy.
    assert server.refused == [], [r.problems for r in server.refused]
    assert {r.path for r in server.requests} == {path}
    usage = out.result["usage"]
    assert usage["outputTokens"] == 5 * len(server.requests)
    assert usage["inputTokens"] == 10 * len(server.requests)
    assert len(out.events("model.call")) == len(server.requests)
    # The credential reached the model server (from the proxy) and nothing else.
    expected = f"Bearer {PROVIDER_KEY}" if header == "authorization" else PROVIDER_KEY
    assert {r.headers.get(header) for r in server.requests} == {expected}
    for where in (out.stdout, out.stderr, str(out.result)):
        assert PROVIDER_KEY not in where


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_runs_limits_hold_before_each_model_call(tmp_path: Path, kind: str) -> None:
    with ScriptedModelServer(default=search_call_then_finish, api_key=PROVIDER_KEY) as server:
        out = run(harness_bundle(kind, server, max_steps_per_run=1), tmp_path)
    assert out.outcome == "LimitExceeded", out.result
    assert "maxStepsPerRun" in out.result["message"]
    # The refused call never reached the model: one answered call, one charged step.
    assert len(server.requests) == 1
    assert out.result["steps"] == 1
