"""A harness node's child Runs and its Funnel, with the real Claude Code CLI in the runner.

As :mod:`.test_claude_code_node`: ``python -m swarmkit_runner run`` on a Topology whose root
node is ``harness: {kind: claude-code}``, the pinned CLI against the scripted model server.
Here the two claims of issue 40 item 3 that the node tests leave out: an agent skill the
harness calls as ``agent__<skill>`` starts a child Run attributed to the harness node's
Run (as from a model node, :mod:`tests.unit.runner.test_agent_skills`), and a funnel on
the harness node gates its final answer (as on a model node, :mod:`tests.unit.runner.test_funnel`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swarmkit_api.bundle import BundleTopology
from swarmkit_api.funnel import FunnelSpec
from swarmkit_api.topology import TopologySpec
from tests.support.bundles import agent, anthropic_provider, bundle, skill, topology_of
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text
from tests.unit.runner.test_funnel import APPROVE, SCHEMA

from .resume import resume_args
from .test_claude_code_node import KEY_REF, PROVIDER_KEY, calls, harness_topology, run

UID = "00000000-0000-4000-8000-000000000001"
CHILD_PROMPT = "You research."
FINDINGS = "findings: X is 42"


def child_bundle(server: ScriptedModelServer) -> Any:
    """The harness's Agent is granted ``deep-research``, an agent skill running the
    ``research`` topology (one model node)."""
    return bundle(
        agents=[
            agent("coder", provider="m", skills=["deep-research"], model="claude-sonnet-4-5"),
            agent("researcher", provider="m", system_prompt=CHILD_PROMPT),
        ],
        skills=[
            skill(
                "deep-research",
                implementation={"type": "agent", "topology": "research"},
                category="coordination",
            )
        ],
        topologies=[topology_of("research", "researcher")],
        providers=[anthropic_provider("m", server.url, api_key=KEY_REF)],
        topology=harness_topology(),
        input="Ask the deep-research agent to find X and tell me what it found.",
        timeout_seconds=180,
        correlation_id="corr-h",
    )


def test_an_agent_skill_called_by_the_harness_is_a_child_of_its_run(tmp_path: Path) -> None:
    harness = calls("deep-research", input="find X")

    def script(request: RecordedRequest) -> Reply:
        return text(FINDINGS) if request.system.startswith(CHILD_PROMPT) else harness(request)

    with ScriptedModelServer(default=script, api_key=PROVIDER_KEY) as server:
        out = run(child_bundle(server), tmp_path)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    # The CLI saw the skill as a flat gateway tool and got the child's answer back.
    [start] = out.events("harness.start")
    assert "agent__deep-research" in start["tools"]
    # audited under the skill's name, as from a model node
    [call] = out.tool_calls("deep-research")
    assert call["outcome"] == "ok"
    assert f"The tool said: {FINDINGS}" in out.result["output"]
    child_requests = [r for r in server.requests if r.system.startswith(CHILD_PROMPT)]
    assert [r.first_user_text for r in child_requests] == ["find X"]
    # Attributed as from a model node: a child_run link on the harness node's Run, every
    # line of the child carrying it as parent_run_id, one correlation id.
    [link] = out.events("child_run")
    child_id = link["child_run_id"]
    assert child_id != UID and link["run_id"] == UID
    assert (link["topology"], link["outcome"]) == ("research", "Succeeded")
    child_lines = [e for e in out.audit if e["run_id"] == child_id]
    assert [e["event"] for e in child_lines] == [
        "run.start",
        "agent.start",
        "model.call",
        "agent.end",
        "run.end",
    ]
    assert all(e["parent_run_id"] == UID for e in child_lines)
    assert child_lines[0]["kind"] == "child" and child_lines[1]["agent"] == "researcher"
    assert all(e["correlation_id"] == "corr-h" for e in out.audit)
    assert all("parent_run_id" not in e for e in out.audit if e["run_id"] == UID)
    # Usage counted once: the harness's calls (through the proxy) and the child's, each
    # answered call once on the Run's meter.
    answered = [r for r in server.requests if not r.problems]
    assert server.refused == []
    assert len(out.events("model.call")) == len(answered)
    assert out.result["usage"]["outputTokens"] == 5 * len(answered)
    assert out.result["usage"]["inputTokens"] == 10 * len(answered)


def funnel_bundle(server: ScriptedModelServer, funnel: dict[str, Any]) -> Any:
    spec = TopologySpec.model_validate(
        {
            "workspaceRef": {"name": "default"},
            "agents": [
                {
                    "name": "coder",
                    "agentRef": {"name": "coder"},
                    "role": "root",
                    "harness": {"kind": "claude-code"},
                    "funnel": {"name": "release-notes"},
                }
            ],
        }
    )
    topo = BundleTopology(
        name="coding",
        version="v1",
        spec=spec,
        funnels={"release-notes": FunnelSpec.model_validate(funnel)},
    )
    return bundle(
        agents=[agent("coder", provider="m", model="claude-sonnet-4-5")],
        providers=[anthropic_provider("m", server.url, api_key=KEY_REF)],
        topology=topo,
        input="Write the release notes as JSON with a title and a body.",
        timeout_seconds=180,
    )


FIRST = json.dumps({"title": "v2"})  # body missing: fails the schema
PASSING = json.dumps({"title": "v2", "body": "Runs start 3x faster."})
CRITIQUE = "'body' is a required property"


def test_a_funnel_redrafts_the_harness_answer_then_parks_it_for_approval(
    tmp_path: Path,
) -> None:
    def script(request: RecordedRequest) -> Reply:
        return text(PASSING if CRITIQUE in json.dumps(request.messages) else FIRST)

    funnel = {"validate": {"schema": SCHEMA}, "approve": APPROVE}
    with ScriptedModelServer(default=script, api_key=PROVIDER_KEY) as server:
        b = funnel_bundle(server, funnel)
        parked = run(b, tmp_path / "run")
        assert parked.outcome == "AwaitingReview", (parked.result, parked.stderr[-3000:])
        # The harness ran twice; the redraft's task carried the task and the critique.
        assert len(parked.events("harness.start")) == 2
        redrafts = [r for r in server.requests if CRITIQUE in json.dumps(r.messages)]
        assert redrafts, "the redraft never reached the model"
        assert "Write the release notes" in json.dumps(redrafts[0].messages)
        layers = [
            (e["event"], e["outcome"]) for e in parked.audit if e["event"].startswith("funnel.")
        ]
        assert layers == [
            ("funnel.validate", "autocorrect"),
            ("funnel.validate", "ok"),
            ("funnel.approval", "AwaitingReview"),
        ]
        [item] = parked.result["reviewItems"]
        assert item["kind"] == "funnel_approval"
        gate = item["gate"]
        assert (gate["funnel"], gate["node"]) == ("release-notes", "coder")
        assert json.loads(gate["artifact"]) == json.loads(PASSING)
        asked = len(server.requests)
        # Were the harness run again on resume, the model would now draft something else:
        # the approved artifact must be the one the node outputs, not a new draft.
        server.default = text(json.dumps({"title": "v3", "body": "Never approved."}))
        decision = {"verdict": "approve", "decidedBy": "alice"}
        approved = run(b, tmp_path / "run", resume_args(parked, tmp_path, decision))
    assert approved.outcome == "Succeeded", (approved.result, approved.stderr[-3000:])
    assert json.loads(approved.result["output"]) == json.loads(PASSING)
    assert len(server.requests) == asked, "a resumed run replays; it asks the model nothing"
    assert approved.events("harness.start") == []
