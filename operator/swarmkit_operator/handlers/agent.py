"""Agent: version over spec + granted skills, render ``agent-<name>-<hash8>``, fan out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from swarmkit_api import ManifestError, validate_spec
from swarmkit_api.conditions import READY
from swarmkit_api.resources import AGENT
from swarmkit_api.workspace import WorkspaceSpec

from .. import promotion
from ..builders import ObjectRef
from ..builders import promotion as promotion_builders
from ..builders.agent import (
    PACK_PREFIX,
    WORKSPACE_PACK,
    SkillView,
    WorkspaceView,
    granted_skill_names,
    resolve_agent,
    workspace_name,
)
from ..builders.skill import SYNTHESIZED_TOPOLOGY_PREFIX, ScriptVerdict
from ..builders.trust import foreign_config_map
from ..indexes import IndexId, index
from ..reconcile import parking
from ..reconcile.controller import Controller, Deferred, Kind, Observation, Watch
from ..reconcile.status import StatusOf
from ..reconcile.views import MISSING, Key, base_view


@index("agents", id=IndexId.AGENT_VIEWS)
def agent_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, name) → the agent's spec and what topologies need of its status."""
    view = base_view(body)
    spec = dict(body.get("spec") or {})
    status = view["status"]
    # With spec.promotion, what the Topologies running it pin is its active version.
    active = promotion_builders.active_of(status)
    view.update(
        spec=spec,
        workspace=workspace_name(spec),
        version=active["version"] if active else status.get("version"),
        renderedConfigMap=active["renderedConfigMap"]
        if active
        else status.get("renderedConfigMap"),
        renderedSha256=(active or status).get("renderedSha256"),
        skillConfigMaps=tuple(active.get("pins") or ())
        if active
        else tuple(r.get("renderedConfigMap", "") for r in status.get("resolvedSkills") or ()),
        annotations=dict(body.get("metadata", {}).get("annotations") or {}),
    )
    return {(namespace, name): view}


@index("agents", id=IndexId.AGENT_BY_GRANT)
def agent_by_grant(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, grant) → agents granting it (skill names, pack:<id>, topology-<x>)."""
    return {(namespace, g): name for g in granted_skill_names(body.get("spec") or {})}


@index("agents", id=IndexId.AGENT_BY_WORKSPACE)
def agent_by_workspace(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    return {(namespace, workspace_name(body.get("spec") or {})): name}


def dependents_view(view: dict[str, Any] | None) -> Any:
    if view is None:
        return MISSING
    return (
        view["version"],
        view["ready"],
        view["reason"],
        view["workspace"],
        tuple(granted_skill_names(view["spec"])),
        view["renderedConfigMap"],
        view["skillConfigMaps"],
        promotion.force_of(view["annotations"]),
        view["observed"] == view["generation"],  # last: whether the status is fresh
    )


def dependents(
    ctl: Controller, namespace: str, name: str, seen: Observation, _body: Mapping[str, Any]
) -> None:
    """The Topologies running the Agent, and those whose funnels it reviews for; itself
    when a forced promotion was asked for (an annotation: no new generation)."""
    if promotion.force_asked(_body):
        ctl.enqueue("Agent", namespace, name)
    if seen.changed:
        ctl.enqueue_many(
            "Topology", namespace, ctl.lookup_all(IndexId.TOPOLOGY_BY_AGENT, (namespace, name))
        )
        # A funnel's reviewer is outside the tree; its grants must stay read-only
        # (builders.reviewer): re-check the Topologies using the funnels it reviews for.
        for funnel in ctl.lookup_all(IndexId.FUNNEL_BY_REVIEWER, (namespace, name)):
            ctl.enqueue_many(
                "Topology",
                namespace,
                ctl.lookup_all(IndexId.TOPOLOGY_BY_FUNNEL, (namespace, funnel)),
            )
        ctl.enqueue_gc(namespace)


def workspace_view(ctl: Controller, namespace: str, name: str) -> WorkspaceView | None:
    """The Workspace as agents and topologies see it (spec parsed once per generation)."""
    view = ctl.lookup(IndexId.WORKSPACE_VIEWS, (namespace, name))
    if view is None:
        return None
    cache_key = ("workspace-spec", namespace, name, view["uid"], view["generation"])
    spec: WorkspaceSpec | None
    if cache_key in ctl.book.parsed:
        spec = ctl.book.parsed[cache_key]
    else:
        try:
            parsed = validate_spec("Workspace", view["spec"])
            spec = parsed if isinstance(parsed, WorkspaceSpec) else None
        except ManifestError:
            spec = None
        for old in [k for k in ctl.book.parsed if k[:3] == cache_key[:3]]:
            del ctl.book.parsed[old]
        ctl.book.parsed[cache_key] = spec
    message = ""
    for cond in view["status"].get("conditions") or ():
        if cond.get("type") == READY:
            message = str(cond.get("message", ""))
    return WorkspaceView(
        name=name,
        spec=spec,
        ready=view["ready"],
        reason=view["reason"],
        message=message,
        config_map=view["status"].get("renderedConfigMap"),
        version=view["status"].get("version"),
    )


def skill_view(name: str, view: dict[str, Any]) -> SkillView:
    return SkillView(
        name=name,
        content_hash=view["contentHash"],
        config_map=view["renderedConfigMap"],
        ready=view["ready"],
        reason=view["reason"],
        scripts=tuple(ScriptVerdict(p, s, a, r) for p, s, a, r in view["scripts"]),
        composes=view["composes"],
        credential=view.get("credential"),
    )


def workspace_topologies(ctl: Controller, namespace: str, workspace: str) -> dict[str, str]:
    """Name → description of every Topology of ``workspace`` (for pack:workspace)."""
    out: dict[str, str] = {}
    for topology in ctl.lookup_all(IndexId.TOPOLOGY_BY_WORKSPACE, (namespace, workspace)):
        view = ctl.lookup(IndexId.TOPOLOGY_VIEWS, (namespace, topology))
        if view is not None:
            description = view["spec"].get("description", "")
            out[topology] = description if isinstance(description, str) else ""
    return out


async def reconcile_agent(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    view = ctl.lookup(IndexId.AGENT_VIEWS, (namespace, name))
    if view is None:
        return "gone"
    spec = view["spec"]
    ws_name = workspace_name(spec)
    waiting: list[Key] = []
    ws_key: Key = ("Workspace", namespace, ws_name)
    ws_raw = ctl.lookup(IndexId.WORKSPACE_VIEWS, (namespace, ws_name))
    if ws_raw is not None and ctl.pending(ws_key, ws_raw):
        waiting.append(ws_key)

    skills: dict[str, SkillView] = {}
    grants = granted_skill_names(spec)
    stack = [
        g
        for g in reversed(grants)
        if not g.startswith(PACK_PREFIX) and not g.startswith(SYNTHESIZED_TOPOLOGY_PREFIX)
    ]
    visited: set[str] = set()
    while stack:
        skill = stack.pop()
        if skill in visited:
            continue
        visited.add(skill)
        raw = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, skill))
        if raw is None:
            continue
        skill_key: Key = ("Skill", namespace, skill)
        if parking.is_held(ctl, skill_key, raw):  # rendered, its status write held
            raw = dict(parking.as_rendered(ctl, skill_key, raw))
        elif ctl.pending(skill_key, raw):
            waiting.append(skill_key)
        skills[skill] = skill_view(skill, raw)
        stack.extend(reversed(raw["composes"]))
    if waiting and not force:
        raise Deferred(waiting)

    topologies: dict[str, str] = {}
    if any(g == WORKSPACE_PACK or g.startswith(SYNTHESIZED_TOPOLOGY_PREFIX) for g in grants):
        topologies = workspace_topologies(ctl, namespace, ws_name)
    owner = ObjectRef("Agent", name, namespace, view["uid"])
    render = resolve_agent(owner, spec, skills, workspace_view(ctl, namespace, ws_name), topologies)
    created = False
    if render.config_map is not None:
        created = await ctl.ensure_config_map(render.config_map)
        # Adopted only if it is the render: built-in edit creates ConfigMaps (as for Skills).
        key: Key = ("Agent", namespace, name)
        foreign = None if created else await ctl.foreign_render(render.config_map, key)
        if foreign is not None:
            render = foreign_config_map(render, "Agent", name, foreign)
    fields = render.status_fields()
    current = promotion.agent_version(fields, render.ready)
    promoted = await promotion.reconcile_promotion(ctl, owner, view, current)
    written = await ctl.write_status(
        StatusOf.of_view("Agent", namespace, name, view),
        {**fields, **promoted.fields},
        (*render.verdicts, *promoted.verdicts),
    )
    return "changed" if written or created else "unchanged"


KIND = Kind(
    "Agent",
    priority=2,  # after its Workspace and Skills, before the Topologies running it
    reconcile=reconcile_agent,
    api=AGENT,
    indexes=(agent_views, agent_by_grant, agent_by_workspace),
    dependents_view=dependents_view,
    dependents=dependents,
    # Its Workspace: a new render, readiness or message, once its status shows it.
    watches=(Watch("Workspace", IndexId.AGENT_BY_WORKSPACE),),
)
