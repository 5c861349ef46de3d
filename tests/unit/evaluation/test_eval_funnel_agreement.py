"""A judge skill's agreement with people's Funnel decisions: pairs, kappa, history, gate.

A Funnel's judge layer gives a verdict on one artifact, then people decide that artifact;
the operator records both in the Run's ``status.gates``. These tests pin what counts as a
pair (and what does not), that the kappa is the calibration's own estimator, that the
history is bounded to the newest decisions, and how the pairs reach the ``minKappa`` gate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from swarmkit_api.bundle import BundleSkill, BundleTopology, ReviewItem, RunBundle
from swarmkit_api.conditions import REASON_JUDGE_UNCALIBRATED, REASON_TOO_FEW_LABELS
from swarmkit_api.eval import MAX_FUNNEL_DECISIONS, EvalCase, FunnelAgreement
from swarmkit_api.funnel import FunnelSpec, GateReport
from swarmkit_operator.builders import eval_calibration as cal
from swarmkit_operator.builders.eval_graders import Grade
from swarmkit_operator.builders.eval_stats import cohen_kappa
from swarmkit_operator.handlers import evaluation
from swarmkit_operator.indexes import IndexId
from swarmkit_operator.reconcile.controller import Controller
from swarmkit_operator.runs import funnel_gate


def gate(
    state: str, passed: bool | None, skill: str | None = "grade-it", rnd: int = 1
) -> dict[str, Any]:
    entry: dict[str, Any] = {"funnel": "notes", "review": f"r-{rnd}", "round": rnd}
    entry.update(state=state, judge=skill, judgePassed=passed, judgeContentHash="h1")
    return {k: v for k, v in entry.items() if v is not None}


def run(name: str, *gates: dict[str, Any], created: str = "2026-12-06T01:00:00Z") -> dict[str, Any]:
    meta = {"name": name, "creationTimestamp": created}
    return {"metadata": meta, "status": {"gates": list(gates)}}


def decisions(table: list[list[int]]) -> list[cal.FunnelDecision]:
    """Decisions filling a [people fail/pass][judge fail/pass] table."""
    out = []
    for people in (0, 1):
        for judge in (0, 1):
            for i in range(table[people][judge]):
                at = ("2026-12-06T01:00:00Z", f"run-{people}{judge}-{i}", 1)
                out.append(cal.FunnelDecision("notes", bool(judge), bool(people), "h1", at))
    return out


def test_approve_is_pass_and_reject_or_a_revision_request_is_fail() -> None:
    body = run(
        "r",
        gate("RevisionRequested", True, rnd=1),  # the judge passed it, a person sent it back
        gate("Approved", True, rnd=2),
        gate("Rejected", False, skill="strict", rnd=3),
    )
    pairs = cal.funnel_pairs(body)
    assert sorted(pairs) == ["grade-it", "strict"]
    assert [(d.judge_passed, d.people_passed) for d in pairs["grade-it"]] == [
        (True, False),
        (True, True),
    ]
    assert [(d.judge_passed, d.people_passed) for d in pairs["strict"]] == [(False, False)]
    assert [d.at for d in pairs["grade-it"]] == [
        ("2026-12-06T01:00:00Z", "r", 1),
        ("2026-12-06T01:00:00Z", "r", 2),
    ]


def test_undecided_expired_or_unjudged_rounds_are_no_pair() -> None:
    body = run(
        "r",
        gate("AwaitingApproval", True),  # people have not decided
        gate("Expired", True, rnd=2),  # nobody decided: the deadline did
        gate("Approved", None, rnd=3),  # the judge gave the shown artifact no score
        gate("Approved", True, skill=None, rnd=4),  # a funnel without a judge layer
    )
    assert cal.funnel_pairs(body) == {}
    assert cal.funnel_pairs({"metadata": {"name": "bare"}}) == {}


def test_the_kappa_is_the_calibrations_estimator_on_the_same_table() -> None:
    # Wikipedia's worked example again, as funnel decisions: p_o 0.7, p_e 0.5, kappa 0.4.
    table = [[15, 10], [5, 20]]
    a = cal.funnel_agreement("grade-it", decisions(table))
    k = cohen_kappa(table)
    assert k is not None
    assert (a.decisions, a.agreed, a.judge_failed, a.people_failed) == (50, 35, 20, 25)
    assert a.kappa == round(k.kappa, 4) == 0.4
    assert a.standard_error == round(k.standard_error, 4)
    assert a.interval is not None and a.interval.low < 0.4 < a.interval.high
    assert a.funnels == ["notes"]


def test_only_decisions_judged_by_the_skills_current_version_count() -> None:
    old = [cal.FunnelDecision("notes", True, False, "h0", ("t", f"o{i}", 1)) for i in range(3)]
    new = decisions([[1, 0], [0, 1]])  # judged by h1
    a = cal.funnel_agreement("grade-it", [*old, *new], "h1")
    assert (a.content_hash, a.decisions, a.other_versions, a.kappa) == ("h1", 2, 3, 1.0)
    # Unknown current version (the Skill is not there): every decision counts.
    assert cal.funnel_agreement("grade-it", [*old, *new]).decisions == 5


def test_a_judge_whose_failures_never_reach_people_has_kappa_zero_or_none() -> None:
    # A funnel redrafts what its judge fails: people see only what it passed. Agreement
    # beyond chance cannot be shown then, whatever people decide.
    mixed = cal.funnel_agreement("grade-it", decisions([[0, 3], [0, 7]]))
    assert (mixed.judge_failed, mixed.kappa) == (0, 0.0)
    all_approved = cal.funnel_agreement("grade-it", decisions([[0, 0], [0, 7]]))
    assert all_approved.kappa is None and all_approved.interval is None


def test_one_run_adds_at_most_the_newest_bounded_number_of_decisions() -> None:
    many = [gate("Approved", True, rnd=i) for i in range(1, MAX_FUNNEL_DECISIONS + 11)]
    (pairs,) = cal.funnel_pairs(run("r", *many)).values()
    assert len(pairs) == MAX_FUNNEL_DECISIONS and pairs[0].at[2] == 11


def test_only_the_newest_decisions_count() -> None:
    old = [
        cal.FunnelDecision("notes", True, False, "h1", (f"2026-12-06T0{i}:00:00Z", "r", 1))
        for i in range(5)
    ]
    new = [
        cal.FunnelDecision("notes", passed, passed, "h1", ("2026-12-07T00:00:00Z", f"n{i}", 1))
        for i, passed in enumerate([True, False, True, False])
    ]
    a = cal.funnel_agreement("grade-it", [*new, *old], limit=4)
    assert (a.decisions, a.agreed, a.kappa) == (4, 4, 1.0)
    # Rounds of one Run order within it: a revision's round 1 is older than its round 2.
    r1 = cal.FunnelDecision("notes", True, False, "h1", ("t", "r", 1))
    r2 = cal.FunnelDecision("notes", True, True, "h1", ("t", "r", 2))
    assert cal.funnel_agreement("grade-it", [r2, r1], limit=1).people_failed == 0
    assert cal.funnel_agreement("grade-it", new, limit=0).decisions == 0


def judge_skill_case(name: str, labels: list[tuple[str, str]], **grader: Any) -> EvalCase:
    return EvalCase.model_validate(
        {
            "name": name,
            "input": f"input of {name}",
            "grader": {"type": "judgeSkill", "skill": "grade-it", "agent": "judge", **grader},
            "humanLabels": [{"answer": a, "verdict": v} for a, v in labels],
        }
    )


def agreement(table: list[list[int]]) -> dict[str, FunnelAgreement]:
    return {"grade-it": cal.funnel_agreement("grade-it", decisions(table))}


def test_funnel_decisions_alone_can_calibrate_a_gated_judge_skill() -> None:
    case = judge_skill_case("tone", [], minKappa=0.6, minLabels=10)
    (j,) = cal.calibrations(
        [case], {}, agreement([[4, 1], [0, 7]])
    )  # kappa (11/12 - 76/144) / (1 - 76/144)
    assert j.judge == "Agent/judge+Skill/grade-it" and j.labels == 0 and j.kappa is None
    assert j.funnel_decisions is not None and j.funnel_decisions.kappa == 0.8235
    assert j.calibrated is True and cal.gate([j]) is None
    # Fewer decisions than minLabels: not enough, whatever their kappa.
    (few,) = cal.calibrations([case], {}, agreement([[2, 0], [0, 3]]))
    assert few.funnel_decisions is not None and few.funnel_decisions.kappa == 1.0
    assert few.calibrated is False


def test_labels_and_funnel_decisions_are_separate_tables_either_may_clear_the_gate() -> None:
    labels = [(f"a{i}", "pass" if i % 2 == 0 else "fail") for i in range(10)]
    case = judge_skill_case("tone", labels, minKappa=0.6)
    agrees = {("tone", i): Grade("Passed" if i % 2 == 0 else "Failed", 1.0, "") for i in range(10)}
    stamps = {("tone", i): Grade("Passed", 1.0, "") for i in range(10)}
    # Labels clear it, the (censored) funnel table does not: calibrated, and not pooled
    # (pooling the 12 rubber-stamped funnel decisions would drag kappa below 0.6).
    (j,) = cal.calibrations([case], agrees, agreement([[0, 5], [0, 7]]))
    assert (j.labels, j.kappa, j.calibrated) == (10, 1.0, True)
    assert j.funnel_decisions is not None and j.funnel_decisions.decisions == 12
    # Labels fail it, funnel decisions clear it: calibrated by people's funnel decisions.
    (k,) = cal.calibrations([case], stamps, agreement([[5, 1], [0, 6]]))
    assert k.kappa == 0.0 and k.calibrated is True
    # Neither: the message names both.
    (n,) = cal.calibrations([case], stamps, agreement([[0, 5], [0, 7]]))
    assert n.calibrated is False
    reason, message = cal.gate([n]) or ("", "")
    assert reason == REASON_JUDGE_UNCALIBRATED
    assert "12 Funnel decision(s) give kappa 0.0" in message


def test_enough_funnel_decisions_below_the_gate_are_uncalibrated_not_too_few_labels() -> None:
    case = judge_skill_case("tone", [], minKappa=0.6, minLabels=4)
    (j,) = cal.calibrations([case], {}, agreement([[1, 2], [1, 2]]))  # kappa 0 over 6
    reason, message = cal.gate([j]) or ("", "")
    assert reason == REASON_JUDGE_UNCALIBRATED
    assert "0 labelled answer(s) (its 6 Funnel decision(s) give kappa 0.0" in message
    # Too few of both: too few labels, naming the decisions too.
    (few,) = cal.calibrations([case], {}, agreement([[1, 0], [0, 1]]))
    reason, message = cal.gate([few]) or ("", "")
    assert reason == REASON_TOO_FEW_LABELS and "its 2 Funnel decision(s)" in message


def test_funnel_decisions_attach_to_judge_skills_only() -> None:
    agent = EvalCase.model_validate(
        {
            "name": "t",
            "input": "x",
            "grader": {"type": "judgeAgent", "agent": "judge", "rubric": "r", "minKappa": 0.5},
        }
    )
    (j,) = cal.calibrations([agent], {}, agreement([[5, 0], [0, 5]]))
    assert j.funnel_decisions is None and j.calibrated is False
    assert cal.judge_skills([agent, judge_skill_case("s", [])]) == {"grade-it"}


class _Indexes:
    def __init__(self, runs: Iterable[dict[str, Any]]) -> None:
        self.values: dict[Any, list[Any]] = {}
        for body in runs:
            for key, value in evaluation.funnel_decisions(body=body, namespace="ns").items():
                self.values.setdefault(key, []).append(value)

    def lookup(self, index: IndexId, key: Any) -> Any:
        assert index == IndexId.SKILL_VIEWS
        return {"contentHash": "h1"} if key == ("ns", "grade-it") else None

    def lookup_all(self, index: IndexId, key: Any) -> list[Any]:
        assert index == IndexId.FUNNEL_DECISIONS
        return self.values.get(key, [])


def test_the_evalset_counts_every_runs_recorded_decisions_per_skill() -> None:
    ctl = cast(
        Controller,
        _Indexes(
            [
                run("a", gate("RevisionRequested", True), gate("Approved", True, rnd=2)),
                run("b", gate("Rejected", False)),
                run("c", gate("Approved", True, skill="other")),
            ]
        ),
    )
    found = evaluation.funnel_agreements(ctl, "ns", ["grade-it", "unused"])
    assert list(found) == ["grade-it"]  # a skill no gate recorded is not shown
    assert (found["grade-it"].decisions, found["grade-it"].agreed) == (3, 2)
    assert found["grade-it"].content_hash == "h1"


def _review_of(score: float | None, judge: dict[str, Any] | None) -> dict[str, Any]:
    report: dict[str, Any] = {"funnel": "notes", "artifact": "x"}
    if score is not None:
        report["score"] = score
    g: dict[str, Any] = {
        "funnel": "notes",
        "approve": {
            "rules": [{"roles": ["leads"], "quorum": "any"}],
            "roles": {"leads": {"users": ["ann"]}},
        },
        "report": report,
    }
    if judge is not None:
        g["judge"] = judge
    request = {"kind": "funnel_approval", "question": "?", "key": "e.0.1", "gate": g}
    return {"metadata": {"name": "r-1"}, "spec": {"request": request}}


def test_the_gate_entry_records_the_judges_verdict_against_the_pinned_threshold() -> None:
    judge = {"skill": "grade-it", "threshold": 0.8}
    (passed,) = funnel_gate.gates_after([], _review_of(0.8, judge), "approve") or []
    assert (passed["judge"], passed["judgePassed"], passed["state"]) == (
        "grade-it",
        True,
        "Approved",
    )
    (failed,) = funnel_gate.gates_after([], _review_of(0.79, judge), "reject") or []
    assert failed["judgePassed"] is False
    # No score on the shown artifact (validation failed it, or the judge errored), or no
    # judge layer: the entry says nothing of a judge.
    for review in (_review_of(None, judge), _review_of(0.9, None)):
        (entry,) = funnel_gate.gates_after([], review, "approve") or []
        assert "judge" not in entry and "judgePassed" not in entry


def test_the_review_pins_the_judge_layer_from_the_bundle_not_the_report() -> None:
    spec = FunnelSpec.model_validate(
        {
            "judge": {"skill": "grade-it", "threshold": 0.7},
            "approve": {
                "rules": [{"roles": ["leads"], "quorum": "any"}],
                "roles": {"leads": {"users": ["ann"]}},
            },
        }
    )
    topology = BundleTopology.model_construct(funnels={"notes": spec})
    skill = BundleSkill.model_construct(name="grade-it", content_hash="h7")
    bundle = RunBundle.model_construct(topologies={"t": topology}, skills={"grade-it": skill})
    item = ReviewItem.model_construct(gate=GateReport(funnel="notes", score=0.75))
    wired = funnel_gate.gate_request(item, bundle, "carol")
    assert isinstance(wired, dict)
    assert wired["judge"] == {"skill": "grade-it", "threshold": 0.7}
    assert wired["judgeContentHash"] == "h7"
    review = {"metadata": {"name": "r"}, "spec": {"request": {"gate": wired}}}
    (entry,) = funnel_gate.gates_after([], review, "approve") or []
    assert entry["judgePassed"] is True  # 0.75 against the pinned 0.7
    assert entry["judgeContentHash"] == "h7"


async def test_a_runs_recorded_decision_reaches_the_index_and_wakes_the_evalsets_judging() -> None:
    """Through the operator's real wiring: the Runs' stream keeps the decisions index and
    enqueues the EvalSets whose judgeSkill graders use the skill (not the others)."""
    from types import SimpleNamespace

    from swarmkit_api import GROUP, VERSION
    from swarmkit_operator.config import OperatorConfig
    from swarmkit_operator.handlers import root

    wired = root.wiring()
    ctl = wired.controller(OperatorConfig())
    app = SimpleNamespace(controller=ctl, delivery=None, library=None)

    async def event(plural: str, body: dict[str, Any]) -> None:
        dispatch = wired.events.dispatcher(GROUP, VERSION, plural)
        assert dispatch is not None
        meta = body["metadata"]
        await dispatch(
            type="MODIFIED", body=body, namespace="ns", name=meta["name"], uid=meta["uid"],
            labels=meta.get("labels") or {}, spec=body.get("spec") or {},
            status=body.get("status") or {}, app=app, resource_plural=plural,
        )  # fmt: skip

    def evalset(name: str, skill: str) -> dict[str, Any]:
        grader = {"type": "judgeSkill", "skill": skill, "agent": "judge"}
        spec = {"cases": [{"name": "c", "input": "x", "grader": grader}]}
        meta = {"name": name, "namespace": "ns", "uid": f"{name}-uid", "generation": 1}
        return {"metadata": meta, "spec": spec, "status": {}}

    await event("evalsets", evalset("uses-it", "grade-it"))
    await event("evalsets", evalset("other", "something-else"))
    while ctl.queue.pending(("EvalSet", "ns", "uses-it")) or ctl.queue.pending(
        ("EvalSet", "ns", "other")
    ):
        ctl.queue.done(await ctl.queue.get())  # their own spec events, looked past
    body = run("notes-a", gate("Approved", True))
    body["metadata"].update(namespace="ns", uid="run-uid")
    await event("runs", body)
    (recorded,) = ctl.lookup_all(IndexId.FUNNEL_DECISIONS, ("ns", "grade-it"))
    assert [(d.judge_passed, d.people_passed) for d in recorded] == [(True, True)]
    assert ctl.queue.pending(("EvalSet", "ns", "uses-it"))
    assert not ctl.queue.pending(("EvalSet", "ns", "other"))
    # The EvalSet's reconcile shows it: status.funnelAgreement, from the index alone.
    writes: list[dict[str, Any]] = []

    async def write_status(target: Any, fields: Any, *args: Any, **kwargs: Any) -> bool:
        writes.append(dict(fields))
        return True

    ctl.write_status = write_status  # type: ignore[method-assign]
    assert await evaluation.reconcile_evalset(ctl, "ns", "uses-it", False) == "changed"
    (shown,) = writes[-1]["funnelAgreement"]
    assert (shown["skill"], shown["decisions"], shown["agreed"]) == ("grade-it", 1, 1)
    await evaluation.reconcile_evalset(ctl, "ns", "other", False)
    assert "funnelAgreement" not in writes[-1]
