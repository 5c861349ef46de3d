"""What an EvalRun makes and what an EvalSet's status says (pure builders)."""

from __future__ import annotations

from typing import Any

from swarmkit_api import validate_manifest
from swarmkit_api.eval import EvalCase, EvalRunSpec, EvalSetSpec, RecordedRunSelector
from swarmkit_operator.builders import eval_runs as er
from swarmkit_operator.builders.eval_set import eval_set_status

JUDGED = {"type": "judgeSkill", "skill": "grade-answer", "agent": "judge"}


def test_evalset_status_names_the_missing_judge() -> None:
    spec = {"cases": [{"name": "a", "input": "x", "grader": JUDGED}]}
    missing = eval_set_status(spec, lambda _s: False, lambda _a: True)
    accepted, ready = missing.verdicts
    assert accepted.status == "True"
    assert (ready.status, ready.reason) == ("False", "SkillNotFound")
    assert "spec.cases[0] (a).grader.skill" in ready.message
    wrong = eval_set_status(spec, lambda _s: "capability", lambda _a: True)
    assert (wrong.verdicts[1].reason, "not a decision skill" in wrong.verdicts[1].message) == (
        "Invalid",
        True,
    )
    no_agent = eval_set_status(spec, lambda _s: "decision", lambda _a: False)
    assert no_agent.verdicts[1].reason == "AgentNotFound"
    fine = eval_set_status(spec, lambda _s: "decision", lambda _a: True)
    assert fine.verdicts[1].status == "True"
    assert fine.fields["caseCount"] == 1 and fine.fields["modelGraded"] == 1
    assert len(str(fine.fields["version"])) == 12


def test_an_invalid_evalset_is_not_accepted() -> None:
    bad = eval_set_status({"cases": []}, lambda _s: False, lambda _a: False)
    assert [v.status for v in bad.verdicts] == ["False", "False"]
    assert bad.verdicts[0].reason == "Invalid"


def summary(
    name: str, labels: dict[str, str], output: str | None, ok: bool, at: str
) -> dict[str, Any]:
    return {
        "name": name,
        "labels": labels,
        "creationTimestamp": at,
        "spec": {"input": f"input of {name}"},
        "status": {
            "output": output,
            "conditions": [{"type": "Succeeded", "status": "True" if ok else "False"}],
        },
    }


def test_recorded_runs_become_cases_newest_first() -> None:
    runs = [
        summary("old", {"team": "pay"}, "answer old", True, "2026-01-01T00:00:00Z"),
        summary("new", {"team": "pay"}, "answer new", True, "2026-02-01T00:00:00Z"),
        summary("failed", {"team": "pay"}, "x", False, "2026-03-01T00:00:00Z"),
        summary("other", {"team": "ops"}, "x", True, "2026-03-01T00:00:00Z"),
        summary("Dotted.Name", {"team": "pay"}, "answer dotted", True, "2025-01-01T00:00:00Z"),
    ]
    selector = RecordedRunSelector.model_validate({"matchLabels": {"team": "pay"}, "maxCases": 2})
    cases = er.recorded_cases(selector, runs)
    assert [c.name for c in cases] == ["run-new", "run-old"]
    assert cases[0].input == "input of new"
    assert (cases[0].grader.type, cases[0].grader.expected) == ("exact", "answer new")
    assert cases[0].tags == [er.RECORDED_TAG]
    every = er.recorded_cases(selector.model_copy(update={"max_cases": 10}), runs)
    assert every[-1].name == "run-dotted-name"


def test_case_runs_are_runs_owned_and_labelled() -> None:
    spec = EvalRunSpec.model_validate(
        {
            "evalSetRef": {"name": "s"},
            "candidate": {"agentRef": {"name": "a"}},
            "maxCostPerRun": "0.5",
            "timeoutSeconds": 60,
        }
    )
    run = er.case_run(
        "ns",
        "e1",
        "uid-1",
        spec,
        "case",
        "baseline",
        "c1",
        2,
        {"agentRef": {"name": "a"}},
        "hello",
        read_only=True,
    )
    validate_manifest({**run, "metadata": {**run["metadata"]}})
    assert run["metadata"]["name"] == "e1-c1-b2"
    assert run["metadata"]["labels"][er.EVAL_RUN_LABEL] == "e1"
    assert run["metadata"]["labels"][er.EVAL_SIDE_LABEL] == "baseline"
    assert run["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert run["spec"] == {
        "agentRef": {"name": "a"},
        "input": "hello",
        "correlationId": "e1",
        "timeoutSeconds": 60,
        "maxCost": "0.5",
        "readOnly": True,
    }
    assert er.run_name("e1", "judge", "candidate", "c1", 0) == "e1-c1-jc0"


def test_the_snapshot_is_content_addressed_and_round_trips() -> None:
    cases = EvalSetSpec.model_validate(
        {"cases": [{"name": "a", "input": "x", "grader": {"type": "contains", "expected": "y"}}]}
    ).cases
    cm, digest = er.snapshot_config_map("ns", "e1", "uid", cases)
    assert cm["immutable"] is True and digest[:8] in cm["metadata"]["name"]
    # An EvalRun made again under the name never reads its predecessor's snapshot.
    again, same = er.snapshot_config_map("ns", "e1", "uid-2", cases)
    assert same == digest and again["metadata"]["name"] != cm["metadata"]["name"]
    assert er.snapshot_digest(cm["data"]) == digest
    assert er.parse_snapshot(cm["data"]) == list(cases)
    tampered = {er.CASES_FILE: cm["data"][er.CASES_FILE].replace('"y"', '"z"')}
    assert er.snapshot_digest(tampered) != digest


def test_cache_keys_follow_case_version_grader_and_trials() -> None:
    case = EvalCase.model_validate(
        {"name": "a", "input": "x", "grader": {"type": "contains", "expected": "y"}}
    )
    target = er.SideTarget("Agent", "triage", "abc123def456")
    key = er.cache_key(case, target, 1)
    assert er.cache_key(case, target, 1) == key
    assert er.cache_key(case.model_copy(update={"name": "renamed"}), target, 1) == key
    assert er.cache_key(case, er.SideTarget("Agent", "triage", "000000000000"), 1) != key
    assert er.cache_key(case, target, 3) != key
    other = EvalCase.model_validate(
        {"name": "a", "input": "x", "grader": {"type": "exact", "expected": "y"}}
    )
    assert er.cache_key(other, target, 1) != key


def test_the_planned_runs_are_every_run_the_evalrun_may_create() -> None:
    """The up-front reservation covers each case on each side, trials times for a model
    grader, and a judge Run for each of those: exactly the Runs the reconcile names."""
    spec = EvalRunSpec.model_validate(
        {"evalSetRef": {"name": "s"}, "candidate": {"agentRef": {"name": "a"}}, "trials": 3}
    )
    cases = [
        EvalCase.model_validate(
            {"name": "plain", "input": "x", "grader": {"type": "regex", "pattern": "y"}}
        ),
        EvalCase.model_validate({"name": "judged", "input": "x", "grader": JUDGED}),
    ]
    targets: dict[er.Side, er.SideTarget] = {
        "candidate": er.SideTarget("Agent", "a", "v2"),
        "baseline": er.SideTarget("Agent", "a", "v1"),
    }
    planned = er.planned_runs("ns", "ev", "uid-1", spec, cases, targets)
    names = sorted(r["metadata"]["name"] for r in planned)
    expected = [er.run_name("ev", "case", s, "plain", 0) for s in ("candidate", "baseline")]
    for side in ("candidate", "baseline"):
        for t in range(3):
            expected.append(er.run_name("ev", "case", side, "judged", t))  # type: ignore[arg-type]
            expected.append(er.run_name("ev", "judge", side, "judged", t))  # type: ignore[arg-type]
    assert names == sorted(expected) and len(names) == 2 + 12
    judges = [r for r in planned if r["metadata"]["labels"][er.EVAL_ROLE_LABEL] == "judge"]
    assert {r["spec"]["agentRef"]["name"] for r in judges} == {"judge"}
    versions = {r["spec"].get("version") for r in planned if r not in judges}
    assert versions == {"v1", "v2"}
    assert er.eval_run_spender("ev") == "EvalRun/ev"
