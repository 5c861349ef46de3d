"""From graded trials to the verdict: Pass only when every bound is cleared."""

from __future__ import annotations

from swarmkit_api.eval import EvalCriteria
from swarmkit_operator.builders.eval_graders import Grade, errored
from swarmkit_operator.builders.eval_results import CaseInfo, Trial, evaluate, side_result

PASS = Grade("Passed", 1.0, "ok")
FAIL = Grade("Failed", 0.0, "no")
TARGETS = {"candidate": "Agent/triage-v2", "baseline": "Agent/triage"}


def run(
    candidate: list[bool | None],
    baseline: list[bool | None] | None,
    criteria: EvalCriteria | None = None,
    critical: set[int] = frozenset(),  # type: ignore[assignment]
):
    cases = [CaseInfo(f"c{i}", 1.0, "contains", i in critical) for i in range(len(candidate))]

    def trials(outcomes: list[bool | None], side: str) -> dict[str, list[Trial]]:
        out = {}
        for i, ok in enumerate(outcomes):
            graded = None if ok is None else (PASS if ok else FAIL)
            out[f"c{i}"] = [Trial(f"{side}-{i}", graded, "v1", 1000, False, 2.0 + i)]
        return out

    by_side = {"candidate": trials(candidate, "c")}
    targets = dict(TARGETS)
    if baseline is None:
        del targets["baseline"]
    else:
        by_side["baseline"] = trials(baseline, "b")
    return evaluate(
        cases, by_side, {c.name: 1 for c in cases}, targets, criteria or EvalCriteria(), seed=0
    )


def test_a_candidate_as_good_or_better_passes() -> None:
    ev = run([True] * 6, [True] * 5 + [False])
    assert ev.verdict == "Pass", ev.reason
    assert ev.fixed == ("c5",) and ev.regressed == ()
    assert ev.candidate.pass_rate == 1.0 and ev.baseline is not None
    assert ev.baseline.pass_rate == round(5 / 6, 4)
    assert ev.comparison is not None and ev.comparison.interval is not None
    assert ev.comparison.interval.low >= 0 and ev.comparison.fixed == 1
    assert ev.total_cost_micros == 12000
    assert ev.candidate.latency_p50_seconds == 4.5


def test_a_candidate_that_breaks_cases_fails_and_names_them() -> None:
    ev = run([False, False, False, False, True, True], [True] * 6)
    assert ev.verdict == "Fail"
    assert ev.regressed == ("c0", "c1", "c2", "c3")
    assert ev.comparison is not None and ev.comparison.p_value is not None
    assert ev.comparison.p_value == 0.125  # 4 discordant, all one way: 2 / 16


def test_one_critical_regression_fails_whatever_the_rates() -> None:
    ev = run([False] + [True] * 9, [True] * 10, critical={0})
    assert ev.verdict == "Fail" and "c0" in ev.reason


def test_an_interval_straddling_the_margin_is_inconclusive_never_pass() -> None:
    ev = run([False, True, True, True, True, True], [True] * 6)
    assert ev.verdict == "Inconclusive", ev.reason
    assert "straddles" in ev.reason


def test_too_few_cases_is_inconclusive() -> None:
    ev = run([True] * 3, [True] * 3)
    assert ev.verdict == "Inconclusive" and "minCases" in ev.reason


def test_an_errored_case_is_never_passed() -> None:
    cases = [CaseInfo(f"c{i}", 1.0, "regex") for i in range(6)]
    trials = {f"c{i}": [Trial(f"r{i}", PASS)] for i in range(6)}
    trials["c2"] = [Trial("r2", errored("the grader's pattern does not compile"))]
    ev = evaluate(
        cases,
        {"candidate": trials, "baseline": trials},
        {c.name: 1 for c in cases},
        TARGETS,
        EvalCriteria(),
        seed=0,
    )
    case = next(c for c in ev.cases if c.name == "c2")
    assert case.candidate.outcome == "Errored" and case.change == "Errored"
    assert ev.errored == ("c2",) and ev.verdict == "Inconclusive"
    assert ev.candidate.cases == 5 and ev.candidate.errored == 1


def test_still_running_has_no_verdict() -> None:
    ev = run([True, None, True, True, True, True], [True] * 6)
    assert ev.verdict == "" and ev.pending == 1


def test_trials_that_disagree_are_flaky_and_the_majority_decides() -> None:
    mixed = [Trial("a", PASS), Trial("b", FAIL), Trial("c", PASS)]
    result = side_result(mixed, 3)
    assert result.outcome == "Passed" and result.passes == 2 and result.trials == 3
    assert side_result(mixed[:2], 3).outcome == "Pending"
    cases = [CaseInfo("c0", 1.0, "judgeAgent")]
    ev = evaluate(
        cases,
        {"candidate": {"c0": mixed}, "baseline": {"c0": mixed}},
        {"c0": 3},
        TARGETS,
        EvalCriteria(min_cases=1),
        seed=0,
    )
    assert ev.flaky == ("c0",)


def test_no_baseline_needs_a_floor() -> None:
    assert run([True] * 8, None).verdict == "Inconclusive"
    ev = run([True] * 20, None, EvalCriteria(min_pass_rate=0.8))
    assert ev.verdict == "Pass", ev.reason
    assert run([False] * 20, None, EvalCriteria(min_pass_rate=0.8)).verdict == "Fail"


def test_the_same_trials_give_the_same_status() -> None:
    a = run(
        [True, False, True, True, False, True, True], [True, True, False, True, True, True, True]
    )
    b = run(
        [True, False, True, True, False, True, True], [True, True, False, True, True, True, True]
    )
    assert a == b
