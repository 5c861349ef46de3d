"""Decision skills: the ``outputs`` JSON Schema enforced on a skill's answer.

A decision skill's answer must be JSON matching its ``outputs`` (a ```json fence is
accepted). Invalid JSON or a schema violation is audited as ``output.validation_failed``
with field-specific problems (``confidence: 1.4 is greater than the maximum of 1``) and the
answer is asked for again: an ``llm_prompt`` skill's model (and a local agent skill's child
root agent) gets the problems in the same conversation; any other implementation is called
again. ``constraints.outputRetries`` re-asks are made (default 2); then the call has failed
and the skill's ``onFailure`` decides. A valid answer is audited as ``output.validated``
with its verdict, confidence and reasoning, and returned to the calling agent as compact JSON
(every field the skill produced, e.g. ``issues``).
"""

from __future__ import annotations

import json
from typing import Any

from swarmkit_api.bundle import BundleSkill

from .context import RunContext
from .errors import ToolError
from .output import OUTPUT_RETRIES, answer_problems, feedback, parse_answer

__all__ = [
    "OutputInvalid",
    "audit_invalid",
    "audit_valid",
    "check",
    "feedback",
    "output_retries",
    "outputs_schema",
]


class OutputInvalid(ToolError):
    """The answer still violates ``outputs`` after every re-ask."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message, "OutputInvalid")
        self.problems = problems


def outputs_schema(skill: BundleSkill) -> dict[str, Any] | None:
    """The schema enforced on ``skill``'s answer (decision skills only)."""
    if skill.spec.category != "decision" or skill.spec.outputs is None:
        return None
    return skill.spec.outputs.as_dict()


def output_retries(skill: BundleSkill) -> int:
    constraints = skill.spec.constraints
    if constraints is not None and constraints.output_retries is not None:
        return constraints.output_retries
    return OUTPUT_RETRIES


def check(schema: dict[str, Any], text: str) -> tuple[Any, list[str]]:
    """(parsed answer, problems); problems empty means valid."""
    problems = answer_problems(schema, text)
    if problems:
        return None, problems
    return parse_answer(text), []


def audit_valid(ctx: RunContext, agent: str, skill: str, value: Any, attempt: int) -> str:
    """Audit ``output.validated`` and return the answer as compact JSON."""
    fields: dict[str, Any] = {}
    if isinstance(value, dict):
        for key in ("verdict", "confidence", "reasoning"):
            if key in value:
                fields[key] = value[key]
    ctx.audit.emit(
        "output.validated", agent=agent, skill=skill, attempt=attempt, outcome="ok", **fields
    )
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def audit_invalid(
    ctx: RunContext, agent: str, skill: str | None, problems: list[str], attempt: int, retry: bool
) -> None:
    """Audit ``output.validation_failed``: a decision skill's answer, or an agent's final
    answer against its output schema (``skill`` None, or the agent skill it answers for)."""
    ctx.audit.emit(
        "output.validation_failed",
        agent=agent,
        skill=skill,
        attempt=attempt,
        problems=problems,
        outcome="retry" if retry else "failed",
    )


def exhausted(skill: str, retries: int, problems: list[str]) -> OutputInvalid:
    return OutputInvalid(
        f"skill {skill}: the answer does not match its outputs schema after {retries} "
        f"retr{'y' if retries == 1 else 'ies'}: {'; '.join(problems)}",
        problems,
    )
