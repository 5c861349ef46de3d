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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from swarmkit_api.conditions import REASON_JUDGE_UNCALIBRATED, REASON_TOO_FEW_LABELS
from swarmkit_api.eval import MODEL_GRADERS, EvalCase, EvalRunSpec, Grader, Interval
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


def calibrations(
    cases: Sequence[EvalCase], grades: Mapping[tuple[str, int], Grade]
) -> list[Calibration]:
    """Each judge with labels or a gate: its kappa over the labelled answers graded so far
    (``grades`` by (case, label index); an errored judge Run is left out and counted)."""
    gates = _gates(cases)
    items = labelled(cases)
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
        k = cohen_kappa(table)
        gate = gates.get(judge)
        fields: dict[str, Any] = {"judge": judge, "labels": n, "errored": errored}
        fields["agreed"] = table[0][0] + table[1][1]
        if k is not None:
            fields.update(
                kappa=round(k.kappa, 4),
                standard_error=round(k.standard_error, 4),
                interval=Interval(low=round(max(-1.0, k.low), 4), high=round(min(1.0, k.high), 4)),
            )
        if gate is not None:
            fields.update(
                min_kappa=gate[0],
                min_labels=gate[1],
                calibrated=k is not None and n >= gate[1] and k.kappa >= gate[0],
            )
        out.append(Calibration(**fields))
    return out


def gate(judges: Sequence[Calibration]) -> tuple[str, str] | None:
    """(reason, message) of the first judge not trusted to decide, or None."""
    for j in judges:
        if j.calibrated is not False:
            continue
        if j.kappa is None or j.labels < (j.min_labels or 0):
            why = (
                f"minLabels {j.min_labels}"
                if j.labels < (j.min_labels or 0)
                else "kappa is undefined: people and judge gave every answer one same verdict"
            )
            return REASON_TOO_FEW_LABELS, (
                f"judge {j.judge}: {j.labels} labelled answer(s) it gave a verdict on, "
                f"too few to estimate its kappa ({why})"
            )
        return REASON_JUDGE_UNCALIBRATED, (
            f"judge {j.judge}: Cohen's kappa {j.kappa} is below minKappa {j.min_kappa} "
            f"over {j.labels} labelled answer(s): not trusted to decide"
        )
    return None


__all__ = [
    "CALIBRATION_ROLE",
    "Labelled",
    "calibration_run",
    "calibrations",
    "gate",
    "judge_of",
    "labelled",
    "run_name",
]
