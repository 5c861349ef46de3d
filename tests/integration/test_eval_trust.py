"""An EvalRun grades and books only the Runs it can prove it created (issues 39 and 46).

``eve`` holds Kubernetes' built-in ``edit`` role with the chart's edit rules (impersonated
with ``kubectl --as``): she may create Runs, with any labels and any ownerReference. The
EvalRun's planned Run names and labels are public (``<evalrun>-<case>-c0``,
``swarmkit.dev/eval-run``) and its uid is readable. Before, a Run she created under a
planned name was graded as the candidate's answer (a forged Pass, then a promotion), and
any Run bearing the label skipped its own SpendQuota reservation while the EvalRun's was
live. Now the EvalRun records the uid of each Run it creates in ``status.createdUids``
(only the operator writes a status): her Run is never graded (the case is ``Errored``,
``TamperedObject`` naming it, so the verdict is never Pass), and it reserves its own cap
like every Run (refused when it does not fit) while the EvalRun books only its own Runs,
and no promotion follows from a Run she made.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from swarmkit_operator.builders import eval_runs as er

from .review_support import EDITOR, bind_people, kubectl_as
from .review_support import review_admission as review_admission
from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    apply,
    debug,
    doc,
    finished,
    get,
    succeeded,
    wait_run,
)
from .test_evals import CASES, condition, eval_runs_of, settled_entries
from .test_evals import agents as agents
from .test_promotion_graded import (
    AGENT,
    EVAL_SET,
    REWORDED,
    cases,
    promoted,
    promotion,
    setup,
    triage,
)

pytestmark = pytest.mark.usefixtures("review_admission")

#: Without a baseline, what a Pass needs: the six cases' pass-rate interval above 0.3
#: (six passes out of six clear it; an errored case never passes).
PASSABLE = {"minPassRate": 0.3, "minCases": 1}


def _eves_run(
    cluster: LocalCluster,
    ns: str,
    name: str,
    labels: dict[str, str],
    spec: dict[str, Any],
    **meta: Any,
) -> str:
    """eve creates Run ``name`` (``meta``: more of its metadata): its uid."""
    manifest = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Run",
        "metadata": {"name": name, "labels": labels, **meta},
        "spec": spec,
    }
    res = kubectl_as(
        cluster, EDITOR, "-n", ns, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)
    )
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout)["metadata"]["uid"])


def _forged_case_run(
    cluster: LocalCluster, ns: str, evalrun: dict[str, Any], case: str, spec: dict[str, Any]
) -> tuple[str, str]:
    """eve creates the Run the EvalRun plans for ``case`` (candidate side, trial 0) first,
    with its labels and the EvalRun's uid in a controller ownerReference: (name, uid)."""
    name = evalrun["metadata"]["name"]
    planned = er.run_name(name, "case", "candidate", case, 0)
    labels = {
        er.EVAL_RUN_LABEL: name,
        er.EVAL_ROLE_LABEL: "case",
        er.EVAL_SIDE_LABEL: "candidate",
        er.EVAL_CASE_LABEL: case,
        er.EVAL_TRIAL_LABEL: "0",
    }
    owner = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "EvalRun",
        "name": name,
        "uid": evalrun["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": False,
    }
    return planned, _eves_run(cluster, ns, planned, labels, spec, ownerReferences=[owner])


def _verdict(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        obj = get(kube, ns, "EvalRun", name)
        return obj if ((obj or {}).get("status") or {}).get("verdict") else None

    found = wait_for(
        done, 300, interval=1, message=lambda: json.dumps(get(kube, ns, "EvalRun", name))
    )
    assert found is not None
    return found


def test_a_case_run_an_editor_created_first_is_never_graded(
    cluster: LocalCluster, kube: Kube, agents: str
) -> None:
    """eve copies the waiting EvalRun's uid into a controller ownerReference of her own Run
    under the planned name of its critical case, with its labels and her input. The
    candidate's answer would pass that case, so graded it would be a Pass made by her; it
    is never graded: the case is Errored naming her Run, the verdict is not Pass, her Run
    is neither recorded nor changed, and a Warning Event says so."""
    ns = agents
    bind_people(cluster, ns)
    name = "forged"
    spec = {
        "evalSetRef": {"name": "later-cases"},  # not there yet: the EvalRun waits
        "candidate": {"agentRef": {"name": "triage-v2"}},
        "compare": False,
        "criteria": PASSABLE,
    }
    apply(kube, ns, doc("EvalRun", name, spec))
    wait_for(
        lambda: (
            condition(get(kube, ns, "EvalRun", name), "Succeeded").get("reason")
            == "EvalSetNotFound"
        ),
        60,
        message=lambda: debug(kube, ns),
    )
    evalrun = get(kube, ns, "EvalRun", name) or {}
    version = (get(kube, ns, "Agent", "triage-v2") or {})["status"]["version"]
    spec = {"agentRef": {"name": "triage-v2"}, "version": version, "input": "Say: refund."}
    planned, eves = _forged_case_run(cluster, ns, evalrun, "wants-refund", spec)
    apply(kube, ns, doc("EvalSet", "later-cases", {"cases": CASES}))
    wait_run(kube, ns, planned, finished, timeout=120)  # her Run itself runs to its end

    status = _verdict(kube, ns, name)["status"]
    assert status["verdict"] == "Inconclusive", json.dumps(status, indent=1)[:3000]
    shown = json.dumps(status, indent=1)[:6000]
    assert status["errored"] == ["wants-refund"], shown
    assert "wants-refund" in status["verdictReason"], shown
    result = next(c for c in status["cases"] if c["name"] == "wants-refund")["candidate"]
    assert result["outcome"] == "Errored", result
    assert result["reasoning"].startswith(f"TamperedObject: Run {planned} exists but"), result
    assert "ownerReference was copied" in result["reasoning"], result
    # The five other cases: the EvalRun's own Runs, recorded, graded.
    others = {er.run_name(name, "case", "candidate", c["name"], 0) for c in CASES} - {planned}
    recorded = status["createdUids"]
    assert set(recorded) == {f"Run/{r}" for r in others}, recorded
    assert all(
        c["candidate"]["outcome"] == "Passed"
        for c in status["cases"]
        if c["name"] != "wants-refund"
    )
    assert (get(kube, ns, "Run", planned) or {})["metadata"]["uid"] == eves  # left as it was
    assert len(eval_runs_of(kube, ns, name)) == 6

    def warned() -> str | None:
        for e in kube.core.list_namespaced_event(ns).items:
            if e.involved_object.name == name and e.reason == "TamperedObject":
                return str(e.type) + ": " + str(e.message)
        return None

    event = wait_for(warned, 30, message="a TamperedObject Event on the EvalRun")
    assert event is not None and event.startswith("Warning: ") and planned in event, event


def test_a_labelled_run_of_an_editor_reserves_its_own_cap(
    cluster: LocalCluster, kube: Kube, agents: str
) -> None:
    """While the EvalRun's up-front reservation is live, eve's Run bearing its label
    reserves its own cap like every Run, and the quota refuses it (the EvalRun's 0.60
    worst case and her 0.50 exceed 1.00); the EvalRun books what its own six Runs spent,
    nothing of hers."""
    ns = agents
    bind_people(cluster, ns)
    apply(kube, ns, doc("EvalSet", "triage-cases", {"cases": CASES}))
    quota = {"window": "daily", "cost": "1.00", "currency": "USD", "onExhausted": "fail"}
    apply(kube, ns, doc("SpendQuota", "evals", quota))
    name = "booked"
    spec = {
        "evalSetRef": {"name": "triage-cases"},
        "candidate": {"agentRef": {"name": "triage-v2"}},
        "compare": False,
        "criteria": PASSABLE,
        "maxCostPerRun": "0.10",
        "parallelism": 1,  # six Runs one after the other: the reservation stays live
    }
    apply(kube, ns, doc("EvalRun", name, spec))

    def reserved() -> bool:
        status = (get(kube, ns, "EvalRun", name) or {}).get("status") or {}
        return status.get("spendReservations") == ["evals"]

    wait_for(reserved, 120, interval=0.2, message=lambda: debug(kube, ns))
    labels = {er.EVAL_RUN_LABEL: name, er.EVAL_ROLE_LABEL: "case"}
    run_spec = {"agentRef": {"name": "triage-v2"}, "input": "Hello", "maxCost": "0.50"}
    _eves_run(cluster, ns, "eves-run", labels, run_spec)
    run = wait_run(kube, ns, "eves-run", finished, timeout=120)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", "BudgetExhausted"), cond
    assert "SpendQuota evals" in cond["message"], cond
    assert (get(kube, ns, "EvalRun", name) or {}).get("status", {}).get("completionTime") is None

    done = _verdict(kube, ns, name)
    assert done["status"]["verdict"] == "Pass", json.dumps(done["status"], indent=1)[:3000]
    assert "Run/eves-run" not in done["status"]["createdUids"]
    entries = settled_entries(kube, ns, "evals")
    # Six Runs at 0.0045 USD each, the EvalRun's; eve's refusal released what it held.
    assert [(e["run"], e["cost"]) for e in entries] == [("EvalRun/booked", "0.027")], entries


def test_no_promotion_follows_from_a_case_run_an_editor_created(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    """Agent ``triage`` under ``spec.promotion``, active at a first version; an edit makes
    a candidate whose answer passes every case (graded, it would be promoted: the first
    half of test_promotion_graded.py). Its EvalRun waits for the EvalSet (a judge Skill it
    names is missing); eve creates the critical case's Run under its planned name with the
    EvalRun's labels and uid and her input. Once the EvalSet is Ready again her Run is not
    graded: the case is Errored naming it, the verdict is Inconclusive, and the candidate
    stays a candidate (``Promoted=False Inconclusive``), the active version unchanged."""
    ns = namespace
    bind_people(cluster, ns)
    n = 4
    active = setup(kube, ns, n)
    judged = {"type": "judgeSkill", "skill": "not-there", "agent": "judge"}
    broken = [*cases(n), {"name": "judged", "input": "x", "grader": judged}]
    apply(kube, ns, doc("EvalSet", EVAL_SET, {"cases": broken}))
    wait_for(
        lambda: condition(get(kube, ns, "EvalSet", EVAL_SET), "Ready").get("status") == "False"
    )
    apply(kube, ns, triage(REWORDED, n))

    def waiting() -> dict[str, Any] | None:
        items = kube.custom.list_namespaced_custom_object(
            GROUP, VERSION, ns, "evalruns", label_selector="swarmkit.dev/candidate-version"
        )["items"]
        for item in items:
            if condition(item, "Succeeded").get("reason") == "EvalSetNotReady":
                return dict(item)
        return None

    evalrun = wait_for(waiting, 90, message=lambda: debug(kube, ns))
    assert evalrun is not None
    name, version = evalrun["metadata"]["name"], evalrun["spec"]["candidate"]["version"]
    spec = {"agentRef": {"name": AGENT}, "version": version, "input": "Say: a refund."}
    planned, _ = _forged_case_run(cluster, ns, evalrun, "wants-refund", spec)
    apply(kube, ns, doc("EvalSet", EVAL_SET, {"cases": cases(n)}))

    status = _verdict(kube, ns, name)["status"]
    assert status["verdict"] == "Inconclusive", json.dumps(status, indent=1)[:3000]
    result = next(c for c in status["cases"] if c["name"] == "wants-refund")["candidate"]
    assert result["outcome"] == "Errored" and planned in result["reasoning"], result
    assert result["reasoning"].startswith("TamperedObject: "), result
    wait_for(
        lambda: promoted(kube, ns).get("status") == "False", 60, message=lambda: debug(kube, ns)
    )
    cond = promoted(kube, ns)
    assert cond["reason"] == "Inconclusive", cond
    now = promotion(kube, ns)
    assert now["active"]["version"] == active and now["candidate"]["version"] == version, now
