"""Pass rate and score per EvalSet and version on /metrics."""

from __future__ import annotations

from prometheus_client import REGISTRY

from swarmkit_operator import metrics


def test_a_finished_evalrun_sets_both_sides_gauges() -> None:
    status = {
        "candidate": {
            "target": "Agent/triage-v2",
            "version": "aaa111",
            "passRate": 1.0,
            "score": 0.9,
        },
        "baseline": {"target": "Agent/triage", "version": "bbb222", "passRate": 0.8333},
    }
    metrics.record_evaluation("ns-m", "cases", status)
    value = REGISTRY.get_sample_value
    labels = {"namespace": "ns-m", "evalset": "cases"}
    assert (
        value(
            "swarmkit_eval_pass_rate", {**labels, "target": "Agent/triage-v2", "version": "aaa111"}
        )
        == 1.0
    )
    assert (
        value("swarmkit_eval_score", {**labels, "target": "Agent/triage-v2", "version": "aaa111"})
        == 0.9
    )
    assert (
        value("swarmkit_eval_pass_rate", {**labels, "target": "Agent/triage", "version": "bbb222"})
        == 0.8333
    )
    assert (
        value("swarmkit_eval_score", {**labels, "target": "Agent/triage", "version": "bbb222"})
        is None
    )
