"""Funnel metrics from the gate report the runner attaches to an approval.

``swarmkit_funnel_layer_results_total`` and ``swarmkit_funnel_retries_total`` count what a
round's drafts went through; every funnel metric counts a transition of the Run's
``status.gates`` once, so a leader re-reading a Run whose status already shows the state
(after a restart, or a retried write) does not count it again.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from swarmkit_operator.runs import funnel_gate

LAYERS = [
    {"layer": "validate", "outcome": "autocorrect", "count": 1},
    {"layer": "validate", "outcome": "ok", "count": 2},
    {"layer": "judge", "outcome": "below_threshold", "count": 1},
    {"layer": "judge", "outcome": "ok", "count": 1},
]


def _review(name: str, namespace: str) -> dict[str, Any]:
    report = {
        "funnel": "metrics-gate",
        "artifact": "x",
        "attempts": 2,
        "retries": 1,
        "layerResults": LAYERS,
    }
    gate = {
        "funnel": "metrics-gate",
        "approve": {"rules": [{"roles": ["l"], "quorum": "any"}], "roles": {"l": {"users": ["a"]}}},
        "author": "carol",
        "report": report,
    }
    request = {"kind": "funnel_approval", "question": "?", "key": "e.0.1", "gate": gate}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"request": request}}


def gates_after(
    gates: list[dict[str, Any]], review: dict[str, Any], verdict: str | None
) -> list[dict[str, Any]] | None:
    """The gates a Run's status write records, counted as that write counts them once it
    went through (``runs/status.py``: the transitions it shows first)."""
    after = funnel_gate.gates_after(gates, review, verdict)
    if after is not None:
        for _, state in funnel_gate.new_transitions(gates, after):
            funnel_gate.count_transition(review, state)
    return after


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_layer_results_and_retries_are_counted_once_per_round() -> None:
    ns, funnel = "team-metrics", "metrics-gate"

    def layer(name: str, outcome: str) -> float:
        return _value(
            "swarmkit_funnel_layer_results_total",
            namespace=ns, funnel=funnel, layer=name, outcome=outcome,
        )  # fmt: skip

    review = _review("r-m1", ns)
    opened = gates_after([], review, None)
    assert opened is not None
    assert (layer("validate", "ok"), layer("validate", "autocorrect")) == (2.0, 1.0)
    assert (layer("judge", "below_threshold"), layer("judge", "ok")) == (1.0, 1.0)
    assert _value("swarmkit_funnel_retries_total", namespace=ns, funnel=funnel) == 1.0
    opened_count = _value(
        "swarmkit_funnel_gates_total", namespace=ns, funnel=funnel, state="AwaitingApproval"
    )
    assert opened_count == 1.0

    # a restarted leader re-reads the Run: its status already has the open gate
    assert gates_after(opened, review, None) == opened
    assert layer("validate", "ok") == 2.0
    assert _value("swarmkit_funnel_retries_total", namespace=ns, funnel=funnel) == 1.0
    assert (
        _value("swarmkit_funnel_gates_total", namespace=ns, funnel=funnel, state="AwaitingApproval")
        == 1.0
    )

    # settling is a new transition, counted once; the layer results are not counted again
    settled = gates_after(opened, review, "approve")
    assert settled is not None
    assert gates_after(settled, review, "approve") == settled
    approved = _value("swarmkit_funnel_gates_total", namespace=ns, funnel=funnel, state="Approved")
    assert approved == 1.0
    assert layer("judge", "ok") == 1.0

    # the next round's Review (another name) is a new gate entry with its own results
    gates_after(settled, _review("r-m2", ns), None)
    assert layer("validate", "ok") == 4.0
    assert _value("swarmkit_funnel_retries_total", namespace=ns, funnel=funnel) == 2.0
