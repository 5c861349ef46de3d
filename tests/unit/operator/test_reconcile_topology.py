"""The Topology reconciler over the fake API: its conditions, version and child graph as a
user reads them on the Topology (spec.serve is the workload pipeline's, tested there)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_AGENT_NOT_FOUND,
    REASON_AGENT_NOT_READY,
    REASON_CYCLE,
    REASON_DEPTH_EXCEEDED,
    REASON_SKILL_NOT_FOUND,
)
from tests.schema.corpus import funnel
from tests.support.fake_k8s import FakeApi
from tests.support.reconciling import Reconciling

from .reconcile_cases import NS, WORKSPACE, condition, skill_spec, status, topology_spec


@pytest.fixture
async def operator(api: FakeApi) -> AsyncIterator[Reconciling]:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    async with Reconciling(api) as running:
        yield running


def calls(api: FakeApi, parent: str, child: str) -> None:
    """Topology ``parent``'s root agent calls Topology ``child`` through an agent skill."""
    api.apply_spec(
        "Skill",
        NS,
        f"call-{child}",
        skill_spec(implementation={"type": "agent", "topology": child}),
    )
    api.apply_spec("Agent", NS, f"agent-{parent}", {"skills": [f"call-{child}"]})


async def test_version_and_readiness_follow_its_agents(api: FakeApi, operator: Reconciling) -> None:
    api.apply_spec("Skill", NS, "s", skill_spec())
    api.apply_spec("Agent", NS, "lead", {"skills": ["s"]})
    api.apply_spec("Topology", NS, "team", topology_spec("lead", "helper"))
    await operator.settle()
    ready = condition(api, "Topology", "team", READY)
    assert (ready["status"], ready["reason"]) == ("False", REASON_AGENT_NOT_FOUND)
    assert "helper" in ready["message"]

    api.apply_spec("Agent", NS, "helper", {"permissionsBundle": "missing"})
    await operator.settle()
    ready = condition(api, "Topology", "team", READY)
    assert (ready["status"], ready["reason"]) == ("False", REASON_AGENT_NOT_READY)

    api.apply_spec("Agent", NS, "helper", {"permissionsBundle": "worker"})
    api.apply_spec("Topology", NS, "bystander", topology_spec("helper"))
    await operator.settle()
    assert condition(api, "Topology", "team", READY)["status"] == "True"
    shown = status(api, "Topology", "team")
    lead = status(api, "Agent", "lead")["version"]
    assert shown["agentVersions"]["lead"] == lead
    bystander = status(api, "Topology", "bystander")["version"]

    api.apply_spec("Skill", NS, "s", skill_spec(instructions="edited"))  # skill → agent → topology
    await operator.settle()
    after = status(api, "Topology", "team")
    assert after["version"] != shown["version"]
    assert after["agentVersions"]["lead"] == status(api, "Agent", "lead")["version"] != lead
    assert status(api, "Topology", "bystander")["version"] == bystander  # it does not use lead


async def test_a_cycle_is_refused_with_its_path(api: FakeApi, operator: Reconciling) -> None:
    calls(api, "c1", "c2")
    calls(api, "c2", "c1")
    api.apply_spec("Topology", NS, "c1", topology_spec("agent-c1"))
    api.apply_spec("Topology", NS, "c2", topology_spec("agent-c2"))
    await operator.settle()
    for name, path in (("c1", "c1 → c2 → c1"), ("c2", "c2 → c1 → c2")):
        accepted = condition(api, "Topology", name, ACCEPTED)
        assert (accepted["status"], accepted["reason"]) == ("False", REASON_CYCLE)
        assert path in accepted["message"]
        assert condition(api, "Topology", name, READY)["status"] == "False"


async def test_four_deep_is_refused_and_three_deep_is_ready(
    api: FakeApi, operator: Reconciling
) -> None:
    calls(api, "d1", "d2")
    calls(api, "d2", "d3")
    calls(api, "d3", "d4")
    api.apply_spec("Agent", NS, "agent-d4", {})
    for t in ("d1", "d2", "d3", "d4"):
        api.apply_spec("Topology", NS, t, topology_spec(f"agent-{t}"))
    await operator.settle()
    accepted = condition(api, "Topology", "d1", ACCEPTED)
    assert (accepted["status"], accepted["reason"]) == ("False", REASON_DEPTH_EXCEEDED)
    assert "d1 → d2 → d3 → d4" in accepted["message"]
    assert condition(api, "Topology", "d2", READY)["status"] == "True"
    assert status(api, "Topology", "d2")["childTopologies"] == ["d3"]


async def test_a_deleted_agent_makes_its_topology_not_ready(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Agent", NS, "solo", {})
    api.apply_spec("Topology", NS, "t", topology_spec("solo"))
    await operator.settle()
    assert condition(api, "Topology", "t", READY)["status"] == "True"

    api.delete("Agent", NS, "solo")
    await operator.settle()
    ready = condition(api, "Topology", "t", READY)
    assert (ready["status"], ready["reason"]) == ("False", REASON_AGENT_NOT_FOUND)


async def test_a_funnel_follows_its_judge_skill_being_created_and_deleted(
    api: FakeApi, operator: Reconciling
) -> None:
    """The Funnel's declaration watches Skills (``Watch("Skill", IndexId.FUNNEL_BY_JUDGE)``): the
    Skills' one event function kicks the Funnels judging with one created or deleted; no
    event function of the Funnel's module on the Skills' stream, no Funnel in the Skill's."""
    api.apply_spec(
        "Funnel", NS, "gate", funnel(judge={"skill": "grader", "threshold": 0.7})["spec"]
    )
    await operator.settle()
    ready = condition(api, "Funnel", "gate", READY)
    assert (ready["status"], ready["reason"]) == ("False", REASON_SKILL_NOT_FOUND)

    api.apply_spec("Skill", NS, "grader", skill_spec())
    await operator.settle()
    assert condition(api, "Funnel", "gate", READY)["status"] == "True"

    api.delete("Skill", NS, "grader")
    await operator.settle()
    ready = condition(api, "Funnel", "gate", READY)
    assert (ready["status"], ready["reason"]) == ("False", REASON_SKILL_NOT_FOUND)
