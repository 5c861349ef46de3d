"""Spend in the runner: per-model tokens and cost over a real wire format, the per-Run cap.

The model is the scripted Anthropic Messages server (real HTTP; its usage block carries
``cache_read_input_tokens`` as the API does). Prices are USD per million tokens; every
expected cost below is worked out by hand in micro-USD.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarmkit_api.bundle import RunBundle
from swarmkit_api.spend import ModelPrices
from tests.support.bundles import (
    agent,
    anthropic_provider,
    bundle,
    skill,
    topology_of,
    write_bundle,
)
from tests.support.model_server import Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process

FLOW = {"flowData": [{"path": "a.txt", "content": "A"}]}
PRICES = ModelPrices(currency="USD", input="3", output="15", cached_input="0.3")


def priced_bundle(server: ScriptedModelServer, **run: Any) -> RunBundle:
    b = bundle(
        agents=[agent("solo", provider="m", flow_data_access=["a.txt"], max_tokens=1024)],
        providers=[anthropic_provider("m", server.anthropic_base_url, prices=PRICES)],
        workspace=FLOW,
    )
    return b.model_copy(update={"run": b.run.model_copy(update=run)})


def read(**usage: int) -> Reply:
    reply = tool_call("read_flow_data", path="a.txt")
    for key, value in usage.items():
        setattr(reply, key, value)
    return reply


async def test_cost_per_model_prices_cached_input_apart(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    # Anthropic reports input_tokens without the cache reads: 400 + 600 cached = 1000 input.
    model_server.push(
        read(input_tokens=400, cache_read_tokens=600, output_tokens=50),
        text("done", input_tokens=600, cache_read_tokens=600, output_tokens=100),
    )
    b = priced_bundle(model_server)
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    usage = out.result["usage"]
    # input 2200 of which cached 1200: 1000 x 3 + 1200 x 0.3 + 150 x 15 = 3000 + 360 + 2250
    assert usage["models"] == [
        {
            "agent": "solo",
            "provider": "m",
            "model": "test-model",
            "inputTokens": 2200,
            "cachedInputTokens": 1200,
            "outputTokens": 150,
            "cost": "0.00561",
            "currency": "USD",
            "costUnknown": False,
        }
    ]
    assert (usage["inputTokens"], usage["cachedInputTokens"], usage["outputTokens"]) == (
        2200,
        1200,
        150,
    )
    assert (usage["cost"], usage["currency"], usage["costUnknown"]) == ("0.00561", "USD", False)
    [end] = out.events("run.end")
    assert (end["cost"], end["currency"], end["cached_input_tokens"]) == ("0.00561", "USD", 1200)


async def test_max_cost_stops_before_the_call_that_could_cross_it(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    # Every call: 1000 input, 50 output = 0.003 + 0.00075 = 0.00375 USD. The worst case of
    # the next call is the last prompt (1000) plus maxTokens 1024 of output (0.01536):
    # before call 5, 0.015 spent + 0.01836 = 0.03336 > 0.03, so call 5 is never made.
    model_server.default = read(input_tokens=1000, output_tokens=50)
    b = priced_bundle(model_server, max_cost="0.03")
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "BudgetExceeded", out.result
    assert len(model_server.requests) == 4
    assert out.result["usage"]["cost"] == "0.015"
    [line] = out.events("limit.exceeded")
    assert (line["limit"], line["value"], line["call"], line["agent"]) == (
        "maxCost",
        "0.03",
        5,
        "solo",
    )
    assert (line["provider"], line["model"], line["outcome"]) == (
        "m",
        "test-model",
        "BudgetExceeded",
    )
    assert line["message"] == (
        "model call 5 (agent solo, m/test-model, maxTokens 1024) could bring the run's cost "
        "to 0.03336 USD, over its maxCost (0.03 USD); 0.015 USD spent so far"
    )
    assert out.result["message"] == line["message"]


async def test_max_tokens_counts_the_calls_max_tokens_as_the_worst_case(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    # 1050 tokens a call; before call 4: 3150 + 1000 (prompt) + 1024 = 5174 > 5000.
    model_server.default = read(input_tokens=1000, output_tokens=50)
    b = priced_bundle(model_server, max_tokens=5000)
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "BudgetExceeded", out.result
    assert len(model_server.requests) == 3
    [line] = out.events("limit.exceeded")
    assert (line["limit"], line["call"]) == ("maxTokens", 4)
    assert "could bring the run to 5174 tokens, over its maxTokens (5000)" in line["message"]


async def test_a_maxcost_cap_refuses_calls_to_an_unpriced_provider(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[anthropic_provider("m", model_server.anthropic_base_url)],
    )
    b = b.model_copy(update={"run": b.run.model_copy(update={"max_cost": "1"})})
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "BudgetExceeded"
    assert model_server.requests == []
    assert "provider m, which has no prices: its cost cannot be bounded" in out.result["message"]


async def test_a_child_run_counts_toward_its_parents_cap(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    # The lead calls the agent skill; the child's researcher then keeps calling tools. The
    # child's calls are charged to the run: the cap stops the child's 2nd call.
    model_server.push(
        Reply(
            tool_calls=[("deep-research", {"input": "find X"})],
            input_tokens=1000,
            output_tokens=50,
        )
    )
    model_server.default = read(input_tokens=1000, output_tokens=50)
    impl = {"type": "agent", "topology": "research"}
    b = bundle(
        agents=[
            agent("lead", provider="m", skills=["deep-research"], max_tokens=1024),
            agent("researcher", provider="m", flow_data_access=["a.txt"], max_tokens=1024),
        ],
        skills=[skill("deep-research", implementation=impl, category="coordination")],
        topologies=[topology_of("main", "lead"), topology_of("research", "researcher")],
        target="main",
        providers=[anthropic_provider("m", model_server.anthropic_base_url, prices=PRICES)],
        workspace=FLOW,
    )
    # lead call 1 (worst 0.01536) → 0.00375; child call 2 (first of researcher: prompt 0,
    # worst 0.00375 + 0.01536) → 0.0075; child call 3: 0.0075 + 0.003 + 0.01536 > 0.025.
    b = b.model_copy(update={"run": b.run.model_copy(update={"max_cost": "0.025"})})
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "BudgetExceeded", out.result
    assert len(model_server.requests) == 2
    [line] = out.events("limit.exceeded")
    assert (line["agent"], line["call"]) == ("researcher", 3)
    assert line["run_id"] != b.run.uid  # audited in the child run, ends the whole run
    assert [m["agent"] for m in out.result["usage"]["models"]] == ["lead", "researcher"]
