"""EvalSet and EvalRun shapes: what admission refuses (the same rules as the CRDs' CEL)."""

from __future__ import annotations

from typing import Any

import pytest

from swarmkit_api import ManifestError, validate_manifest
from swarmkit_api.resources import KINDS_BY_NAME


def evalset(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "EvalSet",
        "metadata": {"name": "triage"},
        "spec": spec,
    }


def refused(doc: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as exc:
        validate_manifest(doc)
    return str(exc.value)


CASE = {"name": "c1", "input": "x", "grader": {"type": "contains", "expected": "y"}}


def test_a_valid_evalset() -> None:
    validate_manifest(
        evalset(
            cases=[
                CASE,
                {"name": "c2", "input": "x", "grader": {"type": "regex", "pattern": "^a"}},
                {
                    "name": "c3",
                    "input": "x",
                    "grader": {
                        "type": "jsonSchema",
                        "schema": {"type": "object"},
                        "assertions": [{"path": "$.a[0]", "equals": '{"k": 1}'}],
                    },
                },
                {
                    "name": "c4",
                    "input": "x",
                    "weight": 2,
                    "tags": ["billing"],
                    "grader": {"type": "judgeAgent", "agent": "judge", "rubric": "r"},
                },
            ],
            fromRuns={"matchLabels": {"team": "payments"}},
        )
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "needs cases or fromRuns"),
        ({"cases": [CASE, CASE]}, "unique"),
        ({"cases": [{**CASE, "grader": {"type": "exact"}}]}, "need expected"),
        ({"cases": [{**CASE, "grader": {"type": "regex"}}]}, "needs pattern"),
        ({"cases": [{**CASE, "grader": {"type": "jsonSchema"}}]}, "schema or assertions"),
        ({"cases": [{**CASE, "grader": {"type": "judgeSkill", "skill": "s"}}]}, "agent"),
        ({"cases": [{**CASE, "grader": {"type": "judgeAgent", "agent": "j"}}]}, "rubric"),
        ({"cases": [{**CASE, "grader": {"type": "llm"}}]}, "type"),
        ({"cases": [{**CASE, "weight": 0}]}, "weight"),
        ({"cases": [{**CASE, "name": "Not Kebab"}]}, "name"),
        (
            {
                "cases": [
                    {
                        **CASE,
                        "grader": {
                            "type": "jsonSchema",
                            "assertions": [{"path": "$.a", "equals": "1", "exists": True}],
                        },
                    }
                ]
            },
            "exactly one of equals, matches and exists",
        ),
        (
            {
                "cases": [
                    {
                        **CASE,
                        "grader": {
                            "type": "jsonSchema",
                            "assertions": [{"path": "a.b", "exists": True}],
                        },
                    }
                ]
            },
            "path",
        ),
    ],
)
def test_bad_evalsets_are_refused_with_the_field(spec: dict[str, Any], message: str) -> None:
    assert message in refused(evalset(**spec))


def evalrun(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "triage-1"},
        "spec": {"evalSetRef": {"name": "triage"}, **spec},
    }


def test_evalrun_sides() -> None:
    validate_manifest(evalrun(candidate={"agentRef": {"name": "a"}, "version": "0123abcd"}))
    validate_manifest(
        evalrun(candidate={"topologyRef": {"name": "t"}}, baseline={"version": "abcdef12"})
    )
    assert "exactly one of" in refused(evalrun(candidate={}))
    assert "at most one" in refused(
        evalrun(
            candidate={"agentRef": {"name": "a"}},
            baseline={"agentRef": {"name": "a"}, "topologyRef": {"name": "t"}},
        )
    )
    assert "version" in refused(evalrun(candidate={"agentRef": {"name": "a"}, "version": "HEAD"}))
    assert "trials" in refused(evalrun(candidate={"agentRef": {"name": "a"}}, trials=0))


def test_evalrun_spec_is_immutable_in_the_crd() -> None:
    schema = KINDS_BY_NAME["EvalRun"].spec.model_json_schema(by_alias=True)
    rules = [r["rule"] for r in schema.get("x-kubernetes-validations", [])]
    assert "self == oldSelf" in rules


def test_evalrun_status_shape_holds_the_verdict_and_intervals() -> None:
    status = KINDS_BY_NAME["EvalRun"].status.model_json_schema(by_alias=True)
    props = status["properties"]
    for field in (
        "verdict",
        "candidate",
        "baseline",
        "comparison",
        "regressed",
        "fixed",
        "flaky",
        "cases",
    ):
        assert field in props
