"""An EvalRun's results (pure): trials → case results → side summaries → the verdict.

A case on one side is ``trials`` graded Runs (one when its grader is deterministic). It is
``Errored`` when any trial errored (a grader that could not decide, a Run that failed or
pinned another version than asked): never passed. Otherwise it ``Passed`` when a strict
majority of its trials passed, and it is *flaky* when its trials disagree. Its score is the
mean of its trials' scores (1/0 for pass/fail graders, a judge's score otherwise).

The verdict (:func:`verdict`) is ``Fail`` when the evidence says the candidate is worse:
a critical case regressed, more regressions than ``maxNewRegressions``, the paired
difference's interval entirely below -margin, or the candidate's pass-rate interval
entirely below ``minPassRate``. It is ``Pass`` only when every bound is cleared by the
whole interval and no case errored; everything else (too few graded cases, an interval
that straddles a bound, an errored case, nothing to compare with) is ``Inconclusive``. A
judge below its ``minKappa`` (:mod:`.eval_calibration`) decides nothing: the verdict is then
``Inconclusive`` whatever the rates, with the gate's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from swarmkit_api.conditions import REASON_EVALUATED
from swarmkit_api.eval import (
    CaseResult,
    Comparison,
    EvalCriteria,
    Interval,
    JudgeCalibration,
    SideResult,
    SideSummary,
)
from swarmkit_api.spend import format_money

from . import eval_stats as stats
from .eval_calibration import gate
from .eval_graders import Grade, capped


@dataclass(frozen=True)
class Trial:
    """One graded (or not yet graded) Run of a case on one side."""

    run: str
    grade: Grade | None = None  # None: still running (or its judge is)
    version: str | None = None
    cost_micros: int | None = None
    cost_unknown: bool = False
    latency_seconds: float | None = None
    judge_run: str | None = None
    cached: bool = False


@dataclass(frozen=True)
class CaseInfo:
    name: str
    weight: float
    grader: str
    critical: bool = False


@dataclass(frozen=True)
class Evaluated:
    """Everything an EvalRun's status reports, computed from its trials."""

    cases: tuple[CaseResult, ...]
    candidate: SideSummary
    baseline: SideSummary | None
    comparison: Comparison | None
    regressed: tuple[str, ...]
    fixed: tuple[str, ...]
    flaky: tuple[str, ...]
    errored: tuple[str, ...]
    pending: int
    total_cost_micros: int | None
    verdict: str
    reason: str
    judges: tuple[JudgeCalibration, ...] = ()
    #: The Succeeded condition's reason once there is a verdict.
    condition_reason: str = REASON_EVALUATED


def side_result(trials: Sequence[Trial], expected: int) -> SideResult:
    """One case on one side from its trials (``expected`` trials in all)."""
    graded = [t for t in trials if t.grade is not None]
    costs = [t.cost_micros for t in trials if t.cost_micros is not None]
    latencies = [t.latency_seconds for t in trials if t.latency_seconds is not None]
    common = {
        "runs": [t.run for t in trials],
        "judge_runs": [t.judge_run for t in trials if t.judge_run],
        "version": next((t.version for t in trials if t.version), None),
        "cost": format_money(sum(costs))
        if costs and not any(t.cost_unknown for t in trials)
        else None,
        "latency_seconds": round(sum(latencies) / len(latencies), 3) if latencies else None,
        "cached": bool(trials) and all(t.cached for t in trials),
        "trials": len(graded),
    }
    failed = [t.grade for t in graded if t.grade is not None and t.grade.outcome == "Errored"]
    if failed:
        return SideResult(outcome="Errored", reasoning=failed[0].reasoning, **common)
    if len(graded) < expected:
        return SideResult(outcome="Pending", **common)
    grades = [t.grade for t in graded if t.grade is not None]
    passes = sum(g.passed for g in grades)
    scores = [g.score for g in grades if g.score is not None]
    deciding = next((g for g in grades if g.passed == (passes * 2 > len(grades))), grades[0])
    return SideResult(
        outcome="Passed" if passes * 2 > len(grades) else "Failed",
        passes=passes,
        score=round(sum(scores) / len(scores), 4) if scores else None,
        reasoning=capped(deciding.reasoning),
        **common,
    )


def flaky(result: SideResult) -> bool:
    return result.outcome in ("Passed", "Failed") and 0 < result.passes < result.trials


def change_of(candidate: SideResult, baseline: SideResult | None) -> str:
    sides = [candidate] if baseline is None else [candidate, baseline]
    if any(s.outcome == "Pending" for s in sides):
        return "Pending"
    if any(s.outcome == "Errored" for s in sides):
        return "Errored"
    if any(flaky(s) for s in sides):
        return "Flaky"
    if baseline is None or candidate.outcome == baseline.outcome:
        return "Same"
    return "Fixed" if candidate.outcome == "Passed" else "Regressed"


def _latency(trials: Sequence[Trial], q: float) -> float | None:
    values = sorted(t.latency_seconds for t in trials if t.latency_seconds is not None)
    return round(stats.percentile(values, q), 3) if values else None


def side_summary(
    target: str, results: Sequence[tuple[CaseInfo, SideResult]], trials: Sequence[Trial]
) -> SideSummary:
    graded = [(c, r) for c, r in results if r.outcome in ("Passed", "Failed")]
    passed = sum(r.outcome == "Passed" for _, r in graded)
    costs = [t.cost_micros for t in trials if t.cost_micros is not None]
    scored = [(c.weight, r.score) for c, r in graded if r.score is not None]
    out = SideSummary(
        target=target,
        version=next((r.version for _, r in results if r.version), None),
        cases=len(graded),
        passed=passed,
        errored=sum(r.outcome == "Errored" for _, r in results),
        cost=format_money(sum(costs))
        if costs and not any(t.cost_unknown for t in trials)
        else None,
        latency_p50_seconds=_latency(trials, 50),
        latency_p95_seconds=_latency(trials, 95),
    )
    if not graded:
        return out
    low, high = stats.wilson(passed, len(graded))
    score = stats.weighted_mean([s for _, s in scored], [w for w, _ in scored]) if scored else None
    return out.model_copy(
        update={
            "pass_rate": round(passed / len(graded), 4),
            "interval": Interval(low=round(low, 4), high=round(high, 4)),
            "score": round(score, 4) if score is not None else None,
        }
    )


def comparison(cases: Sequence[CaseResult], seed: int) -> Comparison:
    """The paired comparison over the cases graded on both sides."""
    pairs = [
        c
        for c in cases
        if c.baseline is not None
        and c.candidate.score is not None
        and c.baseline.score is not None
        and c.change not in ("Pending", "Errored")
    ]
    regressed = sum(c.change == "Regressed" for c in cases)
    fixed = sum(c.change == "Fixed" for c in cases)
    if not pairs:
        return Comparison(regressed=regressed, fixed=fixed)
    diffs = [(c.candidate.score or 0.0) - (c.baseline.score or 0.0) for c in pairs if c.baseline]
    weights = [c.weight for c in pairs]
    low, high = stats.paired_bootstrap(diffs, weights, seed=seed)
    return Comparison(
        pairs=len(pairs),
        difference=round(stats.weighted_mean(diffs, weights), 4),
        interval=Interval(low=round(low, 4), high=round(high, 4)),
        regressed=regressed,
        fixed=fixed,
        p_value=round(stats.mcnemar_exact(regressed, fixed), 6),
    )


def verdict(
    criteria: EvalCriteria,
    candidate: SideSummary,
    compared: Comparison | None,
    regressed: Sequence[str],
    critical_regressed: Sequence[str],
    errored: Sequence[str],
) -> tuple[str, str]:
    """(Pass | Fail | Inconclusive, why), as the module docstring says."""
    margin = criteria.non_inferiority_margin
    if critical_regressed:
        return "Fail", f"critical case(s) regressed: {', '.join(critical_regressed)}"
    limit = criteria.max_new_regressions
    if limit is not None and len(regressed) > limit:
        return "Fail", f"{len(regressed)} regressed case(s), at most {limit} allowed: " + ", ".join(
            regressed
        )
    if compared is not None and compared.interval is not None and compared.interval.high < -margin:
        return "Fail", (
            f"the difference's interval [{compared.interval.low}, {compared.interval.high}] is "
            f"below -{margin}"
        )
    floor = criteria.min_pass_rate
    if floor is not None and candidate.interval is not None and candidate.interval.high < floor:
        return "Fail", f"the candidate's pass-rate interval is below minPassRate {floor}"
    if candidate.cases < criteria.min_cases:
        return "Inconclusive", f"{candidate.cases} graded case(s), minCases {criteria.min_cases}"
    if errored:
        return "Inconclusive", f"errored case(s) never pass: {', '.join(errored)}"
    if compared is None and floor is None:
        return "Inconclusive", "no baseline and no minPassRate: nothing to judge against"
    if compared is not None:
        if compared.interval is None:
            return "Inconclusive", "no case was graded on both sides"
        if compared.interval.low < -margin:
            return "Inconclusive", (
                f"the difference's interval [{compared.interval.low}, "
                f"{compared.interval.high}] straddles -{margin}"
            )
    if floor is not None and (candidate.interval is None or candidate.interval.low < floor):
        return "Inconclusive", f"the candidate's pass-rate interval straddles {floor}"
    return "Pass", "every bound is cleared by its whole interval"


def trusted(
    outcome: str, why: str, judges: Sequence[JudgeCalibration], calibrating: int
) -> tuple[str, str, str]:
    """The verdict once the judges' calibration is known: none while a calibration Run
    runs; Inconclusive, with the gate's reason, when a judge is not trusted to decide."""
    if calibrating:
        return "", f"{calibrating} calibration Run(s) still running", REASON_EVALUATED
    untrusted = gate(judges)
    if outcome and untrusted is not None:
        return "Inconclusive", untrusted[1], untrusted[0]
    return outcome, why, REASON_EVALUATED


#: side → case name → its trials.
TrialsBySide = Mapping[str, Mapping[str, Sequence[Trial]]]


def evaluate(
    cases: Sequence[CaseInfo],
    trials: TrialsBySide,
    expected_trials: Mapping[str, int],
    targets: Mapping[str, str],
    criteria: EvalCriteria,
    seed: int,
    keys: Mapping[tuple[str, str], str] | None = None,
    cached: Mapping[tuple[str, str], SideResult] | None = None,
    judges: Sequence[JudgeCalibration] = (),
    calibrating: int = 0,
) -> Evaluated:
    """Everything the status reports. ``targets`` names the sides (``candidate`` always,
    ``baseline`` when compared); ``expected_trials`` is per case; ``keys`` the results
    cache's key of each (side, case), ``cached`` the results reused from it; ``judges``
    and ``calibrating``: see :func:`trusted`."""
    compared = "baseline" in targets
    results: list[CaseResult] = []
    per_side: dict[str, list[tuple[CaseInfo, SideResult]]] = {s: [] for s in targets}
    for case in cases:
        sides = {
            s: (cached or {}).get((s, case.name))
            or side_result(trials.get(s, {}).get(case.name, ()), expected_trials[case.name])
            for s in targets
        }
        sides = {
            s: r.model_copy(update={"key": (keys or {}).get((s, case.name))})
            for s, r in sides.items()
        }
        for s, r in sides.items():
            per_side[s].append((case, r))
        base = sides.get("baseline")
        results.append(
            CaseResult(
                name=case.name,
                weight=case.weight,
                grader=case.grader,
                candidate=sides["candidate"],
                baseline=base,
                change=change_of(sides["candidate"], base),
            )
        )
    all_trials = {s: [t for ts in trials.get(s, {}).values() for t in ts] for s in targets}
    summaries = {s: side_summary(targets[s], per_side[s], all_trials[s]) for s in targets}
    compare = comparison(results, seed) if compared else None
    named = {c: [r.name for r in results if r.change == c] for c in ("Regressed", "Fixed", "Flaky")}
    errored = [r.name for r in results if r.change == "Errored"]
    critical = {c.name for c in cases if c.critical}
    pending = sum(r.change == "Pending" for r in results)
    every = [t for ts in all_trials.values() for t in ts]
    costs = [t.cost_micros for t in every if t.cost_micros is not None]
    total = sum(costs) if costs and not any(t.cost_unknown for t in every) else None
    if pending:
        outcome, why = "", f"{pending} case(s) still running"
    else:
        outcome, why = verdict(
            criteria,
            summaries["candidate"],
            compare,
            named["Regressed"],
            [n for n in named["Regressed"] if n in critical],
            errored,
        )
    outcome, why, reason = trusted(outcome, why, judges, calibrating)
    return Evaluated(
        cases=tuple(results),
        candidate=summaries["candidate"],
        baseline=summaries.get("baseline"),
        comparison=compare,
        regressed=tuple(named["Regressed"]),
        fixed=tuple(named["Fixed"]),
        flaky=tuple(named["Flaky"]),
        errored=tuple(errored),
        pending=pending,
        total_cost_micros=total,
        verdict=outcome,
        reason=why,
        judges=tuple(judges),
        condition_reason=reason,
    )
