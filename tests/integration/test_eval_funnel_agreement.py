"""A judge skill's agreement with people's Funnel decisions, end to end (issue 39).

The real apiserver with the chart's admission policies, the operator as a process, the
runner in Jobs, a scripted model API, people as apiserver identities. A Topology node is
gated by a Funnel whose judge layer is the decision skill ``notes-judge`` (threshold 0.8,
no retries: an artifact the judge fails reaches people too) and whose approval takes one
release lead. An EvalSet judges one case with the same skill (``judgeSkill``, judge Agent
``skill-judge``) under ``minKappa: 0.5, minLabels: 4`` and has no human labels:

- before any Funnel decision its EvalRun is ``Inconclusive TooFewLabels``;
- three gated Runs: the judge passes an artifact alice approves; the judge fails one
  (retries exhausted) alice rejects; the judge passes one bob sends back for a revision,
  and passes the redraft alice approves. Four pairs: agreed 3, kappa 0.5 (p_o 3/4,
  p_e 1/2). The EvalSet's ``status.funnelAgreement`` follows each decision as it is
  recorded, and an editor cannot add one (a Run's status is the operator's);
- the next EvalRun's judge is calibrated by those decisions alone and the verdict is
  ``Pass``, with the agreement it used in ``status.judges[].funnelDecisions``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.model_server import ScriptedModelServer, text

from .funnel_support import (  # noqa: F401  (run_author: a fixture)
    BETTER,
    GATE,
    GOOD,
    JUDGE_SKILL,
    create_run_as,
    gated_topology,
    judge_skill,
    judged,
    leads_approve,
    run_author,
    sign,
    writer,
)
from .review_support import (
    EDITOR,
    bind_people,
    kubectl_as,
    review_admission,  # noqa: F401  (fixture)
)
from .runs_support import (
    OperatorProcess,
    agent_with,
    apply,
    debug,
    doc,
    example,
    finished,
    get,
    reason_is,
    succeeded,
    wait_ready,
    wait_run,
)

SKILL = JUDGE_SKILL
EVAL_SET = "notes-cases"


def _setup(kube: Kube, ns: str, cluster: LocalCluster, model_url: str) -> None:
    workspace = example("Workspace", "default")
    workspace["spec"]["modelProviders"].append(
        {"name": "m", "type": "openai", "baseUrl": model_url, "defaultModel": "t"}
    )
    apply(kube, ns, workspace)
    wait_ready(kube, ns, "Workspace", "default")
    bind_people(cluster, ns)
    apply(kube, ns, judge_skill())
    apply(kube, ns, writer())
    funnel = {
        "judge": {"skill": SKILL, "threshold": 0.8},
        "approve": leads_approve({"quorum": "any"}),
        "maxRetries": 0,  # what the judge fails goes to people at once (onExhausted: approve)
    }
    apply(kube, ns, doc("Funnel", GATE, funnel))
    apply(kube, ns, gated_topology())
    # The EvalSet's side: a candidate answering on replay, and a judge Agent for the skill.
    apply(kube, ns, agent_with("triage", [{"text": "category: billing"}]))
    confident = '{"verdict": "pass", "confidence": 0.92, "reasoning": "a billing question"}'
    apply(kube, ns, agent_with("skill-judge", [{"text": confident}]))
    for name in ("writer", "triage", "skill-judge"):
        wait_ready(kube, ns, "Agent", name)
    wait_ready(kube, ns, "Topology", "notes")
    grader = {"type": "judgeSkill", "skill": SKILL, "agent": "skill-judge"}
    cases = [
        {"name": "says-billing", "input": "Ticket 1: charged twice.",
         "grader": {"type": "contains", "expected": "billing"}},
        {"name": "skill-judged", "input": "Ticket 2: charged twice.",
         "grader": {**grader, "minKappa": 0.5, "minLabels": 4}},
    ]  # fmt: skip
    apply(kube, ns, doc("EvalSet", EVAL_SET, {"cases": cases}))
    wait_ready(kube, ns, "EvalSet", EVAL_SET)


def _gated_run(
    cluster: LocalCluster,
    kube: Kube,
    ns: str,
    operator: OperatorProcess,
    name: str,
    decisions: list[tuple[str, str, str]],
) -> dict[str, Any]:
    """Create a Run of ``notes`` as the editor and sign each approval round in turn
    (user, verdict, comment); the finished Run."""
    create_run_as(cluster, ns, EDITOR, name)
    seen: set[str] = set()
    for user, verdict, comment in decisions:

        def parked(run: dict[str, Any]) -> bool:
            items = (run.get("status") or {}).get("reviewItems") or []
            return (
                reason_is("AwaitingReview")(run) and bool(items) and items[0]["review"] not in seen
            )

        run = wait_run(kube, ns, name, parked, operator=operator, timeout=180)
        review = run["status"]["reviewItems"][0]["review"]
        seen.add(review)
        signed = sign(cluster, ns, review, user, verdict, text=comment)
        assert signed.returncode == 0, signed.stderr
    done: dict[str, Any] = wait_run(kube, ns, name, finished, operator=operator, timeout=180)
    return done


def _agreement(kube: Kube, ns: str) -> list[dict[str, Any]]:
    status = (get(kube, ns, "EvalSet", EVAL_SET) or {}).get("status") or {}
    return list(status.get("funnelAgreement") or [])


def _decisions(kube: Kube, ns: str) -> int:
    found = _agreement(kube, ns)
    return int(found[0]["decisions"]) if found else 0


def _evalrun(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    spec = {
        "evalSetRef": {"name": EVAL_SET},
        "candidate": {"agentRef": {"name": "triage"}},
        "compare": False,
        "trials": 1,
        # Two cases that pass: their pass rate's 95 % interval is [0.34, 1], so a floor of
        # 0.3 is cleared by the whole interval (0.5 would be straddled: Inconclusive).
        "criteria": {"minCases": 1, "minPassRate": 0.3},
    }
    apply(kube, ns, doc("EvalRun", name, spec))

    def done() -> dict[str, Any] | None:
        obj = get(kube, ns, "EvalRun", name)
        return obj if ((obj or {}).get("status") or {}).get("verdict") else None

    found: dict[str, Any] = wait_for(
        done,
        300,
        interval=1,
        message=lambda: json.dumps(get(kube, ns, "EvalRun", name)) + debug(kube, ns),
    )
    return found


def _succeeded(obj: dict[str, Any]) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c["type"] == "Succeeded":
            return dict(c)
    return {}


@pytest.mark.usefixtures("review_admission", "run_author")
def test_people_deciding_a_funnel_judges_artifacts_calibrate_that_judge_skill(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)

    # No Funnel decision yet: the gated judge has nothing to be calibrated on.
    before = _evalrun(kube, ns, "before")
    assert before["status"]["verdict"] == "Inconclusive", before["status"]
    assert _succeeded(before)["reason"] == "TooFewLabels", _succeeded(before)
    assert _agreement(kube, ns) == []

    # Judge pass, alice approves: agreed. The EvalSet shows it once the gate is recorded.
    model.push(text(GOOD), judged(0.9))
    a = _gated_run(cluster, kube, ns, operator, "notes-a", [("alice", "approve", "")])
    (gate,) = a["status"]["gates"]
    assert (gate["judge"], gate["judgePassed"], gate["state"]) == (SKILL, True, "Approved")
    skill_hash = ((get(kube, ns, "Skill", SKILL) or {}).get("status") or {}).get("contentHash")
    assert skill_hash and gate["judgeContentHash"] == skill_hash, gate
    wait_for(
        lambda: _decisions(kube, ns) == 1 or None, 60, message=lambda: str(_agreement(kube, ns))
    )

    # An editor cannot write a decision: a Run's status is the operator's.
    forged = {"status": {"gates": [{**gate, "review": "forged", "judgePassed": False}]}}
    res = kubectl_as(
        cluster, EDITOR, "-n", ns, "patch", "run", "notes-a", "--subresource=status",
        "--type=merge", "-p", json.dumps(forged),
    )  # fmt: skip
    assert res.returncode != 0 and "forbidden" in res.stderr.lower(), res.stderr

    # Judge fail (0.3 < 0.8, no retries left), alice rejects: agreed.
    model.push(text(GOOD), judged(0.3))
    b = _gated_run(cluster, kube, ns, operator, "notes-b", [("alice", "reject", "vague")])
    assert (succeeded(b) or {}).get("status") == "False"
    assert [(g["judgePassed"], g["state"]) for g in b["status"]["gates"]] == [(False, "Rejected")]

    # Judge pass, bob asks for a revision (the artifact as shown is not ready): disagreed.
    # The redraft, judge pass, alice approves: agreed.
    model.push(text(GOOD), judged(0.9), text(BETTER), judged(0.95))
    c = _gated_run(
        cluster, kube, ns, operator, "notes-c",
        [("bob", "revise", "Say how much faster."), ("alice", "approve", "")],
    )  # fmt: skip
    assert [(g["round"], g["judgePassed"], g["state"]) for g in c["status"]["gates"]] == [
        (1, True, "RevisionRequested"),
        (2, True, "Approved"),
    ]

    # 4 decisions: people fail/judge fail 1, people fail/judge pass 1, people pass/judge pass 2.
    wait_for(
        lambda: _decisions(kube, ns) == 4 or None, 60, message=lambda: str(_agreement(kube, ns))
    )
    (shown,) = _agreement(kube, ns)
    assert shown["skill"] == SKILL and shown["funnels"] == [GATE]
    assert (shown["contentHash"], shown["otherVersions"]) == (skill_hash, 0)
    assert (shown["agreed"], shown["judgeFailed"], shown["peopleFailed"]) == (3, 1, 2)
    assert shown["kappa"] == 0.5, shown
    assert shown["interval"]["low"] < 0.5 < shown["interval"]["high"]

    # The gate: no labels, but four Funnel decisions at kappa 0.5 clear minKappa 0.5.
    after = _evalrun(kube, ns, "after")
    status = after["status"]
    assert status["verdict"] == "Pass", _succeeded(after)
    assert _succeeded(after)["reason"] == "Evaluated"
    (judge,) = status["judges"]
    assert judge["judge"] == f"Agent/skill-judge+Skill/{SKILL}" and judge["labels"] == 0
    assert judge["calibrated"] is True
    assert judge["funnelDecisions"]["decisions"] == 4 and judge["funnelDecisions"]["kappa"] == 0.5
