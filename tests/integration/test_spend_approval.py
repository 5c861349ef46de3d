"""approve_spend end to end: an agent clears the budget holds of the Runs its Run started.

Real apiserver (with the Review admission policy), the operator under the chart's RBAC, the
runner with the replay provider. A SpendQuota with ``onExhausted: hold`` covers the Runs of
the ``work`` Topology only (by label); every Run's cap is the Workspace's 0.1 USD, over the
quota's 0.05, so every Run of ``work`` is held.

* ``boss`` (holds ``approve_spend``) schedules a ``work`` Run, tries to approve a Run a
  person created (refused in its run's audit), then approves the Runs it started: its
  scheduled Run is held, its hold's Review is taken up as decided by ``agent:<ns>/boss``,
  and it runs to the end.
* ``clerk`` (no ``approve_spend``) does the same: the builtin is not offered (the audit
  says why), its scheduled Run stays held, its Review undecided.
* ``revoked`` is offered the tool, but its Agent loses the permission while the Run runs:
  the operator refuses the effect and the started Run stays held.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.runner import parse_audit

from .review_support import review_admission  # noqa: F401  (fixture)
from .runs_support import (
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    doc,
    finished,
    get,
    reason_is,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

USAGE = {"inputTokens": 1000, "outputTokens": 100}
PRICES = {"currency": "USD", "input": "3", "output": "15"}
BUDGET = {"swarmkit.dev/budget": "work"}


def _setup(kube: Kube, ns: str) -> None:
    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            for provider in doc["spec"]["modelProviders"]:
                if provider["type"] == "replay":
                    provider["prices"] = PRICES
            doc["spec"].setdefault("governance", {})["maxCostPerRun"] = "0.1"
        return doc

    apply_examples(kube, ns, edit)
    wait_ready(kube, ns, "Workspace", "default")
    apply(kube, ns, agent_with("worker", [{"text": "worked", "usage": USAGE}]))
    topology = {
        "workspaceRef": {"name": "default"},
        "agents": [{"name": "root", "agentRef": {"name": "worker"}, "role": "root"}],
    }
    apply(kube, ns, doc("Topology", "work", topology, **BUDGET))
    # An agent skill makes the work topology reachable (schedule may run it).
    skill = {
        "description": "Use when work must be done.",
        "category": "coordination",
        "implementation": {"type": "agent", "topology": "work"},
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
    }
    apply(kube, ns, doc("Skill", "call-work", skill))
    for name, permissions in (("boss", ["schedule", "approve_spend"]), ("clerk", ["schedule"])):
        replay = [
            {
                "toolCalls": [
                    {
                        "name": "schedule",
                        "arguments": {"in": "2s", "input": "go", "topology": "work"},
                    }
                ],
                "usage": USAGE,
            },
            {
                "toolCalls": [
                    {"name": "approve_spend", "arguments": {"run": "by-hand"}},
                    {"name": "approve_spend", "arguments": {}},
                ],
                "usage": USAGE,
            },
            {"text": "delegated", "usage": USAGE},
        ]
        agent = agent_with(
            name,
            replay,
            skills=["call-work"],
            tools=["schedule", "approve_spend"],
            permissions=permissions,
        )
        apply(kube, ns, agent)
    for kind, name in (("Topology", "work"), ("Agent", "boss"), ("Agent", "clerk")):
        wait_ready(kube, ns, kind, name)
    quota = {"cost": "0.05", "currency": "USD", "window": "daily", "onExhausted": "hold"}
    quota["selector"] = {"matchLabels": BUDGET}
    create(kube, ns, doc("SpendQuota", "work-budget", quota))


def _audit(cluster: LocalCluster, ns: str, run: dict[str, Any]) -> list[dict[str, Any]]:
    return parse_audit(cluster.pod_logs(ns, run["status"]["podName"], "runner"))


def _started(run: dict[str, Any]) -> str:
    [entry] = [e for e in run["status"]["effects"] if e["kind"] == "schedule"]
    assert entry["state"] == "Materialized", entry
    return str(entry["object"]).removeprefix("Run/")


def _hold_review(kube: Kube, ns: str, run: dict[str, Any]) -> dict[str, Any]:
    name = f"{run['metadata']['name']}-{run['metadata']['uid'][:5]}-spend"
    return wait_for(lambda: get(kube, ns, "Review", name), 30, message=f"Review {name}")


@pytest.mark.usefixtures("review_admission")
def test_an_agent_with_approve_spend_clears_the_hold_of_the_run_it_started_only(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _setup(kube, ns)
    # A Run a person created, held like the others: no agent may clear its hold.
    by_hand = run_manifest("by-hand", "work")
    create(kube, ns, by_hand)
    create(kube, ns, run_manifest("boss", agent="boss"))
    create(kube, ns, run_manifest("clerk", agent="clerk"))

    boss = wait_run(kube, ns, "boss", finished, operator=operator)
    assert (succeeded(boss) or {}).get("reason") == "Succeeded", debug(kube, ns, operator)
    child = _started(boss)
    assert [(e["seq"], e["kind"], e["to"], e["state"]) for e in boss["status"]["effects"]] == [
        (0, "schedule", "work", "Materialized"),
        (1, "approve_spend", child, "Materialized"),
    ], "the refused approval of by-hand records no effect"
    refused = [e for e in _audit(cluster, ns, boss) if e.get("event") == "spend.approve"]
    assert [(e["run"], e["outcome"]) for e in refused] == [("by-hand", "refused")]
    assert "was not started by this run" in refused[0]["reason"]

    # The boss's scheduled Run was held, then cleared by the boss's agent, and ran.
    done = wait_run(kube, ns, child, finished, timeout=90, operator=operator)
    assert (succeeded(done) or {}).get("reason") == "Succeeded", debug(kube, ns, operator)
    assert boss["status"]["effects"][1]["uid"] == done["metadata"]["uid"]
    review = _hold_review(kube, ns, done)
    assert review["spec"]["request"]["kind"] == "spend"
    assert "decision" not in review["spec"], "the operator never writes spec.decision"
    assert (review["status"]["state"], review["status"]["verdict"]) == ("Decided", "approve")
    assert review["status"]["decidedBy"] == f"agent:{ns}/boss"
    quota = get(kube, ns, "SpendQuota", "work-budget") or {}
    [entry] = [e for e in quota["status"]["entries"] if e["run"] == child]
    assert (entry["state"], entry["cost"], entry.get("held")) == ("spent", "0.0045", True)
    events = [
        e.reason
        for e in kube.core.list_namespaced_event(ns).items
        if e.involved_object.name == "boss" and e.involved_object.kind == "Run"
    ]
    assert "SpendApproved" in events

    # The clerk lacks approve_spend: not offered to it, its scheduled Run stays held.
    clerk = wait_run(kube, ns, "clerk", finished, operator=operator)
    assert [e["kind"] for e in clerk["status"]["effects"]] == ["schedule"]
    warnings = [
        e["message"]
        for e in _audit(cluster, ns, clerk)
        if "approve_spend" in str(e.get("message") or "")
    ]
    assert any("lacks the 'approve_spend' permission" in m for m in warnings), warnings
    held = wait_run(kube, ns, _started(clerk), reason_is("BudgetHold"), operator=operator)
    review = _hold_review(kube, ns, held)
    assert "decision" not in review["spec"]
    assert (review.get("status") or {}).get("state") != "Decided"

    # The Run a person created is still held: only a person (RBAC) may clear it.
    still = wait_run(kube, ns, "by-hand", reason_is("BudgetHold"), operator=operator)
    assert (_hold_review(kube, ns, still).get("status") or {}).get("state") != "Decided"


@pytest.mark.usefixtures("review_admission")
def test_the_operator_checks_the_permission_again_a_revoked_one_is_refused(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    """The runner offered approve_spend (its pinned Agent granted it), but the Agent lost
    the permission before the Run ended: the operator, checking the Agent as it is now,
    refuses the effect and the started Run stays held."""
    ns = namespace
    _setup(kube, ns)
    schedule = {"name": "schedule", "arguments": {"in": "2s", "input": "go", "topology": "work"}}
    nap = {"name": "bash", "arguments": {"command": "sleep 10", "timeout_seconds": 60}}
    replay = [
        {"toolCalls": [schedule], "usage": USAGE},
        {"toolCalls": [{"name": "approve_spend", "arguments": {}}], "usage": USAGE},
        {"toolCalls": [nap], "usage": USAGE},
        {"text": "delegated", "usage": USAGE},
    ]
    tools = ["schedule", "approve_spend"]
    granted = agent_with(
        "revoked", replay, bash=True, skills=["call-work"], tools=tools, permissions=tools
    )
    apply(kube, ns, granted)
    wait_ready(kube, ns, "Agent", "revoked")
    create(kube, ns, run_manifest("revoked", agent="revoked"))
    wait_run(kube, ns, "revoked", reason_is("Running"), operator=operator)
    apply(kube, ns, {**granted, "spec": {**granted["spec"], "permissions": ["schedule"]}})

    run = wait_run(kube, ns, "revoked", finished, operator=operator)
    assert (succeeded(run) or {}).get("reason") == "Succeeded", debug(kube, ns, operator)
    child = _started(run)
    [approval] = [e for e in run["status"]["effects"] if e["kind"] == "approve_spend"]
    assert approval["state"] == "Failed"
    assert approval["message"] == (
        f"approve_spend of Run {child} refused: Agent revoked does not hold the approve_spend "
        "permission"
    )
    warnings = [
        e.message
        for e in kube.core.list_namespaced_event(ns).items
        if e.involved_object.name == "revoked" and e.reason == "EffectFailed"
    ]
    assert warnings == [f"effect 1 (approve_spend): {approval['message']}"], warnings
    held = wait_run(kube, ns, child, reason_is("BudgetHold"), operator=operator)
    review = _hold_review(kube, ns, held)
    time.sleep(4)  # its gate looked again meanwhile (every 3 s): still held, undecided
    assert (succeeded(get(kube, ns, "Run", child)) or {}).get("reason") == "BudgetHold"
    assert (get(kube, ns, "Review", review["metadata"]["name"]) or {}).get("status", {}).get(
        "state"
    ) != "Decided"
