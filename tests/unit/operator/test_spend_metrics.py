"""The spend metrics of finished Runs: cost per agent and model, unknown apart, tokens by type."""

from __future__ import annotations

from prometheus_client import REGISTRY

from swarmkit_api.run import TokenUsage
from swarmkit_operator import metrics


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_cost_tokens_and_unknown_cost_are_counted_per_agent_and_model() -> None:
    usage = TokenUsage.model_validate(
        {
            "inputTokens": 3000,
            "outputTokens": 300,
            "models": [
                {"agent": "lead", "provider": "p", "model": "m1", "inputTokens": 2000,
                 "cachedInputTokens": 500, "outputTokens": 200, "cost": "0.0075",
                 "currency": "USD"},
                {"agent": "helper", "provider": "q", "model": "m2", "inputTokens": 1000,
                 "outputTokens": 100, "costUnknown": True},
            ],
            "costUnknown": True,
        }
    )  # fmt: skip
    ns = "metrics-test"
    metrics.record_spend(ns, usage)
    metrics.record_spend(ns, usage)

    spend = _value("swarmkit_spend_total", namespace=ns, agent="lead", model="m1", currency="USD")
    assert abs(spend - 0.015) < 1e-12
    # the unpriced model adds nothing to spend (not a 0): it is counted as unknown
    assert (
        _value("swarmkit_spend_total", namespace=ns, agent="helper", model="m2", currency="") == 0
    )
    assert _value("swarmkit_spend_unknown_total", namespace=ns, agent="helper", model="m2") == 2
    tokens = "swarmkit_model_tokens_total"
    assert _value(tokens, namespace=ns, agent="lead", model="m1", type="input") == 3000
    assert _value(tokens, namespace=ns, agent="lead", model="m1", type="cached_input") == 1000
    assert _value(tokens, namespace=ns, agent="lead", model="m1", type="output") == 400
