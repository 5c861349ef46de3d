"""A Codex harness node end to end in the runner: the real Codex CLI through the model proxy.

``python -m swarmkit_runner run`` (a real process, as in the Job) on a Topology whose root
node is ``harness: {kind: codex}`` and whose Agent's provider is of type ``openai``: the
runner's model proxy forwards the OpenAI Responses API (streamed; every body checked by the
scripted model server against the openai SDK's request types) with the provider key, meters
``response.completed``'s usage and checks the Run's limits before each call. Codex finds the
gateway's tool with its ``tool_search``, calls it, and answers with its result.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from swarmkit_api.bundle import BundleTopology, secret_env_name
from swarmkit_api.topology import TopologySpec
from swarmkit_devcluster.harness_clis import ensure_harness_clis
from tests.support.bundles import (
    agent,
    bundle,
    openai_provider,
    secret_ref,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_subprocess

PROVIDER_KEY = "sk-openai-provider-key-never-leaves-the-proxy-5d1e"
KEY_REF = secret_ref("openai", "apiKey")
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
        return tool_call(echo, text="codex-ping")
    if "tool_search" in request.tool_names:
        return tool_call("tool_search", query="echo text")
    return text("no tool found")


def codex_bundle(server: ScriptedModelServer, **governance: Any) -> Any:
    spec = TopologySpec.model_validate(
        {
            "workspaceRef": {"name": "default"},
            "agents": [
                {
                    "name": "coder",
                    "agentRef": {"name": "coder"},
                    "role": "root",
                    "harness": {"kind": "codex"},
                },
            ],
        }
    )
    b = bundle(
        agents=[agent("coder", provider="m", tools=["t.echo"], model="gpt-5.5")],
        providers=[openai_provider("m", server.openai_base_url, api_key=KEY_REF)],
        mcp_servers=[stdio_server("t", stdio_command("t"))],
        topology=BundleTopology(name="coding", version="v1", spec=spec),
        input="Call the echo tool with the text codex-ping and tell me what it said.",
        timeout_seconds=180,
    )
    if governance:
        b = b.model_copy(update={"governance": b.governance.model_copy(update=governance)})
    return b


def run(b: Any, tmp: Path) -> RunOutput:
    env = {secret_env_name(KEY_REF): PROVIDER_KEY, "SWARMKIT_HARNESS_DIR": str(harness_dir())}
    return run_subprocess(write_bundle(b, tmp), env=env, timeout=RUN_TIMEOUT)


def test_a_codex_node_calls_a_granted_tool_and_succeeds(tmp_path: Path) -> None:
    with ScriptedModelServer(default=search_call_then_finish, api_key=PROVIDER_KEY) as server:
        out = run(codex_bundle(server), tmp_path)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    # The answer the scripted model built from the tool result Codex handed back (Codex
    # prefixes an MCP result with its wall time).
    output = out.result["output"]
    assert output.startswith("The tool said: ") and output.endswith("codex-ping"), output
    [call] = out.tool_calls("t.echo")
    assert call["outcome"] == "ok"
    [start] = out.events("harness.start")
    assert start["harness"] == "codex" and start["version"] == "0.169.1"
    # Every call was a Responses API call the openai SDK's types accept, and usage is
    # counted once: exactly what the model server answered, read by the proxy.
    assert server.refused == [], [r.problems for r in server.refused]
    assert {r.path for r in server.requests} == {"/v1/responses"}
    usage = out.result["usage"]
    assert usage["outputTokens"] == 5 * len(server.requests)
    assert usage["inputTokens"] == 10 * len(server.requests)
    assert len(out.events("model.call")) == len(server.requests)
    # The credential reached the model server (from the proxy, as a Bearer) and nothing else.
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {PROVIDER_KEY}"}
    for where in (out.stdout, out.stderr, str(out.result)):
        assert PROVIDER_KEY not in where


def test_the_runs_limits_hold_before_each_codex_call(tmp_path: Path) -> None:
    with ScriptedModelServer(default=search_call_then_finish, api_key=PROVIDER_KEY) as server:
        out = run(codex_bundle(server, max_steps_per_run=1), tmp_path)
    assert out.outcome == "LimitExceeded", out.result
    assert "maxStepsPerRun" in out.result["message"]
    # The refused call never reached the model: one answered call, one charged step.
    assert len(server.requests) == 1
    assert out.result["steps"] == 1
