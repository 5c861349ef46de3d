"""Judge calibration: Cohen's kappa against published worked examples, and the gate.

Kappa and its standard error are checked against two published tables, computed from the
tables themselves:

- Fleiss & Paik (2003), *Statistical Methods for Rates and Proportions* (3rd ed.), as
  implemented and documented by Bonett's ``statpsych`` R package, ``ci.kappa(.05, 31, 12,
  4, 58)`` (https://dgbonett.github.io/statpsych/reference/ci.kappa.html): Cohen's kappa
  0.6756757, SE 0.07344761, 95 % interval [0.5317210, 0.8196303].
- The "simple example" of Wikipedia's *Cohen's kappa* article: 50 grant proposals, both
  readers yes 20, A yes B no 5, A no B yes 10, both no 15: p_o = 0.7, p_e = 0.5, kappa 0.4.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from swarmkit_api import ManifestError, validate_manifest
from swarmkit_api.conditions import REASON_JUDGE_UNCALIBRATED, REASON_TOO_FEW_LABELS
from swarmkit_api.eval import EvalCase, EvalCriteria, EvalRunSpec
from swarmkit_operator.builders import eval_calibration as cal
from swarmkit_operator.builders import eval_runs as er
from swarmkit_operator.builders.eval_graders import Grade, errored
from swarmkit_operator.builders.eval_results import CaseInfo, Trial, evaluate
from swarmkit_operator.builders.eval_stats import cohen_kappa

PASS = Grade("Passed", 1.0, "ok")
FAIL = Grade("Failed", 0.0, "no")


def test_kappa_and_its_standard_error_match_fleiss_paik_via_statpsych() -> None:
    # statpsych's f00, f01, f10, f11 = 31, 12, 4, 58 (y rows, x columns).
    k = cohen_kappa([[31, 12], [4, 58]])
    assert k is not None
    assert round(k.kappa, 7) == 0.6756757
    assert round(k.standard_error, 8) == 0.07344761
    assert round(k.low, 7) == 0.5317210
    assert round(k.high, 7) == 0.8196303


def test_kappa_matches_the_wikipedia_worked_example() -> None:
    k = cohen_kappa([[20, 5], [10, 15]])
    assert k is not None
    assert math.isclose(k.observed, 0.7) and math.isclose(k.chance, 0.5)
    assert math.isclose(k.kappa, 0.4)
    assert k.low < 0.4 < k.high


def test_kappa_is_symmetric_in_the_raters_and_bounded_by_perfect_agreement() -> None:
    a, b = cohen_kappa([[20, 5], [10, 15]]), cohen_kappa([[20, 10], [5, 15]])
    assert a is not None and b is not None
    assert math.isclose(a.kappa, b.kappa) and math.isclose(a.standard_error, b.standard_error)
    perfect = cohen_kappa([[7, 0], [0, 5]])
    assert perfect is not None and perfect.kappa == 1.0 and perfect.standard_error == 0.0
    # Agreement no better than the margins give: kappa 0 (a judge that passes everything).
    rubber_stamp = cohen_kappa([[0, 4], [0, 6]])
    assert rubber_stamp is not None and rubber_stamp.kappa == 0.0


def test_kappa_is_undefined_without_items_or_without_any_variation() -> None:
    assert cohen_kappa([[0, 0], [0, 0]]) is None
    assert cohen_kappa([[0, 0], [0, 9]]) is None


def judged(name: str, labels: list[tuple[str, str]], agent: str = "judge", **grader: Any):
    return EvalCase.model_validate(
        {
            "name": name,
            "input": f"input of {name}",
            "grader": {"type": "judgeAgent", "agent": agent, "rubric": "r", **grader},
            "humanLabels": [{"answer": a, "verdict": v} for a, v in labels],
        }
    )


def grades_for(case: EvalCase, judge_says: list[bool | None]) -> dict[tuple[str, int], Grade]:
    return {
        (case.name, i): errored("garbage") if ok is None else (PASS if ok else FAIL)
        for i, ok in enumerate(judge_says)
    }


LABELS = [(f"answer {i}", "pass" if i % 2 == 0 else "fail") for i in range(10)]


def test_a_judge_that_agrees_with_people_is_calibrated() -> None:
    case = judged("tone", LABELS, minKappa=0.6)
    says = [i % 2 == 0 for i in range(10)]
    (j,) = cal.calibrations([case], grades_for(case, says))
    assert (j.judge, j.labels, j.agreed, j.kappa, j.calibrated) == (
        "Agent/judge",
        10,
        10,
        1.0,
        True,
    )
    assert j.min_kappa == 0.6 and j.min_labels == 10
    assert cal.gate([j]) is None


def test_a_judge_that_disagrees_is_named_with_its_kappa_and_labels() -> None:
    case = judged("tone", LABELS, minKappa=0.6, minLabels=9)
    says = [True] * 9 + [None]  # passes everything; one answer it gave no verdict on
    (j,) = cal.calibrations([case], grades_for(case, says))
    assert (j.labels, j.errored, j.agreed, j.kappa, j.calibrated) == (9, 1, 5, 0.0, False)
    assert j.interval is not None
    reason, message = cal.gate([j]) or ("", "")
    assert reason == REASON_JUDGE_UNCALIBRATED
    assert "Agent/judge" in message and "kappa 0.0" in message and "9 labelled" in message


def test_too_few_labels_is_its_own_reason() -> None:
    case = judged("tone", LABELS[:4], minKappa=0.6, minLabels=5)
    (j,) = cal.calibrations([case], grades_for(case, [True, False, True, False]))
    assert j.kappa == 1.0 and j.calibrated is False
    reason, message = cal.gate([j]) or ("", "")
    assert reason == REASON_TOO_FEW_LABELS and "minLabels 5" in message
    # A gate with no label at all: Inconclusive until people label answers.
    bare = judged("bare", [], agent="other", minKappa=0.5)
    (j,) = cal.calibrations([bare], {})
    assert j.labels == 0 and j.kappa is None and cal.gate([j])[0] == REASON_TOO_FEW_LABELS  # type: ignore[index]


def test_labels_of_every_case_a_judge_grades_are_pooled_and_the_gate_is_the_strictest() -> None:
    a = judged("a", LABELS[:6], minKappa=0.2)
    b = judged("b", LABELS[6:], minKappa=0.7, minLabels=8)
    other = judged("c", LABELS[:2], agent="other")  # no gate: reported, never gating
    grades = {**grades_for(a, [True, False] * 3), **grades_for(b, [True, False, True, True])}
    grades |= grades_for(other, [True, True])
    judges = cal.calibrations([a, b, other], grades)
    assert [j.judge for j in judges] == ["Agent/judge", "Agent/other"]
    main, second = judges
    assert (main.labels, main.agreed, main.min_kappa, main.min_labels) == (10, 9, 0.7, 10)
    assert main.kappa == 0.8 and main.calibrated is True
    assert second.calibrated is None and second.min_kappa is None and cal.gate([second]) is None


def test_a_judge_skill_is_its_agent_and_its_skill() -> None:
    case = EvalCase.model_validate(
        {
            "name": "res",
            "input": "x",
            "grader": {"type": "judgeSkill", "skill": "grade-it", "agent": "judge"},
            "humanLabels": [{"answer": "a", "verdict": "pass"}],
        }
    )
    assert cal.labelled([case])[0].judge == "Agent/judge+Skill/grade-it"


def test_a_calibration_run_is_the_judge_on_the_labelled_answer() -> None:
    case = judged("tone", [("We refunded you.", "pass")], minKappa=0.5)
    spec = EvalRunSpec.model_validate(
        {
            "evalSetRef": {"name": "s"},
            "candidate": {"agentRef": {"name": "t"}},
            "maxCostPerRun": "0.1",
        }
    )
    (item,) = cal.labelled([case])
    run = cal.calibration_run("ns", "ev", "uid-1", spec, item)
    assert run["metadata"]["name"] == "ev-tone-k0"
    labels = run["metadata"]["labels"]
    assert labels[er.EVAL_ROLE_LABEL] == "calibration" and labels[er.EVAL_RUN_LABEL] == "ev"
    assert er.EVAL_SIDE_LABEL not in labels
    assert run["spec"]["agentRef"] == {"name": "judge"} and run["spec"]["maxCost"] == "0.1"
    assert "We refunded you." in run["spec"]["input"] and "## Rubric\nr" in run["spec"]["input"]
    # Its name never collides with the case's own Runs.
    names = {r["metadata"]["name"] for r in er.planned_runs("ns", "ev", "u", spec, [case], {})}
    assert run["metadata"]["name"] not in names


def _evaluate(judges: list[Any], calibrating: int = 0):
    cases = [CaseInfo(f"c{i}", 1.0, "contains") for i in range(6)]
    trials = {"candidate": {c.name: [Trial(f"r{c.name}", PASS, "v1")] for c in cases}}
    return evaluate(
        cases,
        trials,
        {c.name: 1 for c in cases},
        {"candidate": "Agent/t"},
        EvalCriteria(minPassRate=0.5),
        seed=0,
        judges=judges,
        calibrating=calibrating,
    )


def test_an_uncalibrated_judge_makes_a_passing_evalrun_inconclusive() -> None:
    assert _evaluate([]).verdict == "Pass"
    case = judged("tone", LABELS, minKappa=0.6)
    bad = cal.calibrations([case], grades_for(case, [True] * 10))
    ev = _evaluate(bad)
    assert ev.verdict == "Inconclusive" and ev.condition_reason == REASON_JUDGE_UNCALIBRATED
    assert "Agent/judge" in ev.reason and ev.judges == tuple(bad)
    good = cal.calibrations([case], grades_for(case, [i % 2 == 0 for i in range(10)]))
    ev = _evaluate(good)
    assert ev.verdict == "Pass" and ev.condition_reason == "Evaluated"
    # No verdict while a calibration Run is still running.
    assert _evaluate(good, calibrating=1).verdict == ""


@pytest.mark.parametrize(
    ("grader", "labels", "message"),
    [
        (
            {"type": "contains", "expected": "y"},
            [{"answer": "a", "verdict": "pass"}],
            "humanLabels",
        ),
        ({"type": "contains", "expected": "y", "minKappa": 0.5}, [], "minKappa gates a judge"),
        ({"type": "judgeAgent", "agent": "j", "rubric": "r", "minKappa": 2}, [], "minKappa"),
        (
            {"type": "judgeAgent", "agent": "j", "rubric": "r"},
            [{"answer": "a", "verdict": "ok"}],
            "verdict",
        ),
    ],
)
def test_admission_refuses_labels_and_gates_where_no_judge_is(
    grader: dict[str, Any], labels: list[Any], message: str
) -> None:
    doc = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "EvalSet",
        "metadata": {"name": "s"},
        "spec": {"cases": [{"name": "c", "input": "x", "grader": grader, "humanLabels": labels}]},
    }
    with pytest.raises(ManifestError) as exc:
        validate_manifest(doc)
    assert message in str(exc.value)


def test_labels_and_the_gate_keep_the_results_cache_key() -> None:
    target = er.SideTarget("Agent", "t", "abc12345")
    plain = EvalCase.model_validate(
        {
            "name": "tone",
            "input": "x",
            "grader": {"type": "judgeAgent", "agent": "j", "rubric": "r"},
        }
    )
    gated = judged("tone", LABELS, minKappa=0.6).model_copy(update={"input": "x"})
    gated = gated.model_copy(update={"grader": gated.grader.model_copy(update={"agent": "j"})})
    assert er.cache_key(gated, target, 3) == er.cache_key(plain, target, 3)
    stricter = plain.model_copy(
        update={"grader": plain.grader.model_copy(update={"threshold": 0.9})}
    )
    assert er.cache_key(stricter, target, 3) != er.cache_key(plain, target, 3)


def test_the_evalset_shows_the_newest_calibration_of_its_version() -> None:
    from swarmkit_operator.handlers.evaluation import latest_calibration

    judges = [{"judge": "Agent/j", "labels": 10, "kappa": 0.8}]
    found = [
        {
            "name": "old",
            "completionTime": "2026-12-06T01:00:00Z",
            "evalSetVersion": "v1",
            "judges": [{"judge": "Agent/j", "labels": 10, "kappa": 0.1}],
        },
        {
            "name": "new",
            "completionTime": "2026-12-06T02:00:00Z",
            "evalSetVersion": "v1",
            "judges": judges,
        },
        {
            "name": "newer-other-labels",
            "completionTime": "2026-12-06T03:00:00Z",
            "evalSetVersion": "v0",
            "judges": [],
        },
    ]
    assert latest_calibration(found, "v1") == {"judges": judges, "calibrationEvalRun": "new"}
    assert latest_calibration(found, "v2") == {}
