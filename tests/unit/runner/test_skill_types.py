"""llm_prompt (own prompt, model override), composed (sequential, parallel-consensus)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.bundles import (
    agent,
    anthropic_provider,
    bundle,
    decision_skill,
    mcp_tool_skill,
    openai_provider,
    skill,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    text,
    tool_call,
)
from tests.support.runner import run_in_process


async def test_llm_prompt_uses_its_own_prompt_and_the_model_override(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    with ScriptedModelServer([text("SUMMARY B")]) as other:
        model_server.push(
            tool_call("summarize", input="a long review", context="PR 7"),
            text("SUMMARY A"),
            tool_call("summarize-b", input="again"),
            tool_call("summarize-default", input="once more"),
            text("SUMMARY C"),
            text("done"),
        )
        b = bundle(
            agents=[
                agent(
                    "dev",
                    provider="m",
                    model="agent-model",
                    skills=["summarize", "summarize-b", "summarize-default"],
                )
            ],
            skills=[
                skill(
                    "summarize",
                    implementation={
                        "type": "llm_prompt",
                        "prompt": "Summarize reviews in one line.",
                        "model": "small-model",
                    },
                ),
                skill(
                    "summarize-b",
                    implementation={
                        "type": "llm_prompt",
                        "prompt": "Summarize, provider B.",
                        "model": "other/big-model",
                    },
                ),
                skill(
                    "summarize-default",
                    implementation={"type": "llm_prompt", "prompt": "Summarize, default."},
                ),
            ],
            providers=[
                openai_provider("m", model_server.openai_base_url),
                anthropic_provider("other", other.url),
            ],
        )
        out = await run_in_process(b, write_bundle(b, tmp_path))
        [b_request] = other.requests

    assert out.outcome == "Succeeded", out.result
    first = model_server.requests[1]
    assert first.body["model"] == "small-model"
    assert first.system == "Summarize reviews in one line."
    assert first.first_user_text == "a long review\n\nContext:\nPR 7"
    assert "tools" not in first.body
    assert b_request.wire == "anthropic" and b_request.body["model"] == "big-model"
    assert b_request.system == "Summarize, provider B."
    default = model_server.requests[4]
    assert default.body["model"] == "agent-model" and default.system == "Summarize, default."
    results = [r for req in model_server.requests for r in req.tool_results()]
    assert [r[0] for r in results] == ["SUMMARY A", "SUMMARY B", "SUMMARY C"]
    skill_models = [e for e in out.events("model.call") if e.get("skill")]
    assert [(e["skill"], e["model"]) for e in skill_models] == [
        ("summarize", "small-model"),
        ("summarize-b", "big-model"),
        ("summarize-default", "agent-model"),
    ]
    assert (
        out.result["steps"] == 7
    )  # 4 agent turns + 3 skill turns: one budget count against the run's budget
    # Every model call, the skills' included, is in the report's GenAI metric buckets (the
    # operator's gen_ai_client_* histograms), by provider and request model.
    calls = {
        (e["provider"], e["model"]): sum(n for _, n in e["duration"]["counts"])
        for e in out.result["genai"]
    }
    assert calls == {
        ("openai", "agent-model"): 5,
        ("openai", "small-model"): 1,
        ("anthropic", "big-model"): 1,
    }


async def test_composed_sequential_pipes_each_output_into_the_next(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("pipeline", text="hello"),
        text('{"draft": "HELLO"}'),
        text("done"),
    )
    b = bundle(
        agents=[
            # as the operator resolves it: the components travel with the composed grant
            agent(
                "dev",
                provider="m",
                skills=["pipeline"],
                resolved_skills=["pipeline", "shout", "echo-it"],
            )
        ],
        skills=[
            skill(
                "pipeline",
                implementation={"type": "composed", "composes": ["shout", "echo-it"]},
            ),
            skill("shout", implementation={"type": "llm_prompt", "prompt": "Shout it."}),
            mcp_tool_skill("echo-it", "tools", "echo", arguments={"text": "fixed"}),
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[stdio_server("tools", stdio_command("tools"))],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    # the components are not granted on their own
    assert sorted(model_server.requests[0].tool_names) == [
        "load_skill",
        "pipeline",
        "read_skill_file",
    ]
    assert "- shout:" not in model_server.requests[0].system
    shout = model_server.requests[1]
    assert json.loads(shout.first_user_text) == {"text": "hello"}
    [(result, is_error)] = model_server.requests[2].tool_results()
    assert (result, is_error) == ("fixed", False)  # echo's fixed argument wins
    calls = out.events("skill.call")
    assert [(c["skill"], c["via"], c["outcome"]) for c in calls] == [
        ("shout", "pipeline", "ok"),
        ("echo-it", "pipeline", "ok"),
    ]


async def test_parallel_consensus_majority_with_confidence_and_dissent(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    answers = {
        "Judge A.": ("pass", 0.9, "fine"),
        "Judge B.": ("pass", 0.7, "ok"),
        "Judge C.": ("fail", 0.6, "tests missing"),
    }

    def judge(request: RecordedRequest) -> Reply:
        prompt = request.system.split("\n", 1)[0]
        verdict, confidence, reasoning = answers[prompt]
        return text(
            json.dumps({"verdict": verdict, "confidence": confidence, "reasoning": reasoning})
        )

    model_server.push(tool_call("panel", input="the diff"), judge, judge, judge, text("done"))
    judges = [
        decision_skill(
            f"judge-{x.lower()}",
            {"type": "llm_prompt", "prompt": f"Judge {x}."},
        )
        for x in "ABC"
    ]
    b = bundle(
        agents=[agent("dev", provider="m", skills=["panel"])],
        skills=[
            decision_skill(
                "panel",
                {
                    "type": "composed",
                    "composes": [j.name for j in judges],
                    "strategy": "parallel-consensus",
                },
            ),
            *judges,
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    [(result, is_error)] = model_server.requests[4].tool_results()
    assert not is_error
    answer = json.loads(result)
    assert answer["verdict"] == "pass"
    assert answer["confidence"] == 0.8
    assert answer["agreement"] == "2/3"
    assert answer["dissent"] == [
        {"skill": "judge-c", "verdict": "fail", "confidence": 0.6, "reasoning": "tests missing"}
    ]
    assert {v["skill"] for v in answer["votes"]} == {"judge-a", "judge-b", "judge-c"}
    [consensus] = out.events("consensus")
    assert (consensus["verdict"], consensus["agreement"]) == ("pass", "2/3")
    assert consensus["dissent"][0]["skill"] == "judge-c"
    # each component was validated as a decision, and so was the combined answer
    validated = [e["skill"] for e in out.events("output.validated")]
    assert sorted(validated) == ["judge-a", "judge-b", "judge-c", "panel"]
    # the three judges ran concurrently
    starts = sorted(r.at for r in model_server.requests[1:4])
    assert starts[-1] - starts[0] < 0.5
