"""approve_spend in a real runner process: it approves only the Runs this run started.

The runner never talks to the API: an approval is an effect (kind ``approve_spend``) the
operator checks again and acts on. Here: what the agent may name, what it is told, what the
audit says, and that an agent without the permission is not offered the tool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarmkit_api.effects import Effect, outbox_from_log
from tests.support.bundles import agent, bundle, openai_provider, topology, write_bundle
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_subprocess

CHILD0 = "test-run-00000000-fx0"
CHILD1 = "test-run-00000000-fx1"


def _bundle(server: ScriptedModelServer, permissions: list[str]) -> Any:
    return bundle(
        agents=[
            agent(
                "lead",
                provider="m",
                tools=["schedule", "agent_message", "approve_spend"],
                permissions=permissions,
            ),
            agent("worker", provider="m"),
        ],
        topology=topology("triage", "lead", {"w": ("worker", "lead")}),
        providers=[openai_provider("m", server.openai_base_url)],
    )


def _outbox(out: RunOutput) -> list[Effect]:
    sha = out.result.get("outboxSha256")
    assert sha, f"no outbox in the result: {out.result}"
    effects = outbox_from_log(out.stdout, sha)
    assert effects is not None
    return effects


def _results(server: ScriptedModelServer) -> list[tuple[str, bool]]:
    return [c for r in server.requests[1:] for c in r.tool_results()]


def test_an_agent_approves_the_runs_it_started_and_only_those(tmp_path: Path) -> None:
    with ScriptedModelServer(
        [
            tool_call("approve_spend"),  # nothing started yet
            tool_call("schedule", input="later", **{"in": "2m"}),
            tool_call("agent_message", to="worker", message="go"),
            tool_call("approve_spend", run="someone-elses-run"),
            tool_call("approve_spend", run=CHILD1),
            tool_call("approve_spend"),  # every Run it started
            text("done"),
        ]
    ) as server:
        out = run_subprocess(write_bundle(_bundle(server, ["schedule", "approve_spend"]), tmp_path))
    assert out.outcome == "Succeeded", out.stderr
    results = _results(server)
    assert [err for _, err in results] == [True, False, False, True, False, False]
    assert "NotAStartedRun" in results[0][0] and "started no Run" in results[0][0]
    assert "NotAStartedRun" in results[3][0]
    assert "'someone-elses-run' was not started by this run" in results[3][0]
    assert CHILD1 in results[4][0] and '"status": "recorded"' in results[4][0]
    assert CHILD0 in results[5][0] and CHILD1 in results[5][0]
    effects = _outbox(out)
    assert [(e.seq, e.kind, e.agent, e.to) for e in effects] == [
        (0, "schedule", "lead", "triage"),
        (1, "agent_message", "lead", "worker"),
        (2, "approve_spend", "lead", CHILD1),
        (3, "approve_spend", "lead", CHILD0),
        (4, "approve_spend", "lead", CHILD1),
    ]
    refused = out.events("spend.approve")
    assert [(e["run"], e["outcome"]) for e in refused] == [("someone-elses-run", "refused")]
    assert "was not started by this run" in refused[0]["reason"]


def test_without_the_permission_the_tool_is_not_offered(tmp_path: Path) -> None:
    with ScriptedModelServer(
        [
            tool_call("schedule", input="later", **{"in": "2m"}),
            tool_call("approve_spend"),
            text("done"),
        ]
    ) as server:
        out = run_subprocess(write_bundle(_bundle(server, ["schedule"]), tmp_path))
    assert out.outcome == "Succeeded", out.stderr
    offered = server.requests[0].tool_names
    assert "approve_spend" not in offered and "schedule" in offered
    results = _results(server)
    assert results[1][1] and "ToolNotGranted" in results[1][0]
    assert [e.kind for e in _outbox(out)] == ["schedule"]
    warned = [e["message"] for e in out.events("startup.warning")]
    assert any("lacks the 'approve_spend' permission" in m for m in warned), warned
