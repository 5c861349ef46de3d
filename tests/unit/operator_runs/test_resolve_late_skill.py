"""A Run waits for its Agent to pick up a granted Skill that reached the operator after the
Agent: the Agent's first render went without it (a missing grant is inert until it
appears), and a Run resolved on that render would start without a skill its user applied
first. A Skill that is not Ready, or not there at all, stays inert: the Run goes on."""

from __future__ import annotations

from typing import Any

import pytest

from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.indexes import ResolverIndexes
from swarmkit_operator.runs.summaries import agent_summary, skill_summary
from swarmkit_operator.workload.resolve import Resolver, Waiting, _Walk

NS = "team-a"


def _agent(missing: list[str]) -> dict[str, Any]:
    """An Agent Ready for its generation, not rendered (so resolving it stops before any
    ConfigMap read), whose status lists ``missing`` as granted but missing."""
    ready = {"type": "Ready", "status": "True", "reason": "Rendered", "observedGeneration": 1}
    status = {"observedGeneration": 1, "conditions": [ready], "missingSkills": missing}
    meta = {"name": "scripter", "namespace": NS, "uid": "u-1", "generation": 1}
    return {"metadata": meta, "spec": {}, "status": status}


def _skill(ready: str | None) -> dict[str, Any]:
    meta = {"name": "late", "namespace": NS, "uid": "u-2", "generation": 1}
    if ready is None:  # created, not reconciled yet
        return {"metadata": meta, "spec": {}}
    cond = {"type": "Ready", "status": ready, "reason": "Rendered"}
    return {"metadata": meta, "status": {"contentHash": "abc", "conditions": [cond]}}


async def _resolve(agent: dict[str, Any], skills: dict[str, dict[str, Any]]) -> Waiting:
    indexes = ResolverIndexes(
        topologies={},
        agents={(NS, "scripter"): [agent_summary(agent)]},
        skills={(NS, name): [skill_summary(body)] for name, body in skills.items()},
        workspaces={},
        funnels={},
        skill_reviews={},
    )
    walk = _Walk(root="scripter")
    result = await Resolver(OperatorConfig(), indexes)._resolve_agent(NS, "scripter", walk)
    assert isinstance(result, Waiting)
    return result


@pytest.mark.parametrize("ready", [None, "True"])
async def test_a_run_waits_for_the_agent_to_pick_up_a_skill_that_is_there_now(
    ready: str | None,
) -> None:
    waiting = await _resolve(_agent(["late"]), {"late": _skill(ready)})
    assert waiting.message == "waiting for Agent scripter to pick up its granted Skill late"
    assert waiting.recheck == 1.0


@pytest.mark.parametrize(
    "skills",
    [{}, {"late": _skill("False")}],
    ids=["not there", "not Ready"],
)
async def test_a_missing_grant_that_is_absent_or_not_ready_stays_inert(
    skills: dict[str, dict[str, Any]],
) -> None:
    waiting = await _resolve(_agent(["late"]), skills)
    # past the check: the next thing it waits for is the Agent's render itself
    assert waiting.message == "waiting for Agent scripter: not rendered yet"


async def test_an_agent_missing_nothing_is_not_held_by_other_skills() -> None:
    waiting = await _resolve(_agent([]), {"late": _skill("True")})
    assert waiting.message == "waiting for Agent scripter: not rendered yet"
