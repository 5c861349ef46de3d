"""Decision skills: outputs enforced with field-specific re-asks; the seeds' code-quality-review."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.bundles import (
    agent,
    bundle,
    decision_skill,
    openai_provider,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process, run_subprocess

DIFF = "diff --git a/app.py b/app.py\n+def f():\n+    # TODO handle errors\n+    return 1\n"
GOOD = {
    "verdict": "needs-changes",
    "confidence": 0.8,
    "reasoning": "a TODO is left in the change",
    "issues": [{"file": "app.py", "line": 3, "severity": "warning", "message": "TODO"}],
}


def review_skill(**kw: object) -> object:
    return decision_skill(
        "code-quality-review",
        {"type": "llm_prompt", "prompt": "You review code changes against our standards."},
        description="Evaluates code changes against quality standards.",
        **kw,
    )


async def test_code_quality_review_llm_prompt_is_reasked_with_field_specific_problems(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("code-quality-review", input=DIFF),
        text('{"verdict": "ok", "confidence": 1.4}'),
        text("```json\n" + json.dumps(GOOD) + "\n```"),
        text("The change needs changes: a TODO is left."),
    )
    b = bundle(
        agents=[agent("dev", provider="m", skills=["code-quality-review"])],
        skills=[review_skill()],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    skill_call = model_server.requests[1]
    assert skill_call.system.startswith("You review code changes against our standards.")
    assert '"enum": ["pass", "fail", "needs-changes"]' in skill_call.system
    assert skill_call.tool_names == []
    assert skill_call.first_user_text == DIFF
    reask = model_server.requests[2].messages[-1]["content"]
    assert "- confidence: 1.4 is greater than the maximum of 1" in reask
    assert "- verdict: 'ok' is not one of ['pass', 'fail', 'needs-changes']" in reask
    assert "- (root): 'reasoning' is a required property" in reask
    [(result, is_error)] = model_server.requests[3].tool_results()
    assert not is_error
    assert json.loads(result) == GOOD  # verdict, confidence, reasoning and issues
    [failed] = out.events("output.validation_failed")
    assert (failed["skill"], failed["attempt"], failed["outcome"]) == (
        "code-quality-review",
        1,
        "retry",
    )
    assert len(failed["problems"]) == 3
    [valid] = out.events("output.validated")
    assert (valid["verdict"], valid["confidence"], valid["reasoning"], valid["attempt"]) == (
        "needs-changes",
        0.8,
        "a TODO is left in the change",
        2,
    )
    [call] = out.tool_calls("code-quality-review")
    assert call["outcome"] == "ok" and call["output"]["verdict"] == "needs-changes"
    models = out.events("model.call")
    assert [m.get("skill") for m in models] == [
        None,
        "code-quality-review",
        "code-quality-review",
        None,
    ]


async def test_exhausted_output_retries_follow_on_failure(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    bad = text("not json at all")
    model_server.push(tool_call("code-quality-review", input=DIFF), bad, bad, text("gave up"))
    b = bundle(
        agents=[agent("dev", provider="m", skills=["code-quality-review"])],
        skills=[review_skill(constraints={"outputRetries": 1})],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path / "fallback"))

    assert out.outcome == "Succeeded"
    assert len(model_server.requests) == 4  # agent, skill, one re-ask, agent
    [(result, is_error)] = model_server.requests[3].tool_results()
    assert is_error
    assert "SkillFailed: skill code-quality-review failed after 1 attempt" in result
    assert "after 1 retry: (root): the answer is not valid JSON" in result
    assert [e["outcome"] for e in out.events("output.validation_failed")] == ["retry", "failed"]
    [failed] = out.events("skill.failed")
    assert failed["on_failure"] == "fallback"

    model_server.push(tool_call("code-quality-review", input=DIFF), bad, bad, bad)
    b = bundle(
        agents=[agent("dev", provider="m", skills=["code-quality-review"])],
        skills=[review_skill(constraints={"onFailure": "fail"})],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path / "fail"))
    assert out.outcome == "Failed"
    assert (
        "skill code-quality-review failed after 1 attempt (onFailure: fail)"
        in (out.result["message"])
    )
    assert "after 2 retries" in out.result["message"]


def test_code_quality_review_mcp_tool_end_to_end(tmp_path: Path) -> None:
    """The seeds' skill as written (mcp_tool review-server/check_quality, iam repo:read),
    through the real CLI, a stdio MCP server and the scripted model API."""
    with ScriptedModelServer(
        [
            tool_call("code-quality-review", diff=DIFF),
            tool_call("code-quality-review", diff="BAD_OUTPUT"),
            text("Verdict: needs-changes."),
        ]
    ) as server:
        b = bundle(
            agents=[
                agent("dev", provider="m", skills=["code-quality-review"], scopes=["repo:read"])
            ],
            skills=[
                decision_skill(
                    "code-quality-review",
                    {"type": "mcp_tool", "server": "review-server", "tool": "check_quality"},
                    description="Evaluates code changes against quality standards.",
                    iam={"requiredScopes": ["repo:read"]},
                    constraints={"outputRetries": 1},
                )
            ],
            providers=[openai_provider("m", server.openai_base_url)],
            mcp_servers=[stdio_server("review-server", stdio_command("review"))],
        )
        out = run_subprocess(write_bundle(b, tmp_path))

    assert out.exit_code == 0, out.stderr
    assert out.outcome == "Succeeded", out.result
    tools = server.requests[0].tools
    assert tools["code-quality-review"]["required"] == ["diff"]
    [(first, first_error)] = server.requests[1].tool_results()
    assert not first_error
    assert json.loads(first) == GOOD
    [(second, second_error)] = server.requests[2].tool_results()
    assert second_error and "OutputInvalid" not in second.split(":")[0]
    assert "SkillFailed" in second and "verdict: 'great' is not one of" in second
    assert "confidence: 7 is greater than the maximum of 1" in second
    [valid] = [e for e in out.events("output.validated")]
    assert valid["verdict"] == "needs-changes" and valid["skill"] == "code-quality-review"
    invalid = out.events("output.validation_failed")
    assert [e["outcome"] for e in invalid] == ["retry", "failed"]
