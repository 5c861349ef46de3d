"""A Funnel's own status (pure): Ready waits for its judge skill to exist (issue 47 item 7)."""

from __future__ import annotations

from swarmkit_api.conditions import (
    REASON_QUORUM_UNREACHABLE,
    REASON_SKILL_NOT_FOUND,
    REASON_VALID,
)
from swarmkit_operator.builders.funnel import funnel_status
from tests.schema.corpus import funnel

JUDGED = funnel(judge={"skill": "grader", "threshold": 0.7})["spec"]


def test_a_funnel_whose_judge_skill_does_not_exist_is_not_ready() -> None:
    asked: list[str] = []
    status = funnel_status(JUDGED, lambda s: asked.append(s) or False)
    accepted, ready = status.verdicts
    assert (accepted.status, accepted.reason) == ("True", REASON_VALID)
    assert (ready.status, ready.reason) == ("False", REASON_SKILL_NOT_FOUND)
    assert "spec.judge.skill: Skill 'grader' not found" in ready.message
    assert asked == ["grader"]
    assert status.fields["version"]


def test_it_is_ready_once_the_skill_exists() -> None:
    status = funnel_status(JUDGED, lambda s: s == "grader")
    assert [(v.status, v.reason) for v in status.verdicts] == [
        ("True", REASON_VALID),
        ("True", REASON_VALID),
    ]


def test_a_funnel_without_a_judge_asks_for_no_skill() -> None:
    spec = {k: v for k, v in funnel()["spec"].items() if k != "judge"}
    status = funnel_status(spec, lambda s: False)
    assert status.verdicts[1].status == "True"


def test_an_unreachable_quorum_is_reported_before_the_missing_skill() -> None:
    spec = dict(JUDGED)
    spec["approve"] = {
        "roles": {"lead": {"users": ["ann"]}},
        "rules": [{"roles": ["lead"], "kOf": 2}],
    }
    ready = funnel_status(spec, lambda s: False).verdicts[1]
    assert (ready.status, ready.reason) == ("False", REASON_QUORUM_UNREACHABLE)
