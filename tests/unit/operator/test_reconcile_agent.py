"""The Agent reconciler, end to end over the fake API: what a user sees on an Agent.

The operator's own controller, indexes, watches and status writes run; the API server is
:class:`tests.support.fake_k8s.FakeApi`. Each test creates objects as ``kubectl`` would
and reads back the Agent's conditions, its version and its rendered ConfigMap.
"""

from __future__ import annotations

import json

from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_SKILL_NOT_FOUND,
    REASON_UNKNOWN_PERMISSION_BUNDLE,
    REASON_WORKSPACE_NOT_FOUND,
    SKILLS_RESOLVED,
)
from tests.support.fake_k8s import FakeApi
from tests.support.reconciling import Reconciling

from .reconcile_cases import NS, WORKSPACE, condition, events, skill_spec, status


async def test_an_agent_is_ready_with_a_rendered_immutable_config_map(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    api.apply_spec("Skill", NS, "summarize", skill_spec(instructions="Summarize it."))
    api.apply_spec("Agent", NS, "lead", {"skills": ["summarize"], "permissionsBundle": "worker"})
    await operator.settle()

    agent = api.get("Agent", NS, "lead")
    assert agent is not None
    shown = agent["status"]
    assert condition(api, "Agent", "lead", READY)["status"] == "True"
    assert condition(api, "Agent", "lead", SKILLS_RESOLVED)["status"] == "True"
    assert shown["observedGeneration"] == agent["metadata"]["generation"]
    assert shown["version"]
    rendered = api.get("ConfigMap", NS, shown["renderedConfigMap"])
    assert rendered is not None and rendered["immutable"] is True
    assert rendered["metadata"]["labels"]["swarmkit.dev/agent"] == "lead"
    resolved = json.loads(rendered["data"]["resolved.json"])
    assert resolved["workspace"] == "default"
    skill_cm = status(api, "Skill", "summarize")["renderedConfigMap"]
    assert [(r["name"], r["renderedConfigMap"]) for r in shown["resolvedSkills"]] == [
        ("summarize", skill_cm)
    ]


async def test_editing_a_skill_reversions_exactly_the_agents_granting_it(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    for skill in ("shared", "other"):
        api.apply_spec("Skill", NS, skill, skill_spec())
    grants = {"a1": ["shared"], "a2": ["other", "shared"], "a3": ["other"], "a4": []}
    for agent, skills in grants.items():
        api.apply_spec("Agent", NS, agent, {"skills": skills})
    await operator.settle()
    before = {a: status(api, "Agent", a)["version"] for a in grants}
    assert len(set(before.values())) == len(grants)
    old_cm = status(api, "Skill", "shared")["renderedConfigMap"]

    api.apply_spec("Skill", NS, "shared", skill_spec(instructions="New body."))
    await operator.settle()

    after = {a: status(api, "Agent", a)["version"] for a in grants}
    assert {a for a in grants if after[a] != before[a]} == {"a1", "a2"}
    new_cm = status(api, "Skill", "shared")["renderedConfigMap"]
    assert new_cm != old_cm
    for agent in ("a1", "a2"):
        resolved = {r["name"]: r for r in status(api, "Agent", agent)["resolvedSkills"]}
        assert resolved["shared"]["renderedConfigMap"] == new_cm
        rendered = api.get("ConfigMap", NS, status(api, "Agent", agent)["renderedConfigMap"])
        assert rendered is not None, f"{agent}'s new render was not created"
    # The old render is referenced by nobody now: collected.
    assert api.get("ConfigMap", NS, old_cm) is None


async def test_an_unknown_skill_is_named_and_resolves_once_it_appears(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    api.apply_spec("Agent", NS, "waiting", {"skills": ["ghost"]})
    await operator.settle()
    missing = condition(api, "Agent", "waiting", SKILLS_RESOLVED)
    assert (missing["status"], missing["reason"]) == ("False", REASON_SKILL_NOT_FOUND)
    assert "ghost" in missing["message"]
    assert status(api, "Agent", "waiting")["missingSkills"] == ["ghost"]
    assert ("Warning", REASON_SKILL_NOT_FOUND) in events(api, "waiting")
    version = status(api, "Agent", "waiting")["version"]

    api.apply_spec("Skill", NS, "ghost", skill_spec())
    await operator.settle()
    shown = status(api, "Agent", "waiting")
    assert condition(api, "Agent", "waiting", SKILLS_RESOLVED)["status"] == "True"
    assert shown["missingSkills"] == []
    assert shown["version"] != version


async def test_an_agent_waits_for_its_workspace(api: FakeApi, operator: Reconciling) -> None:
    api.apply_spec("Agent", NS, "early", {"skills": []})
    await operator.settle()
    ready = condition(api, "Agent", "early", READY)
    assert (ready["status"], ready["reason"]) == ("False", REASON_WORKSPACE_NOT_FOUND)

    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    await operator.settle()
    assert condition(api, "Agent", "early", READY)["status"] == "True"


async def test_an_unknown_permission_bundle_is_refused_naming_it(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    api.apply_spec("Agent", NS, "bad", {"permissionsBundle": "admin"})
    await operator.settle()
    accepted = condition(api, "Agent", "bad", ACCEPTED)
    assert (accepted["status"], accepted["reason"]) == ("False", REASON_UNKNOWN_PERMISSION_BUNDLE)
    assert "admin" in accepted["message"]
    assert condition(api, "Agent", "bad", READY)["status"] == "False"


async def test_a_restarted_operator_writes_nothing_when_nothing_changed(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    api.apply_spec("Skill", NS, "s", skill_spec())
    api.apply_spec("Agent", NS, "a", {"skills": ["s"]})
    await operator.settle()
    before = api.get("Agent", NS, "a")
    writes = len(api.writes())

    await operator.restart()
    await operator.settle()
    assert api.writes()[writes:] == []
    assert api.get("Agent", NS, "a") == before
