"""Judge calibration end to end: a judge that disagrees with people decides nothing (issue 39).

The real apiserver, the operator as a process, the runner in Jobs. The Agent ``triage``
(replay model) is under promotion on an EvalSet with two pure-grader cases and one case
judged by a judge Agent, with six answers a person labelled (three that promise a refund
``pass``, three that do not ``fail``) and ``minKappa: 0.6``:

- ``yes-judge`` (replay model) passes every answer: against the labels its Cohen's kappa is
  0. The candidate's EvalRun runs the judge on the six labelled answers, grades every case
  (all pass: without the gate the verdict would be ``Pass``), and ends ``Inconclusive`` with
  ``Succeeded=True JudgeUncalibrated`` naming the judge, its kappa and the six labels; the
  gate waits for a calibrated judge (``Promoted=Unknown JudgeUncalibrated``, no Review) and
  the next Run pins the active version. The EvalSet's status shows the judge's kappa, and
  that status write starts no other EvalRun.
- the EvalSet's judge becomes ``fair-judge`` (a model on a scripted OpenAI-compatible server
  that passes an answer when it promises a refund, as the person did) with three of the
  labels, fewer than ``minLabels``: the SAME candidate, with no spec edit, is evaluated again
  by itself and waits ``Promoted=Unknown TooFewLabels``.
- the person's other three labels are added: evaluated again by itself, kappa 1, ``Pass``
  with ``Succeeded=True Evaluated``, and that same candidate is promoted: three EvalRuns of
  it in all, one per calibration.
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
    pinned_run,
    promoted,
    promotion,
    triage,
)

LABELLED = [
    ("We will refund the duplicate charge within five days.", "pass"),
    ("A refund of the second charge is on its way.", "pass"),
    ("billing: refund issued to your card", "pass"),
    ("Please contact your bank.", "fail"),
    ("category: billing", "fail"),
    ("We cannot help with charges.", "fail"),
]
_ANSWER = re.compile(r"## The agent's answer\n(.*?)(?:\n\n## |$)", re.DOTALL)


def eval_set(judge: str, labelled: list[tuple[str, str]] = LABELLED) -> dict[str, Any]:
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
                 "humanLabels": [{"answer": a, "verdict": v, "by": "alice"} for a, v in labelled]},
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


def evalruns_of(kube: Kube, ns: str, version: str) -> list[dict[str, Any]]:
    """The candidate's EvalRuns, oldest first."""
    items = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, "evalruns", label_selector=f"swarmkit.dev/candidate-version={version}"
    )["items"]
    return sorted(items, key=lambda r: str(r["metadata"]["creationTimestamp"]))


def waiting_for_judge(kube: Kube, ns: str, version: str, reason: str) -> dict[str, Any] | None:
    """The Promoted condition once the candidate ``version`` waits with ``reason``."""
    cond = promoted(kube, ns)
    candidate = (promotion(kube, ns).get("candidate") or {}).get("version")
    return cond if candidate == version and cond.get("reason") == reason else None


def test_an_uncalibrated_judge_leaves_the_gate_unknown_until_people_calibrate_it(
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
    apply(kube, ns, triage(REWORDED, 3))
    v2 = wait_for(lambda: version_other_than(kube, ns, v1), 60, message=lambda: debug(kube, ns))
    cond = wait_for(
        lambda: waiting_for_judge(kube, ns, v2, "JudgeUncalibrated"),
        300,
        message=lambda: debug(kube, ns),
    )
    (held,) = evalruns_of(kube, ns, v2)
    status = held["status"]
    assert all(c["candidate"]["outcome"] == "Passed" for c in status["cases"]), status["cases"]
    assert status["verdict"] == "Inconclusive", status
    succeeded = condition(held, "Succeeded")
    assert (succeeded["status"], succeeded["reason"]) == ("True", "JudgeUncalibrated"), succeeded
    assert "Agent/yes-judge" in status["verdictReason"] and "kappa 0.0" in status["verdictReason"]
    assert "6 labelled" in status["verdictReason"]
    (judge,) = status["judges"]
    assert (judge["judge"], judge["labels"], judge["agreed"], judge["kappa"]) == (
        "Agent/yes-judge", 6, 3, 0.0,
    )  # fmt: skip
    assert (judge["minKappa"], judge["calibrated"]) == (0.6, False)
    # The gate waits (Unknown), naming the judge, its kappa, minKappa and the labels.
    assert cond["status"] == "Unknown", cond
    for part in ("Agent/yes-judge", "kappa 0.0", "minKappa 0.6", "6 labelled", v2):
        assert part in cond["message"], cond
    assert promotion(kube, ns)["active"]["version"] == v1
    assert pinned_run(kube, ns, "while-held", operator) == (v1, GOOD)
    wait_for(lambda: judges_of(kube, ns, "EvalSet", EVAL_SET) == status["judges"], 30)
    # The EvalSet's status changed (its judges); its calibration did not: nothing restarts.
    assert [r["metadata"]["name"] for r in evalruns_of(kube, ns, v2)] == [held["metadata"]["name"]]
    assert waiting_for_judge(kube, ns, v2, "JudgeUncalibrated") is not None

    # A judge that agrees with the person, but three labels: minLabels 6 is not reached.
    # The same candidate is evaluated again by itself (no spec edit) and still waits.
    apply(kube, ns, eval_set("fair-judge", LABELLED[::2]))
    cond = wait_for(
        lambda: waiting_for_judge(kube, ns, v2, "TooFewLabels"),
        300,
        message=lambda: debug(kube, ns),
    )
    assert cond["status"] == "Unknown" and "Agent/fair-judge" in cond["message"], cond
    assert "minLabels 6" in cond["message"], cond
    assert len(evalruns_of(kube, ns, v2)) == 2
    assert promotion(kube, ns)["active"]["version"] == v1

    # The person's other labels: kappa 1, the same candidate passes and is promoted.
    apply(kube, ns, eval_set("fair-judge"))
    wait_for(
        lambda: promotion(kube, ns)["active"]["version"] == v2 or None,
        300,
        message=lambda: debug(kube, ns),
    )
    assert (agent_version := version_other_than(kube, ns, v1)) == v2, agent_version
    runs = evalruns_of(kube, ns, v2)
    assert len(runs) == 3, [r["metadata"]["name"] for r in runs]  # one per calibration
    passed = runs[-1]
    assert promotion(kube, ns)["active"]["evalRuns"] == [passed["metadata"]["name"]]
    status = passed["status"]
    assert status["verdict"] == "Pass", status
    assert condition(passed, "Succeeded")["reason"] == "Evaluated"
    (judge,) = status["judges"]
    assert (judge["judge"], judge["labels"], judge["agreed"], judge["kappa"]) == (
        "Agent/fair-judge", 6, 6, 1.0,
    )  # fmt: skip
    assert judge["calibrated"] is True
    assert promoted(kube, ns)["status"] == "True"
    # The judge Runs saw the labelled answers (six calibration Runs, two judged cases).
    asked = [str(r.messages) for r in model.requests]
    assert all(any(a in m for m in asked) for a, _ in LABELLED)
    wait_for(lambda: judges_of(kube, ns, "EvalSet", EVAL_SET) == status["judges"], 30)
