"""The EvalSet reconciler over the fake API: its Ready follows the judges it names.

What wakes an EvalSet is declared on it (``EVAL_SET_KIND.watches``, like the Funnel's watch of
its judge Skill): a judge Skill created, deleted or changed (its category), a judge Agent
created or deleted. A Skill's status write that changes nothing an EvalSet reads (the skill
library's usage) reconciles no EvalSet.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from swarmkit_api.conditions import (
    READY,
    REASON_AGENT_NOT_FOUND,
    REASON_CONFIG_MAP_NOT_FOUND,
    REASON_INVALID,
    REASON_SKILL_NOT_FOUND,
)
from swarmkit_operator import metrics
from tests.support.fake_k8s import FakeApi
from tests.support.reconciling import Reconciling

from .reconcile_cases import NS, WORKSPACE, condition, skill_spec, status

JUDGED = {
    "cases": [
        {
            "name": "c1",
            "input": "x",
            "grader": {"type": "judgeSkill", "skill": "grader", "agent": "judge"},
        }
    ]
}
OUTPUTS = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}, "reasoning": {"type": "string"}},
}


@pytest.fixture
async def operator(api: FakeApi) -> AsyncIterator[Reconciling]:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    async with Reconciling(api) as running:
        yield running


def ready(api: FakeApi) -> tuple[str, str]:
    found = condition(api, "EvalSet", "cases", READY)
    return found["status"], found["reason"]


def evalset_reconciles() -> float:
    return sum(
        sample.value
        for family in metrics.RECONCILES.collect()
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("kind") == "EvalSet"
    )


async def test_ready_follows_the_judge_skill_and_agent_it_names(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("EvalSet", NS, "cases", JUDGED)
    await operator.settle()
    assert ready(api) == ("False", REASON_SKILL_NOT_FOUND)

    api.apply_spec("Skill", NS, "grader", skill_spec(category="decision", outputs=OUTPUTS))
    await operator.settle()
    assert ready(api) == ("False", REASON_AGENT_NOT_FOUND)

    api.apply_spec("Agent", NS, "judge", {"skills": ["grader"]})
    await operator.settle()
    assert ready(api) == ("True", "Valid")

    # The skill library's usage write on the judge Skill, an Agent that is no judge: the
    # Skill's status changes, nothing the EvalSet reads of it does: no EvalSet reconciles.
    before = evalset_reconciles()
    api.set_status("Skill", NS, "grader", {"usage": {"runsGranted": 3}})
    api.apply_spec("Agent", NS, "bystander", {"skills": ["grader"]})
    await operator.settle()
    assert status(api, "Skill", "grader")["usage"] == {"runsGranted": 3}
    assert evalset_reconciles() == before

    api.apply_spec("Skill", NS, "grader", skill_spec(category="capability", outputs=OUTPUTS))
    await operator.settle()
    assert ready(api) == ("False", REASON_INVALID)
    assert "not a decision skill" in condition(api, "EvalSet", "cases", READY)["message"]

    api.apply_spec("Skill", NS, "grader", skill_spec(category="decision", outputs=OUTPUTS))
    await operator.settle()
    assert ready(api) == ("True", "Valid")

    api.delete("Agent", NS, "judge")
    await operator.settle()
    assert ready(api) == ("False", REASON_AGENT_NOT_FOUND)

    api.delete("Skill", NS, "grader")
    await operator.settle()
    assert ready(api) == ("False", REASON_SKILL_NOT_FOUND)


async def test_a_category_edit_of_a_judge_skill_that_does_not_render_still_reaches_it(
    api: FakeApi, operator: Reconciling
) -> None:
    """Its Ready, reason and content hash stay as they were (its file's ConfigMap is
    missing): the category, which the EvalSet reads, is what changed."""
    files = [{"path": "ref.md", "configMapRef": {"name": "missing", "key": "k"}}]
    api.apply_spec("Agent", NS, "judge", {"skills": ["grader"]})
    api.apply_spec(
        "Skill", NS, "grader", skill_spec(category="decision", outputs=OUTPUTS, files=files)
    )
    api.apply_spec("EvalSet", NS, "cases", JUDGED)
    await operator.settle()
    assert condition(api, "Skill", "grader", READY)["reason"] == REASON_CONFIG_MAP_NOT_FOUND
    assert ready(api) == ("True", "Valid")

    api.apply_spec(
        "Skill", NS, "grader", skill_spec(category="capability", outputs=OUTPUTS, files=files)
    )
    await operator.settle()
    assert condition(api, "Skill", "grader", READY)["reason"] == REASON_CONFIG_MAP_NOT_FOUND
    assert ready(api) == ("False", REASON_INVALID)
