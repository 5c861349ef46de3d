"""Judge calibration end to end: a judge that disagrees with people decides nothing (issue 39).

The real apiserver, the operator as a process, the runner in Jobs. The Agent ``triage``
(replay model) is under promotion on an EvalSet with two pure-grader cases and one case
judged by a judge Agent, with six answers a person labelled (three that promise a refund
``pass``, three that do not ``fail``) and ``minKappa: 0.6``:

- ``yes-judge`` (replay model) passes every answer: against the labels its Cohen's kappa is
  0. The candidate's EvalRun runs the judge on the six labelled answers, grades every case
  (all pass: without the gate the verdict would be ``Pass``), and ends ``Inconclusive`` with
  ``Succeeded=True JudgeUncalibrated`` naming the judge, its kappa and the six labels; the
  candidate is held (``Promoted=False Inconclusive``) and the next Run pins the active
  version. The EvalSet's status shows the judge's kappa.
- the EvalSet's judge becomes ``fair-judge`` (a model on a scripted OpenAI-compatible server
  that passes an answer when it promises a refund, as the person did): kappa 1. The next
  edit's EvalRun grades as before, ``Pass`` with ``Succeeded=True Evaluated``, and the
  Agent is promoted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text

from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    debug,
    doc,
    example,
    get,
    wait_ready,
)
from .test_evals import condition
from .test_promotion_graded import (
    AGENT,
    EVAL_SET,
    GOOD,
    REWORDED,
    edit_until_settled,
    pinned_run,
    promoted,
    promotion,
    triage,
)

#: Another answer that passes every case (the third version).
REPHRASED = "billing category; the payments team will refund the duplicate charge"
LABELLED = [
    ("We will refund the duplicate charge within five days.", "pass"),
    ("A refund of the second charge is on its way.", "pass"),
    ("billing: refund issued to your card", "pass"),
    ("Please contact your bank.", "fail"),
    ("category: billing", "fail"),
    ("We cannot help with charges.", "fail"),
]
_ANSWER = re.compile(r"## The agent's answer\n(.*?)(?:\n\n## |$)", re.DOTALL)


def eval_set(judge: str) -> dict[str, Any]:
    grader = {"type": "judgeAgent", "agent": judge, "rubric": "Does it promise the refund?"}
    return doc(
        "EvalSet",
        EVAL_SET,
        {
            "cases": [
                {"name": "says-billing", "input": "Ticket 1: charged twice.",
                 "grader": {"type": "contains", "expected": "billing"}},
                {"name": "wants-refund", "input": "Ticket 2: charged twice.", "critical": True,
                 "grader": {"type": "contains", "expected": "refund"}},
                {"name": "promises-refund", "input": "Ticket 3: charged twice.",
                 "grader": {**grader, "minKappa": 0.6, "minLabels": 6},
                 "humanLabels": [{"answer": a, "verdict": v, "by": "alice"} for a, v in LABELLED]},
            ]
        },
    )  # fmt: skip


def fair_verdict(request: RecordedRequest) -> Reply:
    """The fair judge: pass exactly the answers that promise a refund."""
    users = [m for m in request.messages if m.get("role") == "user"]
    found = _ANSWER.search(str(users[-1].get("content")) if users else "")
    ok = found is not None and "refund" in found.group(1).lower()
    verdict = {"verdict": "pass" if ok else "fail", "reasoning": "refund promised" if ok else "no"}
    return text(json.dumps(verdict))


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(default=fair_verdict) as server:
        yield server


def judges_of(kube: Kube, ns: str, kind: str, name: str) -> list[dict[str, Any]]:
    return list(((get(kube, ns, kind, name) or {}).get("status") or {}).get("judges") or [])


def version_other_than(kube: Kube, ns: str, version: str) -> str | None:
    found = ((get(kube, ns, "Agent", AGENT) or {}).get("status") or {}).get("version")
    return str(found) if found and found != version else None


def test_an_uncalibrated_judge_holds_promotion_and_a_calibrated_one_grades(
    kube: Kube, namespace: str, operator: OperatorProcess, model: ScriptedModelServer
) -> None:
    ns = namespace
    workspace = example("Workspace", "default")
    workspace["spec"]["modelProviders"].append(
        {"name": "m", "type": "openai", "baseUrl": model.openai_base_url, "defaultModel": "t"}
    )
    apply(kube, ns, workspace)
    wait_ready(kube, ns, "Workspace", "default")
    passes = '{"verdict": "pass", "score": 1.0, "reasoning": "looks fine"}'
    apply(kube, ns, agent_with("yes-judge", [{"text": passes}]))
    fair = agent_with("fair-judge", [])
    fair["spec"]["model"] = {"provider": "m", "name": "t"}
    del fair["spec"]["replay"]
    apply(kube, ns, fair)
    for name in ("yes-judge", "fair-judge"):
        wait_ready(kube, ns, "Agent", name)
    apply(kube, ns, eval_set("yes-judge"))
    wait_ready(kube, ns, "EvalSet", EVAL_SET)
    apply(kube, ns, triage(GOOD, 3))
    wait_for(
        lambda: promoted(kube, ns).get("status") == "True", 60, message=lambda: debug(kube, ns)
    )
    v1 = str(promotion(kube, ns)["active"]["version"])

    # The judge passes everything: kappa 0 against the labels, not trusted to decide.
    v2, held, _ = edit_until_settled(kube, ns, REWORDED, 3, v1, 300)
    status = held["status"]
    assert all(c["candidate"]["outcome"] == "Passed" for c in status["cases"]), status["cases"]
    assert status["verdict"] == "Inconclusive", status
    cond = condition(held, "Succeeded")
    assert (cond["status"], cond["reason"]) == ("True", "JudgeUncalibrated"), cond
    assert "Agent/yes-judge" in status["verdictReason"] and "kappa 0.0" in status["verdictReason"]
    assert "6 labelled" in status["verdictReason"]
    (judge,) = status["judges"]
    assert (judge["judge"], judge["labels"], judge["agreed"], judge["kappa"]) == (
        "Agent/yes-judge", 6, 3, 0.0,
    )  # fmt: skip
    assert (judge["minKappa"], judge["calibrated"]) == (0.6, False)
    cond = promoted(kube, ns)
    assert (cond["status"], cond["reason"]) == ("False", "Inconclusive"), cond
    assert promotion(kube, ns)["active"]["version"] == v1
    assert pinned_run(kube, ns, "while-held", operator) == (v1, GOOD)
    wait_for(lambda: judges_of(kube, ns, "EvalSet", EVAL_SET) == status["judges"], 30)

    # A judge that agrees with the person: kappa 1, the evaluation decides as before.
    apply(kube, ns, eval_set("fair-judge"))
    wait_ready(kube, ns, "EvalSet", EVAL_SET)
    # (Promoted stays False for the held v2 until v3 is decided: wait for v3 itself.)
    apply(kube, ns, triage(REPHRASED, 3))
    v3 = wait_for(lambda: version_other_than(kube, ns, v2), 60, message=lambda: debug(kube, ns))
    wait_for(
        lambda: promotion(kube, ns)["active"]["version"] == v3 or None,
        300,
        message=lambda: debug(kube, ns),
    )
    (passed,) = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, "evalruns", label_selector=f"swarmkit.dev/candidate-version={v3}"
    )["items"]
    status = passed["status"]
    assert status["verdict"] == "Pass", status
    assert condition(passed, "Succeeded")["reason"] == "Evaluated"
    (judge,) = status["judges"]
    assert (judge["judge"], judge["labels"], judge["agreed"], judge["kappa"]) == (
        "Agent/fair-judge", 6, 6, 1.0,
    )  # fmt: skip
    assert judge["calibrated"] is True
    # The judge Runs saw the labelled answers (six calibration Runs, two judged cases).
    asked = [str(r.messages) for r in model.requests]
    assert all(any(a in m for m in asked) for a, _ in LABELLED)
    wait_for(lambda: judges_of(kube, ns, "EvalSet", EVAL_SET) == status["judges"], 30)
