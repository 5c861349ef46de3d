"""Constraints: timeoutSeconds, retry with backoff, maxLatencyMs, onFailure."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from swarmkit_api.bundle import RunBundle
from swarmkit_operator.builders.job import CONTAINER_NAME
from swarmkit_operator.builders.run_status import derive
from tests.support.bundles import (
    BundleSkill,
    agent,
    bundle,
    mcp_tool_skill,
    openai_provider,
    skill,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process, run_subprocess


def flaky(name: str, key: str, failures: int, **constraints: Any) -> BundleSkill:
    return mcp_tool_skill(
        name,
        "tools",
        "flaky",
        arguments={"key": key, "failures": failures},
        constraints=constraints,
    )


def run_bundle(url: str, *skills: BundleSkill) -> RunBundle:
    return bundle(
        agents=[agent("dev", provider="m", skills=[s.name for s in skills])],
        skills=list(skills),
        providers=[openai_provider("m", url)],
        mcp_servers=[stdio_server("tools", stdio_command("tools"))],
    )


async def test_retry_backoff_timeout_latency_and_fallback(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("linear"),
        tool_call("exhausted"),
        tool_call("on-failure-retry"),
        tool_call("slow"),
        tool_call("over-budget"),
        text("done"),
    )
    b = run_bundle(
        model_server.openai_base_url,
        flaky("linear", "a", 2, retry={"attempts": 2, "backoff": "linear"}),
        flaky("exhausted", "b", 5, retry={"attempts": 1, "backoff": "none"}),
        flaky("on-failure-retry", "c", 2, onFailure="retry", retry={"backoff": "none"}),
        mcp_tool_skill(
            "slow", "tools", "sleep", arguments={"seconds": 5}, constraints={"timeoutSeconds": 1}
        ),
        mcp_tool_skill(
            "over-budget",
            "tools",
            "sleep",
            arguments={"seconds": 0.2},
            constraints={"maxLatencyMs": 50},
        ),
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    results = [req.tool_results() for req in model_server.requests[1:]]
    assert results[0] == [("ok after 3 calls", False)]
    [(exhausted, is_error)] = results[1]
    assert is_error and "SkillFailed: skill exhausted failed after 2 attempts" in exhausted
    assert "flaky failure 2 of 5" in exhausted
    assert results[2] == [("ok after 3 calls", False)]  # onFailure retry: 2 retries by default
    [(slow, slow_error)] = results[3]
    assert slow_error and "SkillTimedOut: no result within 1s (timeoutSeconds)" in slow
    assert results[4] == [("slept 0.2", False)]  # too slow, but the answer is used

    retries = out.events("skill.retry")
    linear = [r for r in retries if r["skill"] == "linear"]
    assert [(r["attempt"], r["backoff"], r["delay_s"]) for r in linear] == [
        (1, "linear", 0.2),
        (2, "linear", 0.4),
    ]
    linear_call = out.tool_calls("linear")[0]
    assert linear_call["duration_ms"] >= 600  # the backoff really waited
    assert [r["delay_s"] for r in retries if r["skill"] == "exhausted"] == [0.0]
    failed = {e["skill"]: e for e in out.events("skill.failed")}
    assert set(failed) == {"exhausted", "slow"}
    assert failed["exhausted"]["on_failure"] == "fallback"
    assert failed["exhausted"]["attempts"] == 2
    [violation] = out.events("constraint.violation")
    assert (violation["skill"], violation["constraint"], violation["limit"]) == (
        "over-budget",
        "maxLatencyMs",
        50,
    )
    assert violation["duration_ms"] > 50


async def test_on_failure_fail_ends_the_run_with_the_reason(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_call("must-work"), text("never reached"))
    b = run_bundle(model_server.openai_base_url, flaky("must-work", "d", 9, onFailure="fail"))
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Failed"
    assert out.result["message"] == (
        "skill must-work failed after 1 attempt (onFailure: fail): "
        "McpToolError: Error executing tool flaky: flaky failure 1 of 9"
    )
    assert len(model_server.requests) == 1
    [end] = out.events("run.end")
    assert end["outcome"] == "Failed"


def test_escalate_to_human_parks_the_run_awaiting_review(tmp_path: Path) -> None:
    failing = {
        "id": "ops",
        "commands": [
            {
                "name": "deploy",
                "description": "Deploy.",
                "argv": [sys.executable, "-c", "import sys; sys.exit('deploy target locked')"],
            }
        ],
    }
    with ScriptedModelServer([tool_call("deploy"), text("never reached")]) as server:
        b = bundle(
            agents=[agent("dev", provider="m", skills=["deploy"])],
            skills=[
                skill(
                    "deploy",
                    implementation={"type": "command", "pack": "ops", "command": "deploy"},
                    constraints={"onFailure": "escalate_to_human"},
                )
            ],
            providers=[openai_provider("m", server.openai_base_url)],
            workspace={"commandPacks": [failing]},
        )
        out = run_subprocess(write_bundle(b, tmp_path))

    assert out.exit_code == 0, out.stderr  # parked, not failed: nothing for the Job to retry
    assert out.outcome == "AwaitingReview"
    [item] = out.result["reviewItems"]
    assert (item["kind"], item["skill"], item["agent"]) == ("escalation", "deploy", "dev")
    question = item["question"]
    assert question.startswith("skill deploy (agent dev) failed after 1 attempt: CommandFailed:")
    assert "deploy target locked" in question
    assert question.endswith("or reject to fail the run.")
    assert out.result["message"] == f"awaiting review: {question}"
    [requested] = out.events("review.requested")
    assert requested["kind"] == "escalation"
    [end] = out.events("run.end")
    assert end["outcome"] == "AwaitingReview" and end["review_items"][0]["skill"] == "deploy"

    # the operator shows it honestly: Succeeded=Unknown, reason AwaitingReview, the question
    assert out.layout is not None
    message = out.layout.termination_log.read_text()
    pod = {
        "metadata": {"name": "run-pod"},
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": CONTAINER_NAME,
                    "state": {"terminated": {"exitCode": 0, "message": message}},
                }
            ],
        },
    }
    job = {
        "metadata": {"name": "run-job"},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    verdict = derive(job=job, pods=[pod])
    assert (verdict.status, verdict.reason) == ("Unknown", "AwaitingReview")
    assert verdict.phase == "Parked"
    assert question in verdict.message
    assert verdict.result is not None and verdict.result.review_items[0].kind == "escalation"
    assert json.loads(message)["outcome"] == "AwaitingReview"
