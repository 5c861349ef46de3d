"""An EvalSet's status (pure): accepted, versioned, and Ready once every judge it names exists.

The shape is checked at admission (CRD schema and CEL); what the apiserver cannot check is
the namespace around it. A ``judgeSkill`` grader's skill must be a Skill of the namespace
with category ``decision`` (its ``outputs`` carry the confidence the threshold is compared
with), and a judge's Agent must exist: otherwise ``Ready=False`` with ``SkillNotFound``,
``AgentNotFound`` or ``Invalid`` (a skill that is not a decision skill), naming the case.
It turns Ready when they appear (the Skill's and Agent's events enqueue it).
``status.version`` is sha256[:12] of the canonical spec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from swarmkit_api import ManifestError, validate_spec
from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_AGENT_NOT_FOUND,
    REASON_INVALID,
    REASON_SKILL_NOT_FOUND,
    REASON_VALID,
)
from swarmkit_api.eval import MODEL_GRADERS, EvalSetSpec, Grader

from ..hashing import canonical_json, sha256_hex
from . import Verdict, invalid_verdict


@dataclass(frozen=True)
class EvalSetOutcome:
    fields: Mapping[str, Any]
    verdicts: tuple[Verdict, Verdict]


def eval_set_version(spec: EvalSetSpec) -> str:
    return sha256_hex(canonical_json(spec.wire()))[:12]


def graders(spec: EvalSetSpec) -> Iterator[tuple[str, Grader]]:
    """(where, grader) of every case and of the recorded-Run cases."""
    for n, case in enumerate(spec.cases):
        yield f"spec.cases[{n}] ({case.name})", case.grader
    if spec.from_runs is not None and spec.from_runs.grader is not None:
        yield "spec.fromRuns.grader", spec.from_runs.grader


def judge_problem(
    spec: EvalSetSpec,
    skill_category: Callable[[str], str | bool | None],
    agent_exists: Callable[[str], bool],
) -> Verdict | None:
    """The first judge that is missing or unusable, as a Ready=False verdict.

    ``skill_category`` gives a Skill's category, False when there is no such Skill."""
    for where, grader in graders(spec):
        if grader.skill is not None:
            category = skill_category(grader.skill)
            if category is False:
                return Verdict(
                    READY,
                    "False",
                    REASON_SKILL_NOT_FOUND,
                    f"{where}.grader.skill: Skill {grader.skill!r} not found in the namespace",
                )
            if category != "decision":
                return Verdict(
                    READY,
                    "False",
                    REASON_INVALID,
                    f"{where}.grader.skill: Skill {grader.skill!r} is not a decision skill "
                    f"(category {category}): it gives no confidence to threshold",
                )
        if grader.agent is not None and not agent_exists(grader.agent):
            return Verdict(
                READY,
                "False",
                REASON_AGENT_NOT_FOUND,
                f"{where}.grader.agent: Agent {grader.agent!r} not found in the namespace",
            )
    return None


def eval_set_status(
    raw: Mapping[str, Any],
    skill_category: Callable[[str], str | bool | None],
    agent_exists: Callable[[str], bool],
) -> EvalSetOutcome:
    try:
        model = validate_spec("EvalSet", dict(raw))
    except ManifestError as exc:
        refused = invalid_verdict(exc)
        return EvalSetOutcome(
            {}, (refused, Verdict(READY, "False", refused.reason, refused.message))
        )
    assert isinstance(model, EvalSetSpec)
    judged = sum(c.grader.type in MODEL_GRADERS for c in model.cases)
    message = f"{len(model.cases)} case(s), {judged} judged by a model"
    if model.from_runs is not None:
        message += f"; and up to {model.from_runs.max_cases} from recorded Runs"
    accepted = Verdict(ACCEPTED, "True", REASON_VALID, message)
    ready = judge_problem(model, skill_category, agent_exists) or Verdict(
        READY, "True", REASON_VALID, message
    )
    fields = {
        "version": eval_set_version(model),
        "caseCount": len(model.cases),
        "modelGraded": judged,
    }
    return EvalSetOutcome(fields, (accepted, ready))
