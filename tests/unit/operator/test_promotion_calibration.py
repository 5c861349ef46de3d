"""A gate may require a calibrated judge, then ``Unknown`` until it is (issue 39).

An EvalRun whose gated judge is not calibrated ends ``Inconclusive`` with reason
``JudgeUncalibrated`` or ``TooFewLabels``. The promotion reads that as "still waiting":
``Promoted=Unknown`` with the EvalRun's reason and its message (judge, kappa, minKappa,
labels), no Review (a person approving does not make the judge trustworthy), the verdict
endpoint ``Running``. When the EvalSet's calibration changes (a new version: labels, judge
or gate edited; or people's Funnel decisions now clear the judge's gate) the same candidate
is evaluated again by itself, under a new EvalRun name, once per change: an echo of the
EvalSet's status starts nothing, and only EvalRuns the operator created count.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swarmkit_operator import k8s
from swarmkit_operator import promotion as promotion_reconcile
from swarmkit_operator.builders import promotion as pr
from swarmkit_operator.builders import trust
from swarmkit_operator.workload.ledger import Ledger
from tests.unit.operator.test_promotion import V2 as TV2
from tests.unit.operator.test_promotion import active_v1, spec, step
from tests.unit.operator.test_promotion_trust import (
    ACTIVE_V1,
    OWNER,
    T0,
    V2,
    Ctl,
    agent_view,
    evalrun,
    planned,
    proof,
    recorded,
)

WHY = (
    "judge Agent/yes-judge: Cohen's kappa 0.0 is below minKappa 0.6 over 6 labelled "
    "answer(s): not trusted to decide"
)
GATE = {"minKappa": 0.6, "minLabels": 6}


def waiting(name: str = "r1", cause: str = "JudgeUncalibrated") -> pr.EvalOutcome:
    return pr.EvalOutcome(name, "smoke", "Inconclusive", (), cause, WHY)


# --- the gate: Unknown while the judge is not calibrated ---------------------------------------


@pytest.mark.parametrize("cause", ["JudgeUncalibrated", "TooFewLabels"])
@pytest.mark.parametrize("on_inconclusive", ["hold", "review"])
def test_an_uncalibrated_judge_leaves_the_gate_unknown_without_a_review(
    cause: str, on_inconclusive: str
) -> None:
    plan = step(
        active_v1(), TV2, spec=spec(on_inconclusive), eval_runs={"smoke": waiting(cause=cause)}
    )
    assert (plan.verdict.status, plan.verdict.reason) == ("Unknown", cause)
    assert "Agent/yes-judge" in plan.verdict.message and "kappa 0.0" in plan.verdict.message
    assert "minKappa 0.6" in plan.verdict.message and "6 labelled" in plan.verdict.message
    assert "r1" in plan.verdict.message
    assert plan.status.active is not None and plan.status.active.version != TV2.version
    assert not plan.open_review and plan.status.candidate is not None
    assert plan.status.candidate.review is None
    assert plan.status.candidate.verdict == "Inconclusive"


def test_a_persons_approval_does_not_promote_past_an_uncalibrated_judge() -> None:
    plan = step(
        active_v1(),
        TV2,
        spec=spec("review"),
        eval_runs={"smoke": waiting()},
        review_verdict="approve",
        review_name="promote-topology-support-bbbbbbbb",
    )
    assert (plan.verdict.status, plan.verdict.reason) == ("Unknown", "JudgeUncalibrated")
    assert plan.status.active is not None and plan.status.active.version != TV2.version


def test_any_uncalibrated_judge_waits_even_beside_an_ordinary_inconclusive() -> None:
    runs = {
        "smoke": pr.EvalOutcome("r0", "smoke", "Inconclusive", (), "Evaluated", "straddles"),
        "judged": pr.EvalOutcome("r1", "judged", "Inconclusive", (), "TooFewLabels", WHY),
    }
    plan = step(active_v1(), TV2, spec=spec("review", ("smoke", "judged")), eval_runs=runs)
    assert (plan.verdict.status, plan.verdict.reason) == ("Unknown", "TooFewLabels")
    assert not plan.open_review


def test_a_failure_elsewhere_still_fails_the_candidate() -> None:
    runs = {"smoke": waiting(), "regress": pr.EvalOutcome("r2", "regress", "Fail", ("x",))}
    plan = step(active_v1(), TV2, spec=spec(sets=("smoke", "regress")), eval_runs=runs)
    assert (plan.verdict.status, plan.verdict.reason) == ("False", "EvaluationFailed")


def test_an_ordinary_inconclusive_is_still_held() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Inconclusive", (), "Evaluated", "x")}
    plan = step(active_v1(), TV2, eval_runs=runs)
    assert (plan.verdict.status, plan.verdict.reason) == ("False", "Inconclusive")


def test_the_verdict_endpoint_answers_running_while_the_judge_is_uncalibrated() -> None:
    cond = {"type": "Promoted", "status": "Unknown", "reason": "JudgeUncalibrated"}
    view = {
        "generation": 2,
        "observed": 2,
        "status": {"conditions": [cond], "promotion": {"active": {"version": "a"}}},
    }
    assert pr.endpoint_verdict(view)["verdict"] == "Running"


# --- what the promotion reads of an EvalRun ------------------------------------------------------


def judged_body(
    eval_set_version: str = "set-v1", cause: str = "JudgeUncalibrated", judge: str = "Agent/j"
) -> dict[str, Any]:
    return {
        "metadata": {"name": "r1", "uid": "u1"},
        "spec": {"evalSetRef": {"name": "smoke"}, "candidate": {"version": V2.version}},
        "status": {
            "verdict": "Inconclusive",
            "verdictReason": WHY,
            "evalSetVersion": eval_set_version,
            "conditions": [{"type": "Succeeded", "status": "True", "reason": cause}],
            "judges": [
                {"judge": judge, "labels": 6, "kappa": 0.0, **GATE, "calibrated": False},
                {"judge": "Agent/other", "labels": 6, "kappa": 1.0, **GATE, "calibrated": True},
            ],
        },
    }


def test_the_outcome_keeps_the_cause_the_eval_set_version_and_the_missed_gates() -> None:
    out = pr.eval_run_outcome(judged_body())
    assert (out["cause"], out["why"], out["evalSetVersion"]) == ("JudgeUncalibrated", WHY, "set-v1")
    assert out["uncalibrated"] == [{"judge": "Agent/j", **GATE}]


# --- when the calibration changed ----------------------------------------------------------------


def test_the_same_calibration_starts_nothing_whatever_else_the_status_says() -> None:
    entry = pr.eval_run_outcome(judged_body())
    assert pr.recalibration(entry, pr.CalibrationInput("set-v1")) is None
    # Funnel decisions that do not clear the gate (too few, or kappa too low) change nothing.
    skill = pr.eval_run_outcome(judged_body(judge="Agent/j+Skill/s"))
    for funnel in ((5, 0.9), (12, 0.4), (12, None)):
        assert pr.recalibration(skill, pr.CalibrationInput("set-v1", {"s": funnel})) is None


def test_a_new_eval_set_version_or_a_funnel_that_clears_the_gate_is_a_new_calibration() -> None:
    entry = pr.eval_run_outcome(judged_body(judge="Agent/j+Skill/s"))
    relabelled = pr.recalibration(entry, pr.CalibrationInput("set-v2"))
    funnel = pr.recalibration(entry, pr.CalibrationInput("set-v1", {"s": (6, 0.6)}))
    assert relabelled and funnel and relabelled != funnel
    # Deterministic: the same calibration names the same re-evaluation, once.
    assert pr.recalibration(entry, pr.CalibrationInput("set-v2")) == relabelled


def test_calibration_input_waits_for_the_eval_set_to_be_ready_at_its_generation() -> None:
    status = {"version": "v2", "funnelAgreement": [{"skill": "s", "decisions": 6, "kappa": 0.7}]}
    ready = {"ready": True, "observed": 3, "generation": 3, "status": status}
    assert pr.calibration_input(ready) == pr.CalibrationInput("v2", {"s": (6, 0.7)})
    assert pr.calibration_input({**ready, "generation": 4}) is None
    assert pr.calibration_input({**ready, "ready": False}) is None


# --- which EvalRun counts: the re-evaluation under the calibration now ---------------------------


def judged(uid: str, name: str | None = None, version: str = "set-v1", **kw: Any) -> dict[str, Any]:
    entry = evalrun("smoke", uid, verdict=kw.pop("verdict", "Inconclusive"), name=name, **kw)
    cause = "JudgeUncalibrated" if entry["verdict"] == "Inconclusive" else "Evaluated"
    gates = [{"judge": "Agent/j", **GATE}] if entry["verdict"] == "Inconclusive" else []
    return {**entry, "cause": cause, "why": WHY, "evalSetVersion": version, "uncalibrated": gates}


NOW_V2 = {"smoke": pr.CalibrationInput("set-v2")}


def count(entries: list[dict[str, Any]], made: trust.Made, cal: Any = None) -> pr.Counted:
    return pr.counted_eval_runs(OWNER, V2.version, ("smoke",), entries, made, cal)


def test_a_changed_calibration_plans_one_re_evaluation_of_the_same_candidate() -> None:
    base = planned("smoke")
    made = proof(recorded((base, "u1")))
    unchanged = count([judged("u1")], made, {"smoke": pr.CalibrationInput("set-v1")})
    assert unchanged.restart == {} and unchanged.runs["smoke"].cause == "JudgeUncalibrated"
    changed = count([judged("u1")], made, NOW_V2)
    (again,) = changed.restart.values()
    assert again.startswith(base + "-k") and again != base
    assert changed.runs["smoke"] == pr.EvalOutcome(again, "smoke")  # pending: Evaluating
    assert changed.own == ((base, "u1"),)
    # Once created (remembered, then recorded) it is the one counted; nothing more starts.
    made = proof(recorded((base, "u1")), ("u2",))
    later = count([judged("u1"), judged("u2", again, "set-v2", verdict="Pass")], made, NOW_V2)
    assert later.restart == {} and later.runs["smoke"].name == again
    assert later.runs["smoke"].verdict == "Pass" and later.own == ((base, "u1"), (again, "u2"))


def test_funnel_decisions_that_clear_the_gate_re_evaluate_the_same_eval_set_version() -> None:
    base = planned("smoke")
    entry = {**judged("u1"), "uncalibrated": [{"judge": "Agent/j+Skill/s", **GATE}]}
    made = proof(recorded((base, "u1")))
    short = {"smoke": pr.CalibrationInput("set-v1", {"s": (5, 1.0)})}
    assert count([entry], made, short).restart == {}
    cleared = {"smoke": pr.CalibrationInput("set-v1", {"s": (6, 0.7)})}
    (again,) = count([entry], made, cleared).restart.values()
    assert again.startswith(base + "-k")
    # More decisions that keep clearing it are the same calibration: the same name.
    more = {"smoke": pr.CalibrationInput("set-v1", {"s": (9, 0.8)})}
    assert count([entry], made, more).restart == {"smoke": again}


def test_a_re_evaluation_someone_else_created_is_never_counted() -> None:
    base = planned("smoke")
    again = count([judged("u1")], proof(recorded((base, "u1"))), NOW_V2).restart["smoke"]
    eves = judged("eve", again, "set-v2", verdict="Pass", at=T0 + timedelta(minutes=9))
    counted = count([judged("u1"), eves], proof(recorded((base, "u1"))), NOW_V2)
    assert counted.tampered and counted.restart == {}
    plan = pr.decide(
        pr.PromotionInputs(
            spec(), V2, active_v1(), datetime.now(UTC), counted.runs, tampered=counted.tampered
        )
    )
    assert (plan.verdict.status, plan.verdict.reason) == ("False", "TamperedObject")


@pytest.mark.parametrize("verdict", ["Pass", "Fail"])
def test_a_decided_candidate_is_not_evaluated_again_on_an_eval_set_edit(verdict: str) -> None:
    counted = count(
        [judged("u1", verdict=verdict)], proof(recorded((planned("smoke"), "u1"))), NOW_V2
    )
    assert counted.restart == {} and counted.runs["smoke"].verdict == verdict


# --- the reconcile: created once per calibration change -----------------------------------------


class CalCtl(Ctl):
    """The promotion's indexes with an EvalSet view whose calibration can change."""

    def __init__(self, entries: list[dict[str, Any]], ledger: Ledger, version: str) -> None:
        super().__init__(entries, ledger)
        self.status: dict[str, Any] = {"version": version}

    def lookup(self, index: str, key: Any) -> Any:
        if index != promotion_reconcile.EVAL_SETS_INDEX:
            return None
        return {"spec": {}, "ready": True, "observed": 1, "generation": 1, "status": self.status}


def test_the_reconcile_re_evaluates_once_per_calibration_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    created: list[str] = []

    async def create(_plural: str, _ns: str, manifest: dict[str, Any]) -> dict[str, Any]:
        created.append(manifest["metadata"]["name"])
        return {"metadata": {**manifest["metadata"], "uid": f"u{len(created) + 1}"}}

    monkeypatch.setattr(k8s, "create_custom_if_absent", create)
    base = planned("smoke")
    record = {**ACTIVE_V1, "createdUids": recorded((base, "u1"))}
    ctl = CalCtl([judged("u1", at=datetime.now(UTC))], Ledger(), "set-v1")

    def reconcile(prev: dict[str, Any]) -> promotion_reconcile.Promotion:
        return asyncio.run(
            promotion_reconcile.reconcile_promotion(ctl, OWNER, agent_view(prev), V2)
        )

    held = reconcile(record)
    assert (held.verdicts[0].status, held.verdicts[0].reason) == ("Unknown", "JudgeUncalibrated")
    # An echo of the EvalSet's status (its judges shown, say): nothing starts.
    ctl.status = {**ctl.status, "judges": [{"judge": "Agent/j", "labels": 6}]}
    assert reconcile(record).verdicts[0].reason == "JudgeUncalibrated" and created == []

    # People labelled more answers: a new EvalSet version, one re-evaluation, recorded.
    ctl.status = {"version": "set-v2"}
    first = reconcile(record)
    (again,) = created
    assert again.startswith(base + "-k") and first.verdicts[0].reason == "Evaluating"
    uids = first.fields["promotion"]["createdUids"]
    assert uids[trust.made_key("EvalRun", again)] == "u2"
    assert first.fields["promotion"]["candidate"]["evalRuns"] == [again]
    # A reconcile before the index shows it asks for the same name (already there: the
    # create is idempotent), never another one.
    monkeypatch.setattr(k8s, "create_custom_if_absent", _already_there(created))
    monkeypatch.setattr(k8s, "get_custom", _nothing)
    assert reconcile(first.fields["promotion"]).verdicts[0].reason == "Evaluating"
    assert set(created) == {again}

    # It passes: the same candidate is promoted, with no spec edit.
    ctl.entries.append(judged("u2", again, "set-v2", verdict="Pass", at=datetime.now(UTC)))
    done = reconcile(first.fields["promotion"])
    assert (done.verdicts[0].status, done.verdicts[0].reason) == ("True", "Promoted")
    assert done.fields["promotion"]["active"]["version"] == V2.version
    assert done.fields["promotion"]["active"]["evalRuns"] == [again]


def _already_there(created: list[str]) -> Any:
    async def create(_plural: str, _ns: str, manifest: dict[str, Any]) -> None:
        created.append(manifest["metadata"]["name"])
        return None  # the name is taken

    return create


async def _nothing(*_a: Any) -> None:
    return None
