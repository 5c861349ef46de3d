"""Promotion gated by the real EvalRun controller: nothing stands in for a verdict (issue 39).

The real apiserver, the operator as a process, the runner in Jobs and the replay model. An
Agent ``triage`` with ``spec.promotion`` on an EvalSet whose cases are graded by the pure
graders (contains, regex; ``wants-refund`` critical). Its replayed answer is part of its
spec, so an edit to the Agent changes both its version and what it answers:

- an edit whose answer still passes every case: the candidate's EvalRun runs each case as a
  Run of each side (the candidate pinned at the new version, the baseline at the active
  one), the operator grades them, the verdict is ``Pass`` and the Agent is promoted: the
  next Run pins the new version;
- an edit whose answer drops the refund: its EvalRun runs only the candidate's cases (the
  active version's results are reused from the first evaluation), the critical case
  regresses, the verdict is ``Fail`` and the Agent stays on the active version with
  ``Promoted=False EvaluationFailed`` naming ``<evalset>/wants-refund``.

The web view shows both (per user, through SubjectAccessReviews the real apiserver answers;
Chromium plays the person behind the authenticating proxy): the EvalRun list and page with
its cases, verdict and the regressed case, and the Agent's promotion page with its active
version, its held candidate naming the regression and its history; a person without access
in the namespace gets "not found" for both.

``bench/bench_promotion.py`` times the first half (spec change → promoted) on 20 cases with
the same functions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.served import free_port

from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    debug,
    doc,
    example,
    finished,
    get,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)
from .test_webview_users import _as, _bind, _open, _role

AGENT = "triage"
EVAL_SET = "triage-cases"
#: Passes every case below.
GOOD = '{"category": "billing", "refund": true, "team": "payments"}'
#: Passes every case too, worded differently: a new version that is as good.
REWORDED = "category: billing; a refund is due; route to the payments team"
#: Drops the refund: the critical case regresses.
NO_REFUND = "category: billing; route to the payments team"

_GRADERS: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("says-billing", {"type": "contains", "expected": "billing"}, False),
    ("has-category", {"type": "regex", "pattern": "category"}, False),
    ("wants-refund", {"type": "contains", "expected": "refund"}, True),
    ("names-payments", {"type": "contains", "expected": "PAYMENTS", "ignoreCase": True}, False),
)


def cases(n: int) -> list[dict[str, Any]]:
    """``n`` cases cycling through the graders above (the first critical one once)."""
    out = []
    for i in range(n):
        name, grader, critical = _GRADERS[i % len(_GRADERS)]
        suffix = "" if i < len(_GRADERS) else f"-{i // len(_GRADERS)}"
        case: dict[str, Any] = {
            "name": name + suffix,
            "input": f"Ticket {i}: I was charged twice.",
            "grader": grader,
        }
        if critical and not suffix:
            case["critical"] = True
        out.append(case)
    return out


def triage(answer: str, min_cases: int) -> dict[str, Any]:
    """The Agent under promotion, answering ``answer`` (its prompt says so too)."""
    return agent_with(
        AGENT,
        [{"text": answer}],
        systemPrompt=f"Triage the ticket. Answer like: {answer}",
        promotion={
            "evalSets": [{"name": EVAL_SET}],
            "gate": {"minCases": min_cases, "maxNewRegressions": 0},
        },
    )


def promotion(kube: Kube, ns: str) -> dict[str, Any]:
    status = (get(kube, ns, "Agent", AGENT) or {}).get("status") or {}
    return dict(status.get("promotion") or {})


def promoted(kube: Kube, ns: str) -> dict[str, Any]:
    for cond in ((get(kube, ns, "Agent", AGENT) or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Promoted":
            return dict(cond)
    return {}


def setup(kube: Kube, ns: str, n: int) -> str:
    """The Workspace, the EvalSet of ``n`` cases and the Agent, promoted: its version."""
    apply(kube, ns, example("Workspace", "default"))
    wait_ready(kube, ns, "Workspace", "default")
    apply(kube, ns, doc("EvalSet", EVAL_SET, {"cases": cases(n)}))
    wait_ready(kube, ns, "EvalSet", EVAL_SET)
    apply(kube, ns, triage(GOOD, n))
    wait_for(
        lambda: promoted(kube, ns).get("status") == "True", 60, message=lambda: debug(kube, ns)
    )
    return str(promotion(kube, ns)["active"]["version"])


def edit_until_settled(
    kube: Kube, ns: str, answer: str, n: int, active: str, timeout: float
) -> tuple[str, dict[str, Any], float]:
    """Edit the Agent to answer ``answer``; wait until its candidate is decided (promoted,
    or ``Promoted=False``): (the candidate version, its EvalRun, seconds from the edit)."""
    start = time.monotonic()
    apply(kube, ns, triage(answer, n))

    def candidate() -> str | None:
        status = (get(kube, ns, "Agent", AGENT) or {}).get("status") or {}
        version = status.get("version")
        return str(version) if version and version != active else None

    version = wait_for(candidate, 60, message=lambda: debug(kube, ns))

    def settled() -> bool:
        now = promotion(kube, ns)
        if (now.get("active") or {}).get("version") == version:
            return True
        return promoted(kube, ns).get("status") == "False"

    wait_for(settled, timeout, interval=0.2, message=lambda: debug(kube, ns))
    took = time.monotonic() - start
    runs = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, "evalruns", label_selector=f"swarmkit.dev/candidate-version={version}"
    )["items"]
    assert len(runs) == 1, [r["metadata"]["name"] for r in runs]
    return version, runs[0], took


def case_runs(kube: Kube, ns: str, evalrun: str) -> list[dict[str, Any]]:
    items = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, "runs", label_selector=f"swarmkit.dev/eval-run={evalrun}"
    )["items"]
    return list(items)


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster, crds: Any) -> Iterator[OperatorProcess]:
    """The operator, with its per-user web view on a free loopback port."""
    port = free_port()
    env = {"SWARMKIT_WEB_VIEW": f"127.0.0.1:{port}", "SWARMKIT_METRICS_PORT": str(free_port())}
    op = OperatorProcess(cluster.kubeconfig, env=env)
    op.web_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    op.start()
    yield op
    op.stop()
    assert op.denials() == [], op.denials()


def pinned_run(kube: Kube, ns: str, name: str, operator: OperatorProcess) -> tuple[str, str]:
    """Run the Agent: (the version it pinned, its answer)."""
    apply(kube, ns, run_manifest(name, agent=AGENT))
    run = wait_run(kube, ns, name, finished, timeout=120, operator=operator)
    assert (succeeded(run) or {}).get("reason") == "Succeeded", debug(kube, ns, operator)
    return str(run["status"]["pinned"]["agents"][AGENT]), str(run["status"].get("output"))


def test_the_evalrun_controller_grades_the_candidate_then_promotes_or_holds(
    kube: Kube, namespace: str, operator: OperatorProcess, browser: Any
) -> None:
    ns, n = namespace, 4
    v1 = setup(kube, ns, n)

    # As good, worded differently: graded Pass by the operator, promoted.
    v2, first, took = edit_until_settled(kube, ns, REWORDED, n, v1, 300)
    print(f"\nspec change -> promoted ({n} cases): {took:.2f} s")
    status = first["status"]
    assert status["verdict"] == "Pass", status
    assert (status["candidate"]["version"], status["baseline"]["version"]) == (v2, v1)
    assert status["candidate"]["passed"] == status["baseline"]["passed"] == n, status
    runs = case_runs(kube, ns, first["metadata"]["name"])
    pinned = sorted(r["status"]["pinned"]["agents"][AGENT] for r in runs)
    assert pinned == sorted([v1] * n + [v2] * n)  # each case once on each side
    for case in status["cases"]:
        assert case["candidate"]["outcome"] == "Passed", case
        assert all(r in {x["metadata"]["name"] for x in runs} for r in case["candidate"]["runs"])
    now = promotion(kube, ns)
    assert now["active"]["version"] == v2 and now["active"]["evalRuns"] == [
        first["metadata"]["name"]
    ]
    cond = promoted(kube, ns)
    assert (cond["status"], cond["reason"]) == ("True", "Promoted"), cond
    assert pinned_run(kube, ns, "after-pass", operator) == (v2, REWORDED)

    # Drops the refund: the critical case regresses, the candidate is held.
    v3, second, _ = edit_until_settled(kube, ns, NO_REFUND, n, v2, 300)
    status = second["status"]
    assert status["verdict"] == "Fail", status
    assert status["regressed"] == ["wants-refund"], status
    assert "wants-refund" in status["verdictReason"]
    # The active version's results came from the first EvalRun: only the candidate ran.
    runs = case_runs(kube, ns, second["metadata"]["name"])
    assert sorted(r["status"]["pinned"]["agents"][AGENT] for r in runs) == [v3] * n
    assert all(c["baseline"].get("cached") for c in status["cases"]), status["cases"]
    cond = promoted(kube, ns)
    assert cond["reason"] == "EvaluationFailed", cond
    assert f"{EVAL_SET}/wants-refund" in cond["message"]
    now = promotion(kube, ns)
    assert now["active"]["version"] == v2
    assert (now["candidate"]["version"], now["candidate"]["regressions"]) == (
        v3,
        [f"{EVAL_SET}/wants-refund"],
    )
    assert pinned_run(kube, ns, "after-fail", operator) == (v2, REWORDED)

    web_view_shows(kube, ns, operator, browser, first, second, (v1, v2, v3))


def web_view_shows(
    kube: Kube,
    ns: str,
    operator: OperatorProcess,
    browser: Any,
    passed: dict[str, Any],
    failed: dict[str, Any],
    versions: tuple[str, str, str],
) -> None:
    """The EvalRuns and the promotion history in Chromium, as alice (may read EvalRuns and
    Agents in ``ns``) and as bob (may not)."""
    v1, v2, v3 = versions
    url = operator.web_url  # type: ignore[attr-defined]
    read = [{"apiGroups": ["swarmkit.dev"], "resources": ["evalruns", "agents"],
             "verbs": ["get", "list"]}]  # fmt: skip
    _role(kube, ns, "eval-reader", read)
    _bind(kube, ns, "eval-reader", "User", "alice")
    alice, bob = _as(browser, "alice", "system:authenticated"), _as(browser, "bob")
    good, bad = passed["metadata"]["name"], failed["metadata"]["name"]
    try:

        def listed() -> Any:
            page = _open(alice, f"{url}/evalruns", "promotion-alice-evalruns")
            if bad in page.content() and page.locator("tr.evalrun .badge.Fail").count():
                return page
            page.close()
            return None

        page = wait_for(listed, 30, message="the EvalRuns list to show both")
        rows = page.locator("tr.evalrun").all_inner_texts()
        assert len(rows) == 2 and any(good in r and "Pass" in r for r in rows), rows

        page = _open(alice, f"{url}/evalruns/{ns}/{bad}", "promotion-alice-failed-evalrun")
        assert "Fail" in page.locator("#verdict").inner_text()
        assert page.locator("#regressed").inner_text() == "wants-refund"
        case = page.locator("#case-wants-refund")
        assert case.locator(".change").inner_text() == "Regressed"
        assert case.locator(".candidate").inner_text().startswith("Failed")
        assert "(cached)" in case.locator(".baseline").inner_text()
        assert len(page.locator("tr.case").all()) == len(failed["status"]["cases"])
        assert v3 in page.locator("#side-candidate").inner_text()
        assert v2 in page.locator("#side-baseline").inner_text()

        # The Agent's page links to its promotion history.
        page = _open(alice, f"{url}/agents/{ns}/{AGENT}", "promotion-alice-agent")
        page.locator("#promotion").click()
        assert page.url == f"{url}/promotion/{ns}/agents/{AGENT}"
        assert v2 in page.locator("#active").inner_text()
        assert good in page.locator("#active").inner_text()
        candidate = page.locator("#candidate").inner_text()
        assert v3 in candidate and "Fail" in candidate
        assert page.locator("#regressions").inner_text() == f"{EVAL_SET}/wants-refund"
        assert "EvaluationFailed" in page.locator("#promoted").inner_text()
        history = page.locator("#history tr.previous").all_inner_texts()
        assert len(history) == 1 and v1 in history[0], history
        # A link from the EvalRun to its case Runs, and from the promotion to its EvalRun.
        page.locator(f"#active a[href='/evalruns/{ns}/{good}']").click()
        assert page.locator("#verdict").inner_text().startswith("Pass")

        # Bob may read nothing in the namespace: the pages read as absent.
        _open(bob, f"{url}/evalruns/{ns}/{good}", "promotion-bob-evalrun", status=404)
        _open(bob, f"{url}/promotion/{ns}/agents/{AGENT}", "promotion-bob-promotion", status=404)
        assert good not in _open(bob, f"{url}/evalruns", "promotion-bob-evalruns").content()
    finally:
        alice.close()
        bob.close()
