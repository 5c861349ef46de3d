"""An Agent's and a Workspace's render are adopted only if they are the render (issue 46).

The same guarantee as a Skill's (``test_skill_adoption.py``), through the same path: the
render's name follows from its content, so an editor (built-in ``edit`` creates ConfigMaps)
can create ``agent-<name>-<hash8>`` or ``ws-<name>-<hash8>`` before the operator does. The
reconcile reads back what it did not create and compares it with its render
(:func:`swarmkit_operator.builders.trust.render_mismatch`); a foreign one leaves the owner
``Ready=False TamperedObject`` naming it, a Warning Event, and no ``renderedConfigMap`` or
version a Topology or Run could pin (:func:`swarmkit_operator.builders.trust.foreign_config_map`,
the one refusal of all three kinds); deleting it re-queues the owner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders.agent import WorkspaceView, resolve_agent
from swarmkit_operator.builders.skill import render_skill
from swarmkit_operator.builders.trust import foreign_config_map
from swarmkit_operator.builders.workspace import render_workspace
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers.agent import reconcile_agent
from swarmkit_operator.handlers.common import config_map_event
from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.handlers.workspace import reconcile_workspace
from tests.support.fake_k8s import FakeApi

WIRED = wiring()
NS = "team-a"
WS_SPEC: dict[str, Any] = {
    "modelProviders": [{"name": "replay", "type": "replay"}],
    "flowData": [{"path": "exclusions.yaml", "content": "- vendor/\n"}],
}
AGENT_SPEC: dict[str, Any] = {
    "workspaceRef": {"name": "default"},
    "model": {"provider": "replay", "name": "replay"},
    "systemPrompt": "Triage incidents.",
    "skills": ["triage"],  # not there: SkillsResolved=False, the agent still renders
}


def body(kind: str, name: str, uid: str, spec: Mapping[str, Any], **status: Any) -> dict[str, Any]:
    meta = {"uid": uid, "name": name, "namespace": NS, "generation": 1}
    return {"kind": kind, "metadata": meta, "spec": dict(spec), "status": status}


#: the default Workspace, reconciled and Ready (what the Agent reconcile reads of it)
WS_READY = body(
    "Workspace",
    "default",
    "ws-uid",
    WS_SPEC,
    observedGeneration=1,
    renderedConfigMap="ws-default-0",
    conditions=[{"type": "Ready", "status": "True", "reason": "Rendered"}],
)
WS_RENDER = render_workspace(ObjectRef("Workspace", "default", NS, "ws-uid"), WS_SPEC, {})
AGENT_RENDER = resolve_agent(
    ObjectRef("Agent", "oncall", NS, "agent-uid"),
    AGENT_SPEC,
    {},
    WorkspaceView(
        "default", WorkspaceSpec.model_validate(WS_SPEC), ready=True, config_map="ws-default-0"
    ),
    {},
)


@dataclass(frozen=True)
class Case:
    """One kind whose render is checked: its reconcile, its index, its render."""

    kind: str
    name: str
    reconcile: Callable[[Any, str, str, bool], Awaitable[str]]
    render: Any
    indexed: tuple[tuple[str, dict[str, Any]], ...]

    @property
    def config_map(self) -> dict[str, Any]:
        manifest = self.render.config_map
        assert manifest is not None
        return dict(manifest)

    @property
    def render_name(self) -> str:
        return str(self.render.config_map_name)

    @property
    def owner(self) -> dict[str, Any]:
        """The object whose render it is, as the user created it."""
        return next(b for _, b in self.indexed if b["kind"] == self.kind)


AGENT = Case(
    "Agent",
    "oncall",
    reconcile_agent,
    AGENT_RENDER,
    (("workspaces", WS_READY), ("agents", body("Agent", "oncall", "agent-uid", AGENT_SPEC))),
)
WORKSPACE = Case(
    "Workspace",
    "default",
    reconcile_workspace,
    WS_RENDER,
    (("workspaces", body("Workspace", "default", "ws-uid", WS_SPEC)),),
)
CASES = [pytest.param(AGENT, id="agent"), pytest.param(WORKSPACE, id="workspace")]


class Api:
    """The fake API server (:mod:`tests.support.fake_k8s`) holding the owner and, under the
    render's name, ``existing`` (None: nothing there); what the reconcile wrote and how
    often it read that ConfigMap, read back from the fake's requests."""

    def __init__(self, fake: FakeApi, owner: Mapping[str, Any], name: str, existing: Any) -> None:
        self.fake = fake
        self.name = name
        meta = owner["metadata"]
        self.kind, self.owner = str(owner["kind"]), str(meta["name"])
        fake.apply_spec(self.kind, NS, self.owner, owner["spec"])
        #: ``existing`` as the API server stored it (its own uid, resourceVersion).
        self.existing = fake.create(existing) if existing is not None else None

    @property
    def reads(self) -> int:
        """GETs of the ConfigMap under the render's name."""
        return sum(
            1
            for verb, path in self.fake.requests
            if verb == "GET" and path.endswith(f"/configmaps/{self.name}")
        )

    @property
    def statuses(self) -> list[dict[str, Any]]:
        """One entry per status write of the owner (the status as it is after the last)."""
        written = [
            path
            for verb, path in self.fake.requests
            if verb == "PATCH" and path.endswith(f"/{self.owner}/status")
        ]
        found = self.fake.get(self.kind, NS, self.owner) or {}
        return [dict(found.get("status") or {}) for _ in written]


def controller(case: Case) -> Any:
    ctl = WIRED.controller(OperatorConfig())
    for resource, indexed in case.indexed:
        ctl.indexes.update(resource, indexed)
    return ctl


def conditions(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def found(case: Case, data: Mapping[str, str], uid: str, immutable: bool = True) -> dict[str, Any]:
    """A ConfigMap under the render's name, labelled as the operator labels its own."""
    manifest = case.config_map
    meta = {**manifest["metadata"], "uid": uid}
    return {**manifest, "metadata": meta, "data": dict(data), "immutable": immutable}


@pytest.mark.parametrize("case", CASES)
async def test_a_forged_render_is_refused_naming_it_and_its_deletion_requeues_the_owner(
    fake: FakeApi, case: Case
) -> None:
    data = dict(case.config_map["data"])
    first = sorted(data)[0]
    forged = found(case, {**data, first: data[first] + "\n# eve was here\n"}, "eve-uid")
    api = Api(fake, case.owner, case.render_name, forged)
    ctl = controller(case)
    ctl.indexes.update("configmaps", api.existing)  # it even carries the operator's labels
    await case.reconcile(ctl, NS, case.name, False)
    [status] = api.statuses
    ready = conditions(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "TamperedObject")
    assert ready["message"].startswith(
        f"ConfigMap {case.render_name} bears the name of {case.kind} {case.name}'s render "
        "but is not the one the operator rendered (its data has sha256"
    ), ready["message"]
    # nothing a Topology or a Run could pin (a Run needs both)
    assert status.get("renderedConfigMap") is None and status.get("version") is None, status
    assert conditions(status)["Accepted"]["status"] == "True"
    _, type_, reason, message = ctl.events.get_nowait()
    assert (type_, reason) == ("Warning", "TamperedObject") and case.render_name in message

    # eve deletes it (metadata-only watch event): the owner is queued again
    await config_map_event(
        type="DELETED",
        body=forged,
        namespace=NS,
        name=case.render_name,
        uid="eve-uid",
        labels={},
        app=SimpleNamespace(controller=ctl),
    )
    assert ctl.queue.pending((case.kind, NS, case.name))
    assert (NS, case.render_name) not in ctl.renders.foreign


@pytest.mark.parametrize("case", CASES)
async def test_the_operators_own_render_is_adopted_and_read_back_once_per_uid(
    fake: FakeApi, case: Case
) -> None:
    own = found(case, case.config_map["data"], "own-uid")
    api = Api(fake, case.owner, case.render_name, own)
    ctl = controller(case)
    ctl.indexes.update("configmaps", api.existing)
    await case.reconcile(ctl, NS, case.name, False)
    status = api.statuses[-1]
    assert status["renderedConfigMap"] == case.render_name
    assert status["version"] == case.render.version
    assert conditions(status)["Ready"]["reason"] != "TamperedObject"
    await case.reconcile(ctl, NS, case.name, True)
    assert api.reads == 1, "an immutable ConfigMap of a verified uid is not read again"


@pytest.mark.parametrize("case", CASES)
async def test_the_right_bytes_in_a_mutable_config_map_are_not_adopted(
    fake: FakeApi, case: Case
) -> None:
    mutable = found(case, case.config_map["data"], "eve", immutable=False)
    api = Api(fake, case.owner, case.render_name, mutable)
    await case.reconcile(controller(case), NS, case.name, False)
    ready = conditions(api.statuses[-1])["Ready"]
    assert ready["reason"] == "TamperedObject" and "it is not immutable" in ready["message"]
    assert api.statuses[-1].get("renderedConfigMap") is None


def test_one_refusal_for_every_kind_leaves_nothing_of_the_render() -> None:
    """Skill, Agent and Workspace renders refused the same way: Ready names the ConfigMap,
    Accepted stands, the conditions describing the render are Unknown, and no status field
    names the render, its version or its hash."""
    skill = render_skill(
        ObjectRef("Skill", "triage", NS, "u"),
        {
            "description": "Use when an incident is reported.",
            "category": "capability",
            "instructions": "# Triage\n",
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
        {},
        OperatorConfig(),
    )
    for kind, owner, render in (
        ("Skill", "triage", skill),
        ("Agent", "oncall", AGENT_RENDER),
        ("Workspace", "default", WS_RENDER),
    ):
        name = render.config_map_name
        assert name is not None
        refused = foreign_config_map(render, kind, owner, "it is not immutable")
        assert type(refused) is type(render)
        verdicts = {v.type: v for v in refused.verdicts}
        assert [v.type for v in refused.verdicts] == [v.type for v in render.verdicts]
        assert (verdicts["Ready"].status, verdicts["Ready"].reason) == ("False", "TamperedObject")
        assert verdicts["Ready"].message.startswith(
            f"ConfigMap {name} bears the name of {kind} {owner}'s render but is not the one "
            "the operator rendered (it is not immutable): it is not used"
        )
        assert (verdicts["Accepted"].status, verdicts["Accepted"].reason) == ("True", "Valid")
        for other in set(verdicts) - {"Ready", "Accepted"}:  # ScriptsApproved, SkillsResolved
            assert (verdicts[other].status, verdicts[other].reason) == ("Unknown", "NotRendered")
        fields = refused.status_fields()
        assert fields["renderedConfigMap"] is None and fields["version"] is None, fields
        assert not any(v for v in fields.values()), fields  # no hash, no resolved skills
        assert refused.config_map is None


def test_an_agent_whose_workspace_render_is_refused_is_not_ready() -> None:
    """The Workspace's refusal reaches its Agents: Ready=False WorkspaceNotReady naming it,
    so no Run resolves the Agent (it waits for Ready)."""
    refused = foreign_config_map(WS_RENDER, "Workspace", "default", "it is not immutable")
    ready = next(v for v in refused.verdicts if v.type == "Ready")
    view = WorkspaceView(
        "default",
        WorkspaceSpec.model_validate(WS_SPEC),
        ready=False,
        reason=ready.reason,
        message=ready.message,
        config_map=None,
    )
    agent = resolve_agent(ObjectRef("Agent", "oncall", NS, "u"), AGENT_SPEC, {}, view, {})
    verdict = next(v for v in agent.verdicts if v.type == "Ready")
    assert (verdict.status, verdict.reason) == ("False", "WorkspaceNotReady")
    assert "TamperedObject" in verdict.message and str(WS_RENDER.config_map_name) in (
        verdict.message
    )
