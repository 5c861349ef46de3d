"""A scheduled Run waiting on a budget counts for its Topology's concurrency policy."""

from __future__ import annotations

from typing import Any

import pytest

from swarmkit_operator.runs.model import RunView
from swarmkit_operator.runs.schedule import concurrency_action, unfinished


def _run(name: str, reason: str | None, status: str = "Unknown", **labels: str) -> RunView:
    conditions: list[dict[str, Any]] = []
    if reason is not None:
        conditions.append({"type": "Succeeded", "status": status, "reason": reason})
    return RunView(
        name=name,
        namespace="team-a",
        uid=f"uid-{name}",
        generation=1,
        spec={"topologyRef": {"name": "nightly"}},
        status={"conditions": conditions},
        labels={"swarmkit.dev/scheduled": "true", **labels},
        deleting=False,
        resource_version=1,
    )


QUEUED = _run("nightly-1", "BudgetExhausted")
HELD = _run("nightly-2", "BudgetHold")
RUNNING = _run("nightly-3", "Running")
FAILED_ON_BUDGET = _run("nightly-4", "BudgetExhausted", status="False")
DONE = _run("nightly-5", "Succeeded", status="True")


def test_runs_waiting_on_a_budget_are_unfinished_a_failed_one_is_not() -> None:
    runs = [QUEUED, HELD, RUNNING, FAILED_ON_BUDGET, DONE]
    assert [r.name for r in unfinished(runs, "team-a", "nightly", "nightly-9")] == [
        "nightly-1",
        "nightly-2",
        "nightly-3",
    ]
    # the due Run itself (created by an earlier tick) is not its own rival
    assert [r.name for r in unfinished([QUEUED], "team-a", "nightly", "nightly-1")] == []
    # another Topology's or a hand-made Run does not count
    assert unfinished([QUEUED], "team-a", "weekly", "nightly-9") == []
    assert unfinished([QUEUED], "team-b", "nightly", "nightly-9") == []
    hand_made = _run("by-hand", "BudgetExhausted")
    hand_made.labels = {}
    assert unfinished([hand_made], "team-a", "nightly", "nightly-9") == []


@pytest.mark.parametrize(
    ("policy", "action"), [("Forbid", "skip"), ("Replace", "replace"), ("Allow", "create")]
)
def test_a_run_waiting_on_a_budget_decides_like_a_running_one(policy: Any, action: str) -> None:
    for waiting in ([QUEUED], [HELD], [QUEUED, RUNNING]):
        assert concurrency_action(policy, waiting) == action
    assert concurrency_action(policy, []) == "create"
