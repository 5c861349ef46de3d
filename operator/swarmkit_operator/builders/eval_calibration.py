"""Judge calibration (pure): a judge's agreement with people, and the gate on it.

A model grader (``judgeSkill``, ``judgeAgent``) is only as good as its agreement with the
people whose judgement it stands in for. An EvalSet case may carry ``humanLabels``: answers
to its input that a person labelled ``pass`` or ``fail``. Every EvalRun runs the case's
judge once on each labelled answer (a *calibration* Run: the judge Agent, the same input
:func:`~.eval_graders.judge_input` gives it for a case, labelled with the EvalRun and role
``calibration``) and reads its verdict with the grader's threshold, exactly as it grades.

Per judge (its Agent, and its Skill for ``judgeSkill``; the labels of every case it judges
pooled) the person-by-judge pass/fail table gives Cohen's kappa, its standard error and
interval (:func:`~.eval_stats.cohen_kappa`). Kappa, not the share of agreement: a judge
that passes everything agrees with people on every good answer, and kappa discounts the
agreement its margins alone would give.

The gate: a grader's ``minKappa``. A judge whose kappa is below the highest ``minKappa`` of
its graders, over at least ``minLabels`` labelled answers it gave a verdict on, is not
trusted to decide: the EvalRun's verdict is ``Inconclusive`` (reason ``JudgeUncalibrated``,
or ``TooFewLabels`` when there are too few labels, or kappa is undefined because people or
judge gave one same verdict to every answer).

Funnel decisions (:func:`funnel_pairs`, :func:`funnel_agreement`): a Funnel's judge layer
runs a decision skill on one artifact, then people decide that artifact. Each settled gate
round the operator recorded in a Run's ``status.gates`` with the judge's verdict on the
artifact shown (``judgePassed``: score ≥ the pinned threshold) pairs it with the people's
decision: ``Approved`` is pass; ``Rejected`` and ``RevisionRequested`` (the artifact as
shown is not ready) are fail; ``Expired`` decides nothing and is left out. Per skill, the
newest :data:`~swarmkit_api.eval.MAX_FUNNEL_DECISIONS` pairs make a second table, with the
same kappa. It is not pooled with the labels: its raters answer another question (ship
this artifact, not "does it meet the case's rubric"), and the sample is censored (an
artifact the judge fails is redrafted, and reaches people only once the retries ran out),
which biases its kappa down. So it calibrates a ``judgeSkill`` judge on its own: the gate
holds when the labels' kappa or the funnel decisions' kappa clears it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from swarmkit_api.conditions import REASON_JUDGE_UNCALIBRATED, REASON_TOO_FEW_LABELS
from swarmkit_api.eval import (
    MAX_FUNNEL_DECISIONS,
    MODEL_GRADERS,
    EvalCase,
    EvalRunSpec,
    FunnelAgreement,
    Grader,
    Interval,
)
from swarmkit_api.eval import JudgeCalibration as Calibration

from ..hashing import MAX_SUBDOMAIN, fitted
from . import eval_runs as er
from .eval_graders import Grade, judge_input
from .eval_stats import cohen_kappa

#: The role label of a judge Run on a human-labelled answer.
CALIBRATION_ROLE = "calibration"


@dataclass(frozen=True)
class Labelled:
    """One human-labelled answer of a judged case, and the judge that grades it."""

    case: str
    index: int
    judge: str
    grader: Grader
    input: str
    answer: str
    human_pass: bool


def judge_of(grader: Grader) -> str:
    """The judge's name: its Agent, and the decision Skill it uses (judgeSkill)."""
    name = f"Agent/{grader.agent}"
    return f"{name}+Skill/{grader.skill}" if grader.type == "judgeSkill" else name


def judge_skills(cases: Iterable[EvalCase]) -> set[str]:
    """The decision skills of the cases' judgeSkill graders."""
    return {c.grader.skill for c in cases if c.grader.type == "judgeSkill" and c.grader.skill}


def labelled(cases: Iterable[EvalCase]) -> list[Labelled]:
    return [
        Labelled(
            c.name, i, judge_of(c.grader), c.grader, c.input, label.answer, label.verdict == "pass"
        )
        for c in cases
        if c.grader.type in MODEL_GRADERS
        for i, label in enumerate(c.human_labels)
    ]


def run_name(evalrun: str, item: Labelled) -> str:
    return fitted(f"{evalrun}-{item.case}-k{item.index}", MAX_SUBDOMAIN)


def calibration_run(
    namespace: str, evalrun: str, uid: str, spec: EvalRunSpec, item: Labelled
) -> dict[str, Any]:
    """The judge Run on one labelled answer: the case's judge Run, named and labelled as a
    calibration (it belongs to no side)."""
    manifest = er.case_run(
        namespace,
        evalrun,
        uid,
        spec,
        "judge",
        "candidate",
        item.case,
        item.index,
        {"agentRef": {"name": item.grader.agent}},
        judge_input(item.grader, item.input, item.answer),
    )
    meta = manifest["metadata"]
    meta["name"] = run_name(evalrun, item)
    labels = {k: v for k, v in meta["labels"].items() if k != er.EVAL_SIDE_LABEL}
    meta["labels"] = {**labels, er.EVAL_ROLE_LABEL: CALIBRATION_ROLE}
    return manifest


def _gates(cases: Iterable[EvalCase]) -> dict[str, tuple[float, int]]:
    """judge → (highest minKappa, highest minLabels) of its graders that set minKappa."""
    out: dict[str, tuple[float, int]] = {}
    for case in cases:
        g = case.grader
        if g.type in MODEL_GRADERS and g.min_kappa is not None:
            kappa, labels = out.get(judge_of(g), (-1.0, 0))
            out[judge_of(g)] = (max(kappa, g.min_kappa), max(labels, g.min_labels))
    return out


def kappa_fields(table: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Cohen's kappa of a [person fail/pass][judge fail/pass] table as status fields (kappa,
    standardError, interval clipped to [-1, 1], rounded); empty when it is undefined."""
    k = cohen_kappa(table)
    if k is None:
        return {}
    return {
        "kappa": round(k.kappa, 4),
        "standard_error": round(k.standard_error, 4),
        "interval": Interval(low=round(max(-1.0, k.low), 4), high=round(min(1.0, k.high), 4)),
    }


def _clears(n: int, kappa: float | None, gate: tuple[float, int]) -> bool:
    return kappa is not None and n >= gate[1] and kappa >= gate[0]


def calibrations(
    cases: Sequence[EvalCase],
    grades: Mapping[tuple[str, int], Grade],
    funnels: Mapping[str, FunnelAgreement] | None = None,
) -> list[Calibration]:
    """Each judge with labels or a gate: its kappa over the labelled answers graded so far
    (``grades`` by (case, label index); an errored judge Run is left out and counted) and,
    for a judgeSkill judge, its skill's agreement with Funnel decisions (``funnels`` by
    skill, :func:`funnel_agreement`), which calibrates it when it clears the gate alone."""
    gates = _gates(cases)
    items = labelled(cases)
    skills = {judge_of(c.grader): c.grader.skill for c in cases if c.grader.type == "judgeSkill"}
    out = []
    for judge in sorted({i.judge for i in items} | set(gates)):
        table = [[0, 0], [0, 0]]  # [person fail/pass][judge fail/pass]
        errored = 0
        for item in (i for i in items if i.judge == judge):
            got = grades.get((item.case, item.index))
            if got is not None and got.outcome == "Errored":
                errored += 1
            elif got is not None:
                table[int(item.human_pass)][int(got.passed)] += 1
        n = sum(map(sum, table))
        gate = gates.get(judge)
        fields: dict[str, Any] = {"judge": judge, "labels": n, "errored": errored}
        fields["agreed"] = table[0][0] + table[1][1]
        fields.update(kappa_fields(table))
        funnel = (funnels or {}).get(skills.get(judge) or "")
        if funnel is not None:
            fields["funnel_decisions"] = funnel
        if gate is not None:
            by_funnel = funnel is not None and _clears(funnel.decisions, funnel.kappa, gate)
            fields.update(
                min_kappa=gate[0],
                min_labels=gate[1],
                calibrated=_clears(n, fields.get("kappa"), gate) or by_funnel,
            )
        out.append(Calibration(**fields))
    return out


@dataclass(frozen=True)
class FunnelDecision:
    """One artifact a Funnel's judge skill gave a verdict on and people then decided."""

    funnel: str
    judge_passed: bool
    people_passed: bool
    #: The judge skill's content hash the Run pinned ("" when not recorded).
    content_hash: str
    #: Orders the history (newest last): the Run's creation time, its name, the round.
    at: tuple[str, str, int]


#: A gate round's settled state → did people pass the artifact shown (module docstring).
PEOPLE_PASSED = {"Approved": True, "Rejected": False, "RevisionRequested": False}


def funnel_pairs(run: Mapping[str, Any]) -> dict[str, list[FunnelDecision]]:
    """judge skill → the decided, judged gate rounds of one Run's ``status.gates`` (the
    operator's own record: nobody else writes a Run's status); its newest
    ``MAX_FUNNEL_DECISIONS`` entries, so what one Run adds to the index is bounded."""
    meta = run.get("metadata") or {}
    created, name = str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")
    out: dict[str, list[FunnelDecision]] = {}
    gates = list((run.get("status") or {}).get("gates") or ())
    for g in gates[-MAX_FUNNEL_DECISIONS:]:
        people = PEOPLE_PASSED.get(str(g.get("state")))
        skill, judge = g.get("judge"), g.get("judgePassed")
        if people is None or not isinstance(skill, str) or not isinstance(judge, bool):
            continue
        at = (created, name, int(g.get("round") or 1))
        judged_by = str(g.get("judgeContentHash") or "")
        out.setdefault(skill, []).append(
            FunnelDecision(str(g.get("funnel") or ""), judge, people, judged_by, at)
        )
    return out


def funnel_agreement(
    skill: str,
    decisions: Iterable[FunnelDecision],
    content_hash: str | None = None,
    limit: int = MAX_FUNNEL_DECISIONS,
) -> FunnelAgreement:
    """The skill's kappa against people over its newest ``limit`` funnel decisions judged
    by the skill at ``content_hash`` (its current version; None: any). An edited skill is
    another judge: what its earlier version judged says nothing of it."""
    found = list(decisions)
    mine = [d for d in found if content_hash is None or d.content_hash == content_hash]
    kept = sorted(mine, key=lambda d: d.at)[-limit:] if limit > 0 else []
    table = [[0, 0], [0, 0]]  # [people fail/pass][judge fail/pass]
    for d in kept:
        table[int(d.people_passed)][int(d.judge_passed)] += 1
    return FunnelAgreement(
        skill=skill,
        content_hash=content_hash,
        other_versions=len(found) - len(mine),
        funnels=sorted({d.funnel for d in kept})[:64],
        decisions=len(kept),
        agreed=table[0][0] + table[1][1],
        judge_failed=table[0][0] + table[1][0],
        people_failed=table[0][0] + table[0][1],
        **kappa_fields(table),
    )


def gate(judges: Sequence[Calibration]) -> tuple[str, str] | None:
    """(reason, message) of the first judge not trusted to decide, or None:
    ``JudgeUncalibrated`` when either table measured a kappa below ``minKappa`` over enough
    answers, ``TooFewLabels`` when neither measured one."""
    for j in judges:
        if j.calibrated is not False:
            continue
        least = j.min_labels or 0
        f = j.funnel_decisions
        also = (
            f" (its {f.decisions} Funnel decision(s) give kappa {f.kappa}: not enough either)"
            if f is not None
            else ""
        )
        labels_measured = j.kappa is not None and j.labels >= least
        if labels_measured or (f is not None and f.kappa is not None and f.decisions >= least):
            return REASON_JUDGE_UNCALIBRATED, (
                f"judge {j.judge}: Cohen's kappa {j.kappa} is below minKappa {j.min_kappa} "
                f"over {j.labels} labelled answer(s){also}: not trusted to decide"
            )
        why = (
            f"minLabels {j.min_labels}"
            if j.labels < least
            else "kappa is undefined: people and judge gave every answer one same verdict"
        )
        return REASON_TOO_FEW_LABELS, (
            f"judge {j.judge}: {j.labels} labelled answer(s) it gave a verdict on, "
            f"too few to estimate its kappa ({why}){also}"
        )
    return None


__all__ = [
    "CALIBRATION_ROLE",
    "PEOPLE_PASSED",
    "FunnelDecision",
    "Labelled",
    "calibration_run",
    "calibrations",
    "funnel_agreement",
    "funnel_pairs",
    "gate",
    "judge_of",
    "judge_skills",
    "kappa_fields",
    "labelled",
    "run_name",
]
