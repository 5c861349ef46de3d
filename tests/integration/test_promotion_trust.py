"""A promotion counts only the EvalRuns it created (issue 39): the adversary's lax EvalRun
under the planned name never promotes a candidate.

``mallory`` is bound (impersonated with ``kubectl --as``) to a Role that may create
EvalRuns, nothing more. The name a promotion gives its candidate's EvalRun is public
(``agent-<name>-<evalset>-<version8>``), so is the Agent's uid. Agent ``triage`` under
``spec.promotion`` is active at a first version; an edit makes a candidate that drops the
refund and names an EvalSet not created yet (no evaluation can start before it is):
evaluated for real against the active version, its critical case regresses (``Fail``).
mallory creates the EvalRun under the planned name first, labelled
``swarmkit.dev/promotion-of``, the Agent's uid copied into a controller ownerReference,
with criteria of her own (no comparison, any pass rate, one case): her EvalRun passes.
Before, that Pass promoted the candidate. Now the promotion counts only an EvalRun whose
uid it recorded in ``status.promotion.createdUids``: ``Promoted=False TamperedObject``
naming hers, a Warning Event, the active version unchanged. Once she deletes it, the
operator creates its own, records it, and its real evaluation fails the candidate.
"""

from __future__ import annotations

import json
from typing import Any

from swarmkit_api.promotion import PROMOTION_LABEL
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from swarmkit_operator.builders import promotion as pr

from .review_support import kubectl_as
from .runs_support import GROUP, VERSION, OperatorProcess, apply, debug, doc, get
from .test_promotion_graded import (
    AGENT,
    GOOD,
    NO_REFUND,
    cases,
    pinned_run,
    promoted,
    promotion,
    setup,
)
from .test_promotion_graded import triage as triage_agent
from .test_webview_users import _bind, _role

ADVERSARY = "mallory"
N = 4
#: The EvalSet the edit names: created once mallory's EvalRun is in place.
LATER = "later-cases"


def _edited() -> dict[str, Any]:
    """The Agent answering without the refund, its promotion on :data:`LATER`."""
    agent = triage_agent(NO_REFUND, N)
    agent["spec"]["promotion"]["evalSets"] = [{"name": LATER}]
    return agent


def _evalrun_creator(kube: Kube, ns: str) -> None:
    """mallory may create (and read) EvalRuns in ``ns``: nothing else."""
    rules = [{"apiGroups": [GROUP], "resources": ["evalruns"], "verbs": ["create", "get", "list"]}]
    _role(kube, ns, "evalrun-creator", rules)
    _bind(kube, ns, "evalrun-creator", "User", ADVERSARY)


def _her_evalrun(cluster: LocalCluster, ns: str, agent: dict[str, Any], version: str) -> str:
    """mallory's EvalRun of the candidate under the planned name, lax: its uid."""
    name = pr.eval_run_name("Agent", AGENT, version, LATER)
    manifest = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "EvalRun",
        "metadata": {
            "name": name,
            "labels": {
                PROMOTION_LABEL: pr.promotion_label("Agent", AGENT),
                pr.CANDIDATE_LABEL: version,
            },
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "Agent",
                    "name": AGENT,
                    "uid": agent["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "evalSetRef": {"name": LATER},
            "candidate": {"agentRef": {"name": AGENT}, "version": version},
            "compare": False,
            "criteria": {"minCases": 1, "minPassRate": 0.0},
        },
    }
    res = kubectl_as(
        cluster, ADVERSARY, "-n", ns, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)
    )
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout)["metadata"]["uid"])


def _verdict(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        obj = get(kube, ns, "EvalRun", name)
        return obj if ((obj or {}).get("status") or {}).get("verdict") else None

    found = wait_for(done, 300, interval=1, message=lambda: debug(kube, ns))
    assert found is not None
    return found


def _promoted_with(kube: Kube, ns: str, reason: str) -> dict[str, Any]:
    """The Agent's Promoted condition once its reason is ``reason``."""
    wait_for(
        lambda: promoted(kube, ns).get("reason") == reason, 60, message=lambda: debug(kube, ns)
    )
    return promoted(kube, ns)


def test_an_evalrun_someone_else_created_under_the_planned_name_never_promotes(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _evalrun_creator(kube, ns)
    active = setup(kube, ns, N)
    apply(kube, ns, _edited())

    def held() -> str | None:
        version = (promotion(kube, ns).get("candidate") or {}).get("version")
        return str(version) if promoted(kube, ns).get("reason") == "EvalSetNotFound" else None

    version = wait_for(held, 90, message=lambda: debug(kube, ns))
    assert version is not None and version != active
    planned = pr.eval_run_name("Agent", AGENT, version, LATER)
    hers = _her_evalrun(cluster, ns, get(kube, ns, "Agent", AGENT) or {}, version)
    apply(kube, ns, doc("EvalSet", LATER, {"cases": cases(N)}))

    # Her lax evaluation passes the candidate the real one fails.
    assert _verdict(kube, ns, planned)["status"]["verdict"] == "Pass"
    cond = _promoted_with(kube, ns, "TamperedObject")
    assert cond["status"] == "False", cond
    assert f"EvalRun {planned} exists but was not created by the operator" in cond["message"]
    now = promotion(kube, ns)
    assert now["active"]["version"] == active, now
    assert now["candidate"]["version"] == version and now["candidate"]["evalRuns"] == [], now
    assert "createdUids" not in now, now
    # Each version carries its render's full digest; a Run reads the active one by it.
    digest = (get(kube, ns, "Agent", AGENT) or {})["status"]["renderedSha256"]
    assert now["candidate"]["renderedSha256"] == digest, now
    assert len(now["active"]["renderedSha256"]) == 64 and now["active"]["renderedSha256"] != digest
    assert pinned_run(kube, ns, "meanwhile", operator) == (active, GOOD)
    assert (get(kube, ns, "EvalRun", planned) or {})["metadata"]["uid"] == hers  # left alone

    def warned() -> str | None:
        for e in kube.core.list_namespaced_event(ns).items:
            if e.involved_object.name == AGENT and e.reason == "TamperedObject":
                return f"{e.type}: {e.message}"
        return None

    event = wait_for(warned, 30, message="a TamperedObject Event on the Agent")
    assert event is not None and event.startswith("Warning: ") and planned in event, event

    # Hers gone, the operator's own: recorded, and its real evaluation fails the candidate.
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "evalruns", planned)

    def its_own() -> dict[str, Any] | None:
        obj = get(kube, ns, "EvalRun", planned)
        return obj if obj is not None and obj["metadata"]["uid"] != hers else None

    mine = wait_for(its_own, 60, message=lambda: debug(kube, ns))
    assert mine is not None
    assert _verdict(kube, ns, planned)["status"]["verdict"] == "Fail"
    cond = _promoted_with(kube, ns, "EvaluationFailed")
    now = promotion(kube, ns)
    assert now["createdUids"] == {f"EvalRun/{planned}": mine["metadata"]["uid"]}, now
    assert now["active"]["version"] == active and now["candidate"]["evalRuns"] == [planned]
    assert f"{LATER}/wants-refund" in cond["message"]
