"""Graders (pure): whether an answer to an EvalSet case is good.

Every grader returns a :class:`Grade`: ``Passed``/``Failed`` with a score in [0, 1] and a
short reasoning, or ``Errored`` when the *grader* could not decide (a regular expression
that does not compile, a JSON Schema the validator refuses, a judge whose answer is not the
structured verdict it must give, a judge Run that failed). An errored case is never counted
as passed.

- ``exact``: the answer, trimmed, equals ``expected`` (trimmed); ``contains``: it contains
  it; ``regex``: ``re.search``. ``ignoreCase`` applies to the three.
- ``jsonSchema``: the answer parsed as JSON (a fenced ```json block accepted) matches
  ``schema`` and every assertion at its JSONPath (``$.a.b[0]['c d']``). An answer that is not
  JSON fails (the *answer* is bad, not the grader).
- ``judgeSkill`` / ``judgeAgent``: :func:`judge_input` is the judge Run's input (the case
  input, the reference, the answer, the rubric); :func:`grade_judge` reads its answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from swarmkit_api.eval import MAX_REASONING, Grader, JsonPathAssertion

Outcome = Literal["Passed", "Failed", "Errored"]

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n?```", re.DOTALL)
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[([0-9]+)\]|\['([^']+)'\]")
#: Verdicts a judge gives for a bad answer (compared without case).
NEGATIVE_VERDICTS = frozenset({"fail", "failed", "reject", "rejected", "no", "false", "bad"})
POSITIVE_VERDICTS = frozenset({"pass", "passed", "approve", "approved", "yes", "true", "good"})


@dataclass(frozen=True)
class Grade:
    outcome: Outcome
    score: float | None
    reasoning: str

    @property
    def passed(self) -> bool:
        return self.outcome == "Passed"


def capped(text: str, limit: int = MAX_REASONING) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _verdict(ok: bool, why: str) -> Grade:
    return Grade("Passed" if ok else "Failed", 1.0 if ok else 0.0, capped(why))


def errored(why: str) -> Grade:
    return Grade("Errored", None, capped(why))


def parse_json_answer(answer: str) -> Any:
    """The answer as JSON (the first fenced block if any); ValueError when it is not."""
    fenced = _FENCE.search(answer)
    return json.loads(fenced.group(1) if fenced else answer.strip())


_MISSING = object()


def at_path(document: Any, path: str) -> Any:
    """The value at a JSONPath of the ``$(.name|[i]|['key'])*`` subset (``_MISSING`` if none)."""
    if not path.startswith("$"):
        raise ValueError(f"{path!r} does not start with $")
    rest, value = path[1:], document
    while rest:
        step = _STEP.match(rest)
        if step is None:
            raise ValueError(f"{path!r}: cannot read {rest!r}")
        rest = rest[step.end() :]
        name, index, key = step.groups()
        if index is not None:
            ok = isinstance(value, list) and int(index) < len(value)
            value = value[int(index)] if ok else _MISSING
        else:
            field = name if name is not None else key
            value = value.get(field, _MISSING) if isinstance(value, dict) else _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _assertion_problem(document: Any, check: JsonPathAssertion) -> str | None:
    """Why ``check`` fails on ``document`` (None: it holds). Raises re.error for a bad
    pattern (the grader errors)."""
    value = at_path(document, check.path)
    if check.exists is not None:
        if (value is not _MISSING) != check.exists:
            return f"{check.path} {'is missing' if check.exists else 'exists'}"
        return None
    if value is _MISSING:
        return f"{check.path} is missing"
    if check.matches is not None:
        if not isinstance(value, str) or re.search(check.matches, value) is None:
            return f"{check.path}: {json.dumps(value)[:80]} does not match {check.matches!r}"
        return None
    assert check.equals is not None
    want = json.loads(check.equals)  # ValueError (not JSON): the grader errors
    if value != want:
        return f"{check.path}: {json.dumps(value)[:80]} != {check.equals[:80]}"
    return None


def grade_json(grader: Grader, answer: str) -> Grade:
    try:
        document = parse_json_answer(answer)
    except ValueError as exc:
        return _verdict(False, f"the answer is not JSON: {exc}")
    if grader.schema_ is not None:
        # Imported here, by the one grader that needs it: jsonschema (with referencing,
        # rpds, attrs) is ~40 ms of every operator start, most of which grade no case.
        import jsonschema

        schema = grader.schema_.as_dict()
        try:
            validator = jsonschema.Draft202012Validator(schema)
            problems = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        except jsonschema.SchemaError as exc:
            return errored(f"the grader's schema is unusable: {exc.message}")
        if problems:
            first = problems[0]
            where = "$" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path
            )
            return _verdict(False, f"schema: {where}: {first.message}")
    try:
        for check in grader.assertions:
            why = _assertion_problem(document, check)
            if why is not None:
                return _verdict(False, why)
    except (re.error, ValueError) as exc:
        return errored(f"the grader's assertion is unusable: {exc}")
    return _verdict(True, "matches the schema and every assertion")


def grade_text(grader: Grader, answer: str) -> Grade:
    """exact, contains, regex."""
    flags = re.IGNORECASE if grader.ignore_case else 0
    if grader.type == "regex":
        assert grader.pattern is not None
        try:
            found = re.search(grader.pattern, answer, flags)
        except re.error as exc:
            return errored(f"the grader's pattern does not compile: {exc}")
        return _verdict(found is not None, f"pattern {'found' if found else 'not found'}")
    assert grader.expected is not None
    got, want = answer.strip(), grader.expected.strip()
    if grader.ignore_case:
        got, want = got.casefold(), want.casefold()
    if grader.type == "exact":
        return _verdict(got == want, "equal" if got == want else f"got {answer.strip()[:120]!r}")
    hit = want in got
    return _verdict(hit, f"{'contains' if hit else 'does not contain'} {grader.expected[:80]!r}")


def grade(grader: Grader, answer: str) -> Grade:
    """A deterministic grader's grade of ``answer`` (never for a judge: see grade_judge)."""
    if grader.type in ("exact", "contains", "regex"):
        return grade_text(grader, answer)
    if grader.type == "jsonSchema":
        return grade_json(grader, answer)
    raise ValueError(f"{grader.type} is graded by a judge Run (grade_judge)")


def judge_input(grader: Grader, case_input: str, answer: str) -> str:
    """The judge Run's input: what was asked, the reference, the answer, what to check,
    and the structured answer the judge must give."""
    parts = [f"## Task given to the agent\n{case_input}"]
    if grader.expected is not None:
        parts.append(f"## Reference answer\n{grader.expected}")
    parts.append(f"## The agent's answer\n{answer}")
    if grader.type == "judgeAgent":
        parts.append(f"## Rubric\n{grader.rubric}")
        parts.append(
            'Answer with JSON only: {"verdict": "pass" | "fail", "score": 0..1, "reasoning": "..."}'
        )
    else:
        parts.append(
            f"Use the {grader.skill} skill to judge the answer, and answer with its result "
            'as JSON only: {"verdict": ..., "confidence": 0..1, "reasoning": "..."}'
        )
    return "\n\n".join(parts)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{what} must be a number between 0 and 1, got {value!r}")
    return float(value)


def grade_judge(grader: Grader, judge_answer: str) -> Grade:
    """A judge's answer read as its verdict (Errored when it is not the structured answer)."""
    try:
        document = parse_json_answer(judge_answer)
        if not isinstance(document, dict):
            raise ValueError("not a JSON object")
        reasoning = str(document.get("reasoning") or "")
        verdict = str(document.get("verdict") or "").strip().casefold()
        if verdict and verdict not in NEGATIVE_VERDICTS | POSITIVE_VERDICTS:
            raise ValueError(f"verdict {verdict!r} is neither a pass nor a fail")
        if grader.type == "judgeSkill":
            confidence = _number(document.get("confidence"), "confidence")
            score: float | None = confidence
            ok = confidence >= grader.threshold and verdict not in NEGATIVE_VERDICTS
        else:
            if not verdict:
                raise ValueError("no verdict")
            raw = document.get("score")
            score = _number(raw, "score") if raw is not None else None
            ok = verdict in POSITIVE_VERDICTS and (score is None or score >= grader.threshold)
    except ValueError as exc:
        return errored(f"the judge's answer is not a structured verdict: {exc}")
    if score is None:
        score = 1.0 if ok else 0.0
    return Grade("Passed" if ok else "Failed", score, capped(reasoning or verdict))


__all__ = [
    "Grade",
    "at_path",
    "capped",
    "errored",
    "grade",
    "grade_judge",
    "judge_input",
    "parse_json_answer",
]
