"""Scheduled Runs (catch up at most one, Forbid) and retention (TTL, historyLimit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import (
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    example,
    finished,
    get,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)


def _runs(kube: Kube, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.custom.list_namespaced_custom_object(
        "swarmkit.dev", "v1alpha1", ns, "runs"
    )["items"]
    return items


def _set_last_schedule(kube: Kube, ns: str, name: str, when: datetime) -> None:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    kube.custom.patch_namespaced_custom_object_status(
        "swarmkit.dev", "v1alpha1", ns, "topologies", name, {"status": {"lastScheduleTime": stamp}}
    )


def test_schedule_catches_up_one_missed_run_and_forbids_overlap(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    apply_examples(kube, ns)
    apply(
        kube,
        ns,
        agent_with(
            "sleeper",
            [
                {"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 60"}}]},
                {"text": "ok"},
            ],
            bash=True,
        ),
    )
    wait_ready(kube, ns, "Agent", "sleeper")
    topo = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "nightly"},
        "spec": {
            "workspaceRef": {"name": "default"},
            "agents": [{"name": "root", "agentRef": {"name": "sleeper"}, "role": "root"}],
            # 09:00 every day: nothing is due by itself while the test runs
            "schedule": {"cron": "0 9 * * *", "timezone": "UTC", "input": "nightly input"},
        },
    }
    apply(kube, ns, topo)
    wait_ready(kube, ns, "Topology", "nightly")
    # Pretend the operator missed a week of schedules.
    _set_last_schedule(kube, ns, "nightly", datetime.now(UTC) - timedelta(days=7))
    runs = wait_for(lambda: _runs(kube, ns), 30, message=lambda: debug(kube, ns, operator))
    assert len(runs) == 1
    (run,) = runs
    assert run["metadata"]["labels"]["swarmkit.dev/scheduled"] == "true"
    assert run["metadata"]["ownerReferences"][0]["kind"] == "Topology"
    assert run["spec"]["input"] == "nightly input"
    now = datetime.now(UTC)
    expected = now.replace(hour=9, minute=0, second=0, microsecond=0)
    if expected > now:
        expected -= timedelta(days=1)
    want = expected.strftime("%Y-%m-%dT%H:%M:%SZ")

    def last_schedule() -> str | None:
        found = get(kube, ns, "Topology", "nightly") or {}
        return (found.get("status") or {}).get("lastScheduleTime")

    # The Run is created before the Topology's status records it: wait for the record.
    wait_for(
        lambda: last_schedule() == want, 30, message=lambda: f"lastScheduleTime {last_schedule()}"
    )
    topology = get(kube, ns, "Topology", "nightly")
    assert topology is not None
    assert not topology["metadata"].get("finalizers"), "the operator writes only status"
    # Another missed time while that run is still going: Forbid creates nothing.
    wait_run(kube, ns, run["metadata"]["name"], lambda r: succeeded(r) is not None)
    _set_last_schedule(kube, ns, "nightly", datetime.now(UTC) - timedelta(days=3))
    import time

    time.sleep(12)  # two schedule ticks
    assert len(_runs(kube, ns)) == 1


def test_finished_runs_past_their_ttl_are_deleted(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            doc["spec"]["runtime"]["runTtlSecondsAfterFinished"] = 3
        return doc

    apply_examples(kube, ns, edit)
    wait_ready(kube, ns, "Topology", "review-pipeline")
    create(kube, ns, run_manifest("short-lived"))
    wait_run(kube, ns, "short-lived", finished, operator=operator)
    wait_for(
        lambda: get(kube, ns, "Run", "short-lived") is None, 40, message="the Run to be deleted"
    )


def test_history_limit_keeps_the_newest(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Topology":
            doc["spec"]["historyLimit"] = {"succeeded": 1, "failed": 1}
        return doc

    apply_examples(kube, ns, edit)
    wait_ready(kube, ns, "Topology", "review-pipeline")
    for i in range(3):
        create(kube, ns, run_manifest(f"h-{i}"))
        wait_run(kube, ns, f"h-{i}", finished, operator=operator)
    wait_for(
        lambda: sorted(r["metadata"]["name"] for r in _runs(kube, ns)) == ["h-2"],
        40,
        message=lambda: str([r["metadata"]["name"] for r in _runs(kube, ns)]),
    )
    assert example("Topology", "review-pipeline")["spec"]["historyLimit"]
