"""Graders: pure functions of (grader, answer); errors of the grader are Errored, never Passed."""

from __future__ import annotations

from typing import Any

import pytest

from swarmkit_api.eval import Grader
from swarmkit_operator.builders.eval_graders import (
    at_path,
    grade,
    grade_judge,
    judge_input,
)


def g(**fields: Any) -> Grader:
    return Grader.model_validate(fields)


def test_exact_trims_and_can_ignore_case() -> None:
    assert grade(g(type="exact", expected="Billing"), "  Billing\n").passed
    assert not grade(g(type="exact", expected="Billing"), "billing").passed
    assert grade(g(type="exact", expected="Billing", ignoreCase=True), "BILLING").passed


def test_contains_and_regex() -> None:
    assert grade(g(type="contains", expected="refund"), "category: refund request").passed
    failed = grade(g(type="contains", expected="refund"), "category: billing")
    assert failed.outcome == "Failed" and failed.score == 0.0 and "refund" in failed.reasoning
    assert grade(g(type="regex", pattern=r"^P[0-4]\b"), "P1 outage").passed
    assert not grade(g(type="regex", pattern=r"^P[0-4]\b"), "p1 outage").passed
    assert grade(g(type="regex", pattern=r"^P[0-4]\b", ignoreCase=True), "p1 outage").passed


def test_a_pattern_that_does_not_compile_errors_never_passes() -> None:
    result = grade(g(type="regex", pattern="(unclosed"), "anything")
    assert result.outcome == "Errored" and not result.passed and result.score is None
    assert "does not compile" in result.reasoning


SCHEMA = {
    "type": "object",
    "required": ["severity", "team"],
    "properties": {"severity": {"enum": ["low", "high"]}, "team": {"type": "string"}},
}


def test_json_schema_and_jsonpath_assertions() -> None:
    grader = g(
        type="jsonSchema",
        schema=SCHEMA,
        assertions=[
            {"path": "$.severity", "equals": '"high"'},
            {"path": "$.team", "matches": "^pay"},
            {"path": "$.labels[0]", "exists": True},
            {"path": "$.secret", "exists": False},
        ],
    )
    answer = 'Here you go:\n```json\n{"severity": "high", "team": "payments", "labels": ["x"]}\n```'
    assert grade(grader, answer).passed
    wrong = grade(grader, '{"severity": "low", "team": "payments", "labels": ["x"]}')
    assert wrong.outcome == "Failed" and "$.severity" in wrong.reasoning
    invalid = grade(grader, '{"severity": "urgent", "team": "payments"}')
    assert invalid.outcome == "Failed" and invalid.reasoning.startswith("schema: $.severity")
    assert grade(grader, "not json at all").outcome == "Failed"


def test_jsonpath_subset() -> None:
    doc = {"a": {"b c": [1, {"d": None}]}}
    assert at_path(doc, "$.a['b c'][1].d") is None
    assert at_path(doc, "$") == doc
    missing = at_path(doc, "$.a.x")
    assert missing is not None and missing is at_path(doc, "$.a['b c'][5]")


def test_judge_agent_verdicts() -> None:
    judge = g(type="judgeAgent", agent="judge", rubric="names the right team")
    assert grade_judge(judge, '{"verdict": "pass", "score": 0.9, "reasoning": "ok"}').passed
    low = grade_judge(judge, '{"verdict": "pass", "score": 0.5}')
    assert low.outcome == "Failed" and low.score == 0.5
    assert (
        grade_judge(judge, '```json\n{"verdict": "FAIL", "reasoning": "wrong team"}\n```').outcome
        == "Failed"
    )
    for bad in (
        "I think it is fine",
        '{"score": 0.9}',
        '{"verdict": "maybe"}',
        '{"verdict": "pass", "score": 7}',
    ):
        result = grade_judge(judge, bad)
        assert result.outcome == "Errored", bad


def test_judge_skill_thresholds_confidence() -> None:
    judge = g(type="judgeSkill", skill="grade-answer", agent="judge", threshold=0.8)
    assert grade_judge(judge, '{"verdict": "approve", "confidence": 0.85}').passed
    assert grade_judge(judge, '{"verdict": "approve", "confidence": 0.7}').outcome == "Failed"
    assert grade_judge(judge, '{"verdict": "reject", "confidence": 0.95}').outcome == "Failed"
    assert grade_judge(judge, '{"verdict": "approve"}').outcome == "Errored"


def test_a_judge_grader_is_not_graded_directly() -> None:
    with pytest.raises(ValueError):
        grade(g(type="judgeAgent", agent="judge", rubric="r"), "x")


def test_judge_input_carries_task_reference_answer_and_rubric() -> None:
    text = judge_input(
        g(type="judgeAgent", agent="judge", rubric="must name the team", expected="payments"),
        "Who owns INC-7?",
        "the payments team",
    )
    for part in (
        "Who owns INC-7?",
        "payments",
        "the payments team",
        "must name the team",
        '"verdict"',
    ):
        assert part in text


def test_an_equals_that_is_not_json_errors() -> None:
    grader = g(type="jsonSchema", assertions=[{"path": "$.a", "equals": "high"}])
    result = grade(grader, '{"a": "high"}')
    assert result.outcome == "Errored" and "assertion" in result.reasoning
    assert grade(
        g(type="jsonSchema", assertions=[{"path": "$.a", "equals": "[1, 2]"}]), '{"a": [1, 2]}'
    ).passed
