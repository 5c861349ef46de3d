"""A scheduled Run waiting on a budget follows its Topology's concurrency policy.

Real apiserver, operator, runner. Three Topologies run every minute (``Forbid``,
``Replace``, ``Allow``); a SpendQuota that queues covers them and holds less than one Run's
cap, so every scheduled Run waits (``BudgetExhausted``). At the next minute: ``Forbid``
creates nothing while its Run waits, ``Replace`` replaces the waiting Run, ``Allow`` lets
both wait. Each Topology's ``status.lastScheduleTime`` is set two minutes back first, so
the first Run is due at once rather than at the next minute.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    doc,
    reason_is,
    wait_ready,
    wait_run,
)

BUDGET = {"swarmkit.dev/budget": "nightly"}
POLICIES = {"forbid": "Forbid", "replace": "Replace", "allow": "Allow"}


pytestmark = pytest.mark.operator_settings(config={"SWARMKIT_SCHEDULE_INTERVAL_SECONDS": "1"})


def _runs(kube: Kube, ns: str, topology: str) -> list[dict[str, Any]]:
    out = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, "runs", label_selector=f"swarmkit.dev/topology={topology}"
    )
    return [r for r in out["items"] if not r["metadata"].get("deletionTimestamp")]


def _names(kube: Kube, ns: str, topology: str) -> list[str]:
    return sorted(r["metadata"]["name"] for r in _runs(kube, ns, topology))


def _wait_names(
    kube: Kube, ns: str, topology: str, ok: Callable[[list[str]], bool], timeout: float
) -> list[str]:
    def check() -> list[str] | None:
        names = _names(kube, ns, topology)
        return names if ok(names) else None

    found: list[str] = wait_for(check, timeout, message=f"the Runs of Topology {topology}")
    return found


def test_a_scheduled_run_waiting_on_a_budget_counts_for_the_concurrency_policy(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            for provider in doc["spec"]["modelProviders"]:
                if provider["type"] == "replay":
                    provider["prices"] = {"currency": "USD", "input": "3", "output": "15"}
            doc["spec"].setdefault("governance", {})["maxCostPerRun"] = "0.1"
        return doc

    apply_examples(kube, ns, edit)
    apply(kube, ns, agent_with("nightly-worker", [{"text": "done"}]))
    quota = {"cost": "0.05", "currency": "USD", "window": "daily", "onExhausted": "queue"}
    create(kube, ns, doc("SpendQuota", "nightly", {**quota, "selector": {"matchLabels": BUDGET}}))
    back = (datetime.now(UTC) - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for name, policy in POLICIES.items():
        spec = {
            "workspaceRef": {"name": "default"},
            "agents": [{"name": "root", "agentRef": {"name": "nightly-worker"}, "role": "root"}],
            "schedule": {"cron": "* * * * *", "concurrencyPolicy": policy},
        }
        apply(kube, ns, doc("Topology", name, spec, **BUDGET))
        wait_ready(kube, ns, "Topology", name)
        kube.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "topologies", name, {"status": {"lastScheduleTime": back}}
        )

    first: dict[str, str] = {}
    for name in POLICIES:
        [first[name]] = _wait_names(kube, ns, name, lambda names: len(names) == 1, 60)
        wait_run(kube, ns, first[name], reason_is("BudgetExhausted"), operator=operator)

    # The next minute: Allow creates a second Run beside the waiting one; both wait.
    both = _wait_names(kube, ns, "allow", lambda names: len(names) == 2, 75)
    assert first["allow"] in both
    for name in both:
        wait_run(kube, ns, name, reason_is("BudgetExhausted"), operator=operator)
    # Replace: the waiting Run is deleted, the new one waits in its place.
    [replacement] = _wait_names(
        kube, ns, "replace", lambda names: len(names) == 1 and first["replace"] not in names, 30
    )
    wait_run(kube, ns, replacement, reason_is("BudgetExhausted"), operator=operator)
    # Forbid: the same tick created nothing while its Run waits on the budget, and the
    # Topology records no later schedule time (the missed one is caught up when it ends).
    assert _names(kube, ns, "forbid") == [first["forbid"]]
    topology = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "topologies", "forbid")
    last = datetime.fromisoformat(topology["status"]["lastScheduleTime"])
    assert first["forbid"] == f"forbid-{int(last.timestamp() // 60)}"
