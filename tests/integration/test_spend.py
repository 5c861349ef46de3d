"""Spend budgets end to end: the real apiserver, the operator under the chart's RBAC, the runner.

The Workspace's replay provider carries USD prices and the agents' scripted turns report
usage (as a model API would), so every cost below is exact and worked out by hand:
1000 input + 100 output tokens at 3 / 15 USD per million = 0.0045 USD per turn.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from .review_support import (
    bind_people,
    decide,
    review_admission,  # noqa: F401  (fixture)
)
from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    doc,
    epoch,
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


def _priced_workspace(kube: Kube, ns: str) -> None:
    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            for provider in doc["spec"]["modelProviders"]:
                if provider["type"] == "replay":
                    provider["prices"] = PRICES
        return doc

    apply_examples(kube, ns, edit)
    wait_ready(kube, ns, "Workspace", "default")


def _agent(kube: Kube, ns: str, name: str, turns: int = 1, sleep: int = 0, **labels: str) -> None:
    replay: list[dict[str, Any]] = []
    if sleep:
        call = {"name": "bash", "arguments": {"command": f"sleep {sleep}", "timeout_seconds": 60}}
        replay.append({"toolCalls": [call], "usage": USAGE})
    for _ in range(turns - 1):
        replay.append(
            {"toolCalls": [{"name": "bash", "arguments": {"command": "true"}}], "usage": USAGE}
        )
    replay.append({"text": "done", "usage": USAGE})
    doc = agent_with(name, replay, bash=True, model={"provider": "replay", "maxTokens": 1000})
    if labels:
        doc["metadata"]["labels"] = labels
    apply(kube, ns, doc)
    wait_ready(kube, ns, "Agent", name)


def _quota(name: str, **spec: Any) -> dict[str, Any]:
    return doc("SpendQuota", name, {"window": "daily", **spec})


def _condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return None


def test_run_status_shows_cost_and_a_cap_stops_it_naming_the_call(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _priced_workspace(kube, ns)
    _agent(kube, ns, "spender", turns=4)
    create(kube, ns, run_manifest("paid", agent="spender"))
    # the 4th call's worst case: 3 x 0.0045 + (1000 x 3 + 1000 x 15) / 1e6 = 0.0315 > 0.03
    create(kube, ns, run_manifest("capped", agent="spender", maxCost="0.03"))

    paid = wait_run(kube, ns, "paid", finished, operator=operator)
    assert succeeded(paid)["reason"] == "Succeeded", debug(kube, ns, operator)  # type: ignore[index]
    usage = paid["status"]["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (4000, 400)
    assert (usage["cost"], usage["currency"], usage["costUnknown"]) == ("0.018", "USD", False)
    assert usage["models"] == [
        {
            "agent": "spender",
            "provider": "replay",
            "model": "replay",
            "inputTokens": 4000,
            "cachedInputTokens": 0,
            "outputTokens": 400,
            "cost": "0.018",
            "currency": "USD",
            "costUnknown": False,
        }
    ]

    capped = wait_run(kube, ns, "capped", finished, operator=operator)
    cond = succeeded(capped)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "BudgetExceeded")
    assert cond["message"] == (
        "model call 4 (agent spender, replay/replay, maxTokens 1000) could bring the run's "
        "cost to 0.0315 USD, over its maxCost (0.03 USD); 0.0135 USD spent so far"
    )
    assert capped["status"]["usage"]["cost"] == "0.0135"


def test_cached_tokens_are_priced_apart_and_an_unpriced_model_costs_unknown_never_zero(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            for provider in doc["spec"]["modelProviders"]:
                if provider["type"] == "replay":
                    provider["prices"] = {**PRICES, "cachedInput": "0.3"}
            doc["spec"]["modelProviders"].append({"name": "unpriced", "type": "replay"})
        return doc

    apply_examples(kube, ns, edit)
    wait_ready(kube, ns, "Workspace", "default")
    cached = {"inputTokens": 2200, "cachedInputTokens": 1200, "outputTokens": 150}
    apply(kube, ns, agent_with("cacher", [{"text": "hit", "usage": cached}]))
    free = agent_with("free", [{"text": "free?", "usage": USAGE}], model={"provider": "unpriced"})
    apply(kube, ns, free)
    for name in ("cacher", "free"):
        wait_ready(kube, ns, "Agent", name)
    create(kube, ns, run_manifest("cached", agent="cacher"))
    create(kube, ns, run_manifest("unpriced", agent="free"))
    create(kube, ns, run_manifest("unpriced-capped", agent="free", maxCost="1"))

    done = wait_run(kube, ns, "cached", finished, operator=operator)
    assert succeeded(done)["reason"] == "Succeeded", debug(kube, ns, operator)  # type: ignore[index]
    # 1000 uncached x 3 + 1200 cached x 0.3 + 150 x 15 = 5610 micro-USD
    usage = done["status"]["usage"]
    assert (usage["inputTokens"], usage["cachedInputTokens"], usage["outputTokens"]) == (
        2200,
        1200,
        150,
    )
    assert (usage["cost"], usage["currency"], usage["costUnknown"]) == ("0.00561", "USD", False)

    done = wait_run(kube, ns, "unpriced", finished, operator=operator)
    assert succeeded(done)["reason"] == "Succeeded"  # type: ignore[index]
    usage = done["status"]["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (1000, 100)
    assert usage.get("cost") is None and usage["costUnknown"] is True
    [model] = usage["models"]
    assert (model["provider"], model.get("cost"), model["costUnknown"]) == (
        "unpriced",
        None,
        True,
    )
    # under a maxCost, a call whose cost cannot be bounded is not made
    done = wait_run(kube, ns, "unpriced-capped", finished, operator=operator)
    cond = succeeded(done)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "BudgetExceeded")
    assert cond["message"].startswith(
        "model call 1 (agent free) goes to provider unpriced, which has no prices: its cost "
        "cannot be bounded by maxCost (1"
    ), cond["message"]


def test_twenty_runs_at_once_never_reserve_past_the_limit(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _priced_workspace(kube, ns)
    _agent(kube, ns, "sleepy", sleep=2)
    # each Run reserves 0.1; 0.5 covers five at a time; each spends 0.009 in the end
    create(kube, ns, _quota("team", cost="0.5", currency="USD"))
    names = [f"r{i:02d}" for i in range(20)]
    for name in names:
        create(kube, ns, run_manifest(name, agent="sleepy", maxCost="0.1"))

    seen_used: list[str] = []
    queued: set[str] = set()

    def all_done() -> bool:
        q = get(kube, ns, "SpendQuota", "team")
        if q and q.get("status", {}).get("used"):
            seen_used.append(q["status"]["used"])
        done = 0
        for name in names:
            run = get(kube, ns, "Run", name)
            cond = succeeded(run)
            if cond and cond["reason"] == "BudgetExhausted":
                queued.add(name)
            done += finished(run or {})
        return done == len(names)

    wait_for(all_done, 240, interval=0.5, message=lambda: debug(kube, ns, operator))
    runs = [get(kube, ns, "Run", n) for n in names]
    assert all(succeeded(r)["reason"] == "Succeeded" for r in runs)  # type: ignore[index]
    # spent + reserved never went past the limit (as polled) ...
    assert seen_used and max(float(u) for u in seen_used) <= 0.5
    # ... nor did more than five Runs hold a Job at the same time (from their own status)
    spans = [(epoch(r["status"]["startTime"]), epoch(r["status"]["completionTime"])) for r in runs]  # type: ignore[index]
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most <= 5, spans
    assert len(queued) >= 10  # the rest waited for room
    quota = get(kube, ns, "SpendQuota", "team")
    assert quota is not None
    status = quota["status"]
    assert (status["spent"], status["reserved"], status["used"]) == ("0.18", "0", "0.18")
    assert sorted(e["run"] for e in status["entries"]) == names
    assert {e["state"] for e in status["entries"]} == {"spent"}


def test_a_queued_run_starts_when_the_limit_is_raised_and_fail_ends_it(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _priced_workspace(kube, ns)
    _agent(kube, ns, "one-shot")
    create(kube, ns, _quota("small", cost="0.05", currency="USD", warningPercent=50))
    create(kube, ns, run_manifest("waits", agent="one-shot", maxCost="0.1"))

    waiting = wait_run(kube, ns, "waits", reason_is("BudgetExhausted"), operator=operator)
    cond = succeeded(waiting)
    assert cond is not None and cond["status"] == "Unknown"
    assert cond["message"] == (
        "SpendQuota small cannot cover it (cost: needs 0.1 USD, 0.05 of 0.05 remaining); "
        "waits until it fits"
    )
    assert not waiting["status"].get("jobName")
    time.sleep(4)  # rechecked meanwhile: still waiting, no Job
    assert succeeded(get(kube, ns, "Run", "waits"))["reason"] == "BudgetExhausted"  # type: ignore[index]

    apply(kube, ns, _quota("small", cost="1", currency="USD", warningPercent=5))
    done = wait_run(kube, ns, "waits", finished, timeout=60, operator=operator)
    assert succeeded(done)["reason"] == "Succeeded"  # type: ignore[index]
    quota = get(kube, ns, "SpendQuota", "small")
    assert quota is not None
    assert (quota["status"]["spent"], quota["status"]["remaining"]) == ("0.0045", "0.9955")
    assert "spendReservations" not in done["status"]

    # warningPercent 5: the 10% reservation crossed it
    # settled at 0.45% it is below again; the Event says when the reservation crossed it
    warning = _condition(quota, "BudgetWarning")
    assert warning is not None and (warning["status"], warning["reason"]) == (
        "False",
        "BelowThreshold",
    )
    events = kube.core.list_namespaced_event(ns, field_selector="involvedObject.name=small")
    assert any(e.reason == "ThresholdReached" and e.type == "Warning" for e in events.items)

    apply(kube, ns, _quota("small", cost="0.05", currency="USD", onExhausted="fail"))
    create(kube, ns, run_manifest("refused", agent="one-shot", maxCost="0.1"))
    failed = wait_run(kube, ns, "refused", finished, operator=operator)
    cond = succeeded(failed)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "BudgetExhausted")
    assert cond["message"].startswith("SpendQuota small cannot cover it (cost: needs 0.1 USD")


def test_a_queued_run_starts_when_its_rolling_window_turns(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    """The window turns on the real clock, no clock injected into the operator: a Run's
    real spend entry is aged (its ``at`` set to 1 h - 25 s ago, as if it ended then), so it
    leaves the quota's one-hour rolling window 25 s later, and a Run queued behind it starts
    by itself."""
    ns = namespace
    _priced_workspace(kube, ns)
    _agent(kube, ns, "one-shot")
    create(kube, ns, _quota("hourly", cost="0.1", currency="USD", window="rollingHours", hours=1))
    create(kube, ns, run_manifest("earlier", agent="one-shot", maxCost="0.1"))
    done = wait_run(kube, ns, "earlier", finished, operator=operator)
    assert succeeded(done)["reason"] == "Succeeded"  # type: ignore[index]

    def age() -> datetime:
        quota = get(kube, ns, "SpendQuota", "hourly") or {}
        entries = quota["status"]["entries"]
        assert [(e["run"], e["state"]) for e in entries] == [("earlier", "spent")]
        aged_at = datetime.now(UTC) - timedelta(hours=1) + timedelta(seconds=25)
        entries[0]["at"] = aged_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        rv = quota["metadata"]["resourceVersion"]
        body = {"metadata": {"resourceVersion": rv}, "status": {"entries": entries}}
        kube.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "spendquotas", "hourly", body
        )  # refused (409) if the operator wrote it meanwhile: retried
        return aged_at.replace(microsecond=0)

    aged_at = wait_for(age, 30, message="the spent entry to be aged")
    # 0.0955 remains of 0.1 until the aged spend leaves the window: 0.099 waits
    create(kube, ns, run_manifest("later", agent="one-shot", maxCost="0.099"))
    waiting = wait_run(kube, ns, "later", reason_is("BudgetExhausted"), operator=operator)
    assert succeeded(waiting)["message"] == (  # type: ignore[index]
        "SpendQuota hourly cannot cover it (cost: needs 0.099 USD, 0.0955 of 0.1 remaining); "
        "waits until it fits"
    )
    done = wait_run(kube, ns, "later", finished, timeout=90, operator=operator)
    assert succeeded(done)["reason"] == "Succeeded"  # type: ignore[index]
    turned = aged_at + timedelta(hours=1)
    assert epoch(done["status"]["startTime"]) >= turned.timestamp() - 1, (done["status"], turned)
    quota = get(kube, ns, "SpendQuota", "hourly") or {}
    status = quota["status"]
    assert epoch(status["windowStart"]) >= aged_at.timestamp()  # (whole seconds)
    # only the later Run's spend counts now; the earlier one's is outside the window
    assert (status["spent"], status["used"], status["remaining"]) == ("0.0045", "0.0045", "0.0955")


def test_bad_input_selectors_and_currency(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _priced_workspace(kube, ns)
    _agent(kube, ns, "labelled", team="research")
    with pytest.raises(ApiException) as info:
        create(kube, ns, _quota("neg", cost="-1", currency="USD"))
    assert info.value.status == 422 and "spec.cost" in info.value.body
    with pytest.raises(ApiException) as info:
        create(kube, ns, _quota("rolling", tokens=10, window="rollingHours"))
    assert "hours is required by window rollingHours" in info.value.body

    create(kube, ns, _quota("nobody", tokens=10, selector={"matchLabels": {"team": "ops"}}))
    create(
        kube,
        ns,
        _quota("euro", cost="5", currency="EUR", selector={"matchLabels": {"team": "research"}}),
    )

    def unmatched() -> dict[str, Any] | None:
        return _condition(get(kube, ns, "SpendQuota", "nobody"), "SelectorUnmatched")

    cond = wait_for(unmatched, 30, message=lambda: debug(kube, ns, operator))
    assert (cond["status"], cond["reason"]) == ("True", "NoMatch")
    euro = wait_for(
        lambda: _condition(get(kube, ns, "SpendQuota", "euro"), "SelectorUnmatched"), 30
    )
    assert (euro["status"], euro["reason"]) == ("False", "Matched")

    # the labelled agent's Run is covered by the EUR quota; the Workspace prices in USD
    create(kube, ns, run_manifest("mixed", agent="labelled", maxCost="0.1"))
    run = wait_run(kube, ns, "mixed", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "ValidationFailed"
    assert cond["message"] == "SpendQuota euro counts EUR, the Workspace prices its models in USD"
    # the quota the selector does not cover (nobody, 10 tokens) never held it back
    assert get(kube, ns, "SpendQuota", "nobody")["status"]["usedTokens"] == 0  # type: ignore[index]


@pytest.mark.usefixtures("review_admission")
def test_a_hold_opens_a_spend_review_a_reviewer_clears(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _priced_workspace(kube, ns)
    bind_people(cluster, ns)
    _agent(kube, ns, "one-shot")
    create(kube, ns, _quota("held", cost="0.05", currency="USD", onExhausted="hold"))
    create(kube, ns, run_manifest("asks", agent="one-shot", maxCost="0.1"))
    create(kube, ns, run_manifest("refused", agent="one-shot", maxCost="0.1"))

    waiting = wait_run(kube, ns, "asks", reason_is("BudgetHold"), operator=operator)
    review_name = f"asks-{waiting['metadata']['uid'][:5]}-spend"
    assert succeeded(waiting)["message"] == (  # type: ignore[index]
        "SpendQuota held cannot cover it (cost: needs 0.1 USD, 0.05 of 0.05 remaining); "
        f"held: Review {review_name} (kind spend) asks a person to let it start past the limit"
    )
    review = wait_for(lambda: get(kube, ns, "Review", review_name), 30)
    request = review["spec"]["request"]
    assert (request["kind"], request["runRef"]) == ("spend", {"name": "asks"})
    assert request["question"].startswith("Let Run asks start past SpendQuota held?")
    assert review["metadata"]["ownerReferences"][0]["uid"] == waiting["metadata"]["uid"]
    # a forged decider is refused by the admission policy, as for every Review
    forged = decide(cluster, ns, review_name, "alice", "approve", decided_by="mallory")
    assert forged.returncode != 0 and "decidedBy" in forged.stderr

    assert decide(cluster, ns, review_name, "alice", "approve").returncode == 0
    done = wait_run(kube, ns, "asks", finished, timeout=60, operator=operator)
    assert succeeded(done)["reason"] == "Succeeded"  # type: ignore[index]
    review = get(kube, ns, "Review", review_name)
    assert review is not None
    assert (review["status"]["state"], review["status"]["decidedBy"]) == ("Decided", "alice")
    quota = get(kube, ns, "SpendQuota", "held")
    assert quota is not None
    [entry] = [e for e in quota["status"]["entries"] if e["run"] == "asks"]
    assert (entry["state"], entry["cost"], entry.get("held")) == ("spent", "0.0045", True)

    refused = wait_run(kube, ns, "refused", reason_is("BudgetHold"), operator=operator)
    other = f"refused-{refused['metadata']['uid'][:5]}-spend"
    wait_for(lambda: get(kube, ns, "Review", other), 30)
    assert decide(cluster, ns, other, "bob", "reject").returncode == 0
    failed = wait_run(kube, ns, "refused", finished, timeout=60, operator=operator)
    cond = succeeded(failed)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "BudgetExhausted")
    assert cond["message"].endswith(f"its hold (Review {other}) was rejected by bob")


def test_a_reservation_made_before_a_sigkill_is_found_again_not_counted_twice(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _priced_workspace(kube, ns)
    _agent(kube, ns, "one-shot")
    create(kube, ns, _quota("team", cost="0.15", currency="USD"))
    wait_for(lambda: (get(kube, ns, "SpendQuota", "team") or {}).get("status"), 30)
    operator.kill()  # SIGKILL: no graceful shutdown, the Lease is left to expire
    run = create(kube, ns, run_manifest("survivor", agent="one-shot", maxCost="0.1"))
    uid = run["metadata"]["uid"]
    # What the killed leader had written between its reservation and the Job: the intent
    # on the Run, its entry on the quota (exactly as the operator writes them).
    status = {"spendReservations": ["team"]}
    kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, "runs", "survivor", {"status": status}
    )
    entry = {"run": "survivor", "uid": uid, "state": "reserved", "cost": "0.1",
             "tokens": 200000, "at": "2099-01-01T00:00:00Z"}  # fmt: skip
    kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, "spendquotas", "team", {"status": {"entries": [entry]}}
    )
    # a second Run that fits only if the first is not counted twice (0.1 + 0.1 > 0.15
    # until the survivor settles at 0.0045)
    create(kube, ns, run_manifest("second", agent="one-shot", maxCost="0.1"))
    operator.start()

    done = wait_run(kube, ns, "survivor", finished, timeout=90, operator=operator)
    assert succeeded(done)["reason"] == "Succeeded"  # type: ignore[index]
    second = wait_run(kube, ns, "second", finished, timeout=90, operator=operator)
    assert succeeded(second)["reason"] == "Succeeded"  # type: ignore[index]
    quota = get(kube, ns, "SpendQuota", "team")
    assert quota is not None
    entries = quota["status"]["entries"]
    assert sorted((e["run"], e["state"], e["cost"]) for e in entries) == [
        ("second", "spent", "0.0045"),
        ("survivor", "spent", "0.0045"),
    ]
    assert (quota["status"]["spent"], quota["status"]["reserved"]) == ("0.009", "0")
