"""The agent loop: limits end the run with the right outcome; delegation in a topology."""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.bundles import agent, bundle, openai_provider, topology, write_bundle
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process

FLOW = {"flowData": [{"path": "a.txt", "content": "A"}]}


def looping_agent(name: str = "solo", **kw: object) -> object:
    return agent(name, provider="m", flow_data_access=["a.txt"], **kw)  # type: ignore[arg-type]


async def test_max_steps_per_agent_ends_the_run(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.default = tool_call("read_flow_data", path="a.txt")  # never stops on its own
    b = bundle(
        agents=[looping_agent()],  # type: ignore[list-item]
        providers=[openai_provider("m", model_server.openai_base_url)],
        governance={"maxStepsPerAgent": 3},
        workspace=FLOW,
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "LimitExceeded"
    assert out.result["message"] == (
        "agent solo reached maxStepsPerAgent (3) without a final answer"
    )
    assert out.result["steps"] == 3
    assert len(model_server.requests) == 3
    assert out.events("limit.exceeded")[0]["limit"] == "maxStepsPerAgent"


async def test_agent_max_steps_is_capped_by_governance(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.default = tool_call("read_flow_data", path="a.txt")
    b = bundle(
        agents=[looping_agent(max_steps=2)],  # type: ignore[list-item]
        providers=[openai_provider("m", model_server.openai_base_url)],
        governance={"maxStepsPerAgent": 5},
        workspace=FLOW,
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "LimitExceeded"
    assert out.result["steps"] == 2


async def test_max_steps_per_run_counts_every_agent(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("delegate_to_worker", task="look"),
        tool_call("read_flow_data", path="a.txt"),
        tool_call("read_flow_data", path="a.txt"),
    )
    model_server.default = tool_call("read_flow_data", path="a.txt")
    b = bundle(
        agents=[looping_agent("lead"), looping_agent("worker")],  # type: ignore[list-item]
        topology=topology("team", "lead", {"worker": ("worker", "lead")}),
        providers=[openai_provider("m", model_server.openai_base_url)],
        governance={"maxStepsPerRun": 3, "maxStepsPerAgent": 10},
        workspace=FLOW,
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "LimitExceeded"
    assert "maxStepsPerRun (3)" in out.result["message"]
    assert out.result["steps"] == 3


async def test_max_tokens_per_run(tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = tool_call("read_flow_data", path="a.txt")
    b = bundle(
        agents=[looping_agent()],  # type: ignore[list-item]
        providers=[openai_provider("m", model_server.openai_base_url)],
        governance={"maxTokensPerRun": 40},  # each scripted turn uses 15
        workspace=FLOW,
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "LimitExceeded"
    assert out.result["message"] == "run used 45 tokens, over maxTokensPerRun (40)"
    usage = out.result["usage"]
    assert {k: usage[k] for k in ("inputTokens", "outputTokens")} == {
        "inputTokens": 30,
        "outputTokens": 15,
    }
    assert usage["costUnknown"] is True  # the provider has no prices
    # The request's max_tokens never asks for more than what is left.
    assert model_server.requests[-1].body["max_tokens"] == 10


async def test_run_timeout_is_timed_out_not_a_hang(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("never in time", delay=10))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url, timeout_seconds=30)],
        timeout_seconds=1,
    )
    start = time.monotonic()
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert time.monotonic() - start < 5
    assert out.outcome == "TimedOut"
    assert out.result["message"] == "run exceeded its timeout of 1s"


async def test_topology_root_delegates_to_children_in_process(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    def worker_turn(request: object) -> object:
        return text(f"worker saw: {request.first_user_text}")  # type: ignore[attr-defined]

    model_server.push(
        tool_call("delegate_to_researcher", task="find the answer"),
        worker_turn,  # type: ignore[arg-type]
        text("Lead summary: done."),
    )
    b = bundle(
        agents=[
            agent("lead", provider="m", system_prompt="You lead."),
            agent(
                "researcher-agent",
                provider="m",
                system_prompt="You research.",
                description="Finds facts.",
            ),
        ],
        topology=topology("team", "lead", {"researcher": ("researcher-agent", "lead")}),
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded"
    assert out.result["output"] == "Lead summary: done."
    lead_1, worker, lead_2 = model_server.requests
    assert lead_1.tool_names == ["delegate_to_researcher"]
    assert "Finds facts." in lead_1.tool_description("delegate_to_researcher")
    assert worker.system == "You research."
    assert worker.tool_names == []  # the child has only its own grants
    assert worker.first_user_text == "find the answer"
    assert lead_2.tool_results() == [("worker saw: find the answer", False)]
    starts = out.events("agent.start")
    assert [(s["agent"], s["depth"]) for s in starts] == [("lead", 0), ("researcher-agent", 1)]
    assert out.result["steps"] == 3


async def test_output_schema_is_enforced_with_field_specific_retries(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    schema = {
        "type": "object",
        "properties": {"verdict": {"enum": ["pass", "fail"]}, "reasoning": {"type": "string"}},
        "required": ["verdict", "reasoning"],
    }
    model_server.push(
        text("Looks fine to me."),
        text('{"verdict": "maybe", "reasoning": "unsure"}'),
        text('```json\n{"verdict": "pass", "reasoning": "tests pass"}\n```'),
    )
    b = bundle(
        agents=[agent("judge", provider="m", outputSchema=schema)],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded"
    assert '"verdict": "pass"' in out.result["output"]
    second, third = model_server.requests[1], model_server.requests[2]
    assert "not valid JSON" in second.messages[-1]["content"]
    assert "verdict: 'maybe' is not one of ['pass', 'fail']" in third.messages[-1]["content"]
    assert [e["outcome"] for e in out.events("output.validation_failed")] == ["retry", "retry"]


async def test_output_schema_failing_after_retries_fails_the_run(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.default = text('{"verdict": 3}')
    b = bundle(
        agents=[agent("judge", provider="m", outputSchema={"type": "object", "required": ["x"]})],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "Failed"
    assert out.result["message"] == (
        "agent judge: final answer does not match its outputSchema after 2 retries: "
        "(root): 'x' is a required property"
    )
