"""Agent skills, local: a topology as an in-process child run; pack:workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.bundles import (
    CODE_QUALITY_OUTPUTS,
    agent,
    bundle,
    openai_provider,
    skill,
    topology_of,
    write_bundle,
)
from tests.support.model_server import Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process

UID = "00000000-0000-4000-8000-000000000001"


def topology_skill(name: str, topology: str, **kw: Any) -> Any:
    impl = {"type": "agent", "topology": topology, **kw.pop("impl", {})}
    return skill(name, implementation=impl, category="coordination", **kw)


async def test_local_topology_runs_as_a_child_run_with_its_own_ids(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("deep-research", input="find X", context="for the Q3 report"),
        text("findings: X is 42"),
        text("The research says X is 42."),
    )
    b = bundle(
        agents=[
            agent("lead", provider="m", skills=["deep-research"]),
            agent("researcher", provider="m", system_prompt="You research."),
        ],
        skills=[topology_skill("deep-research", "research")],
        topologies=[topology_of("main", "lead"), topology_of("research", "researcher")],
        target="main",
        providers=[openai_provider("m", model_server.openai_base_url)],
        correlation_id="corr-7",
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    assert model_server.requests[0].tools["deep-research"]["required"] == ["input"]
    child_request = model_server.requests[1]
    assert child_request.system == "You research."
    assert child_request.first_user_text == "find X\n\nContext:\nfor the Q3 report"
    assert model_server.requests[2].tool_results() == [("findings: X is 42", False)]
    [link] = out.events("child_run")
    child_id = link["child_run_id"]
    assert child_id != UID and link["run_id"] == UID
    assert (link["topology"], link["depth"], link["outcome"]) == ("research", 2, "Succeeded")
    child_lines = [e for e in out.audit if e["run_id"] == child_id]
    assert [e["event"] for e in child_lines] == [
        "run.start",
        "agent.start",
        "model.call",
        "agent.end",
        "run.end",
    ]
    assert all(e["parent_run_id"] == UID for e in child_lines)
    assert all(e["correlation_id"] == "corr-7" for e in out.audit)
    assert child_lines[0]["kind"] == "child" and child_lines[0]["target"] == "research"
    assert child_lines[1]["agent"] == "researcher"
    parent_lines = [e for e in out.audit if e["run_id"] == UID]
    assert all("parent_run_id" not in e for e in parent_lines)
    assert out.result["steps"] == 3  # one budget for the run and its children


async def test_depth_is_capped_at_three_topologies(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("go-t2", input="a"),
        tool_call("go-t3", input="b"),
        tool_call("go-t4", input="c"),
        text("t3 done"),
        text("t2 done"),
        text("t1 done"),
    )
    b = bundle(
        agents=[
            agent("a1", provider="m", skills=["go-t2"]),
            agent("a2", provider="m", skills=["go-t3"]),
            agent("a3", provider="m", skills=["go-t4"]),
            agent("a4", provider="m"),
        ],
        skills=[topology_skill(f"go-t{n}", f"t{n}") for n in (2, 3, 4)],
        topologies=[topology_of(f"t{n}", f"a{n}") for n in (1, 2, 3, 4)],
        target="t1",
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    [(refused, is_error)] = model_server.requests[3].tool_results()
    assert (
        is_error
        and "DepthExceeded: running topology t4 would nest 4 topologies, over the limit of 3"
        in refused
    )
    assert [e["depth"] for e in out.events("child_run")] == [3, 2]
    [r] = out.events("tool.refused")
    assert (r["skill"], r["reason"]) == ("go-t4", "DepthExceeded")


async def test_pack_workspace_topology_skill_runs_a_child(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_call("topology-helpers", input="tidy up"), text("tidied"), text("ok"))
    synthesized = skill(
        "topology-helpers",
        "Run the helpers topology as a child run.",
        implementation={"type": "agent", "topology": "helpers"},
        category="coordination",
        reviewed=True,
        synthesized_topology="helpers",
    )
    b = bundle(
        agents=[
            agent(
                "boss",
                provider="m",
                skills=["pack:workspace"],
                resolved_skills=["topology-helpers"],
            ),
            agent("helper", provider="m"),
        ],
        skills=[synthesized],
        topologies=[topology_of("main", "boss"), topology_of("helpers", "helper")],
        target="main",
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    assert "topology-helpers" in model_server.requests[0].tool_names
    assert model_server.requests[2].tool_results() == [("tidied", False)]
    [call] = out.tool_calls("topology-helpers")
    assert (call["tier"], call["effects"], call["kind"]) == ("cautious", "unknown", "skill")
    [link] = out.events("child_run")
    assert link["topology"] == "helpers"


async def test_child_failures_timeouts_and_decision_answers(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    good = {"verdict": "pass", "confidence": 0.9, "reasoning": "fine"}
    model_server.push(
        tool_call("strict-child", input="x"),
        text("not json"),
        text("still not json"),
        text("nope"),  # the child's outputSchema fails after 2 re-asks: the child run failed
        tool_call("review-team", input="the diff"),
        text('{"verdict": "maybe"}'),
        text(json.dumps(good)),
        tool_call("slow-team", input="y"),
        Reply(text="too late", delay=2.0),
        text("done"),
    )
    b = bundle(
        agents=[
            agent("lead", provider="m", skills=["strict-child", "review-team", "slow-team"]),
            agent("strict", provider="m", output_schema={"type": "object"}),
            agent("reviewer", provider="m"),
            agent("sleeper", provider="m"),
        ],
        skills=[
            topology_skill("strict-child", "strict-t"),
            skill(
                "review-team",
                implementation={"type": "agent", "topology": "review-t"},
                category="decision",
                outputs=CODE_QUALITY_OUTPUTS,
            ),
            topology_skill("slow-team", "slow-t", impl={"timeoutS": 1}),
        ],
        topologies=[
            topology_of("main", "lead"),
            topology_of("strict-t", "strict"),
            topology_of("review-t", "reviewer"),
            topology_of("slow-t", "sleeper"),
        ],
        target="main",
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    [(failed, failed_error)] = model_server.requests[4].tool_results()
    assert (
        failed_error
        and "ChildRunFailed: child run of topology strict-t failed: agent "
        "strict: final answer does not match its outputSchema"
        in failed
    )
    reask = model_server.requests[6].messages[-1]["content"]
    assert "verdict: 'maybe' is not one of ['pass', 'fail', 'needs-changes']" in reask
    [(review, review_error)] = model_server.requests[7].tool_results()
    assert not review_error and json.loads(review) == good
    [(slow, slow_error)] = model_server.requests[9].tool_results()
    assert slow_error and "SkillTimedOut: no result within 1s" in slow
    outcomes = {e["topology"]: e["outcome"] for e in out.events("child_run")}
    assert outcomes == {"strict-t": "Failed", "review-t": "Succeeded", "slow-t": "Cancelled"}
    [valid] = [e for e in out.events("output.validated") if e.get("skill") == "review-team"]
    assert valid["verdict"] == "pass"
