"""Topology: check the agent tree and its call graph, version it over its agents; serve it.

A Topology with ``spec.serve`` is also served over A2A (:mod:`swarmkit_operator.serving`):
the same reconcile writes its ``Serving`` condition, ``status.serving`` and ``status.url``,
and every event of its Deployment re-queues it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import kopf

from swarmkit_api.agent import AgentSpec
from swarmkit_api.conditions import ACCEPTED, REASON_PENDING, SERVING
from swarmkit_api.resources import TOPOLOGY

from .. import promotion, serving
from ..builders import ObjectRef, Verdict
from ..builders import promotion as pr
from ..builders.agent import WORKSPACE_PACK, WorkspaceView, granted_skill_names
from ..builders.reviewer import SkillFacts, not_read_only
from ..builders.serve import SERVE_LABEL
from ..builders.skill import SYNTHESIZED_TOPOLOGY_PREFIX
from ..builders.topology import (
    AgentView,
    Graph,
    TopologyRender,
    TopologyView,
    resolve_topology,
    topology_agent_names,
)
from ..conditions import get_condition
from ..indexes import PRESENT, IndexId, index
from ..reconcile.controller import Controller, Deferred, Kind, Observation, Watch
from ..reconcile.status import StatusOf
from ..reconcile.views import MISSING, Key, base_view
from ..workload.resolve import Resolver
from .agent import workspace_view
from .common import App
from .events import on_event
from .funnel import funnel_names, topology_by_funnel
from .skill import granting_agents

V = TypeVar("V")


def _workspace_of(spec: Mapping[str, Any]) -> str | None:
    ref = spec.get("workspaceRef")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) else None


@index("topologies", id=IndexId.TOPOLOGY_VIEWS)
def topology_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    view = base_view(body)
    spec = dict(body.get("spec") or {})
    view.update(
        spec=spec,
        agents=tuple(topology_agent_names(spec)),
        workspace=_workspace_of(spec),
        version=view["status"].get("version"),
        annotations=dict(body.get("metadata", {}).get("annotations") or {}),
    )
    return {(namespace, name): view}


@index("topologies", id=IndexId.TOPOLOGY_BY_AGENT)
def topology_by_agent(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, agent) → topologies whose tree names it."""
    return {(namespace, a): name for a in topology_agent_names(body.get("spec") or {})}


@index("topologies", id=IndexId.TOPOLOGY_BY_WORKSPACE)
def topology_by_workspace(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    workspace = _workspace_of(body.get("spec") or {})
    return {(namespace, workspace): name} if workspace else {}


def dependents_view(view: dict[str, Any] | None) -> Any:
    if view is None:
        return MISSING
    description = view["spec"].get("description")
    return (
        view["version"],
        view["ready"],
        view["reason"],
        description,
        view["agents"],
        view["workspace"],
        # spec.promotion: a promotion rolls a served Topology and what its parents pin.
        (pr.active_of(view["status"]) or {}).get("version"),
        view["observed"] == view["generation"],  # last: whether the status is fresh
    )


def calling_topologies(ctl: Controller, namespace: str, topology: str) -> set[str]:
    """Topologies whose agents can call ``topology`` as a child (its parents)."""
    agents: set[str] = set()
    for skill in ctl.lookup_all(IndexId.SKILL_BY_TARGET, (namespace, topology)):
        agents |= granting_agents(ctl, namespace, skill)
    agents.update(
        ctl.lookup_all(IndexId.AGENT_BY_GRANT, (namespace, SYNTHESIZED_TOPOLOGY_PREFIX + topology))
    )
    parents: set[str] = set()
    for agent in agents:
        parents.update(ctl.lookup_all(IndexId.TOPOLOGY_BY_AGENT, (namespace, agent)))
    return parents


def dependents(
    ctl: Controller, namespace: str, name: str, seen: Observation, body: Mapping[str, Any]
) -> None:
    """The Topologies calling it as a child, the Agents granting its synthesized skill,
    and its own served Deployment once its new version shows."""
    old, view = seen.previous, seen.view
    if seen.changed:
        ctl.enqueue_many("Topology", namespace, calling_topologies(ctl, namespace, name) - {name})
        if view is not MISSING and (body.get("spec") or {}).get("serve") is not None:
            # Its new version/readiness is visible now: roll the served Deployment to it.
            ctl.enqueue("Topology", namespace, name)
        # Synthesized topology-<name> skills: their content is the name and description.
        if old is None or view is MISSING or old[3] != view[3]:
            agents = set(
                ctl.lookup_all(
                    IndexId.AGENT_BY_GRANT, (namespace, SYNTHESIZED_TOPOLOGY_PREFIX + name)
                )
            )
            agents.update(ctl.lookup_all(IndexId.AGENT_BY_GRANT, (namespace, WORKSPACE_PACK)))
            ctl.enqueue_many("Agent", namespace, agents)
    if view is not MISSING and promotion.force_asked(body):
        # A forced promotion is an annotation (no new generation): reconcile it now.
        ctl.enqueue("Topology", namespace, name)
    if view is not MISSING and _serving_waits_for_itself(body):
        # spec.serve was added to a Ready Topology: that reconcile found the Topology "being
        # reconciled" (its own generation) and set Serving Pending with a 30 s recheck.
        # Its status now shows the generation observed: serve it now. A re-run that
        # changes nothing writes nothing, so this cannot loop.
        ctl.enqueue("Topology", namespace, name)


def _serving_waits_for_itself(body: Mapping[str, Any]) -> bool:
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    if spec.get("serve") is None:
        return False
    if status.get("observedGeneration") != (body.get("metadata") or {}).get("generation"):
        return False
    serving = get_condition(status.get("conditions"), SERVING)
    return serving is not None and serving.get("reason") == REASON_PENDING


@on_event("apps", "v1", "deployments", labels={SERVE_LABEL: PRESENT})
async def served_deployment_event(
    namespace: str | None, labels: Mapping[str, str], app: App, **_: Any
) -> None:
    """A served Deployment changed (readiness, rollout, deletion): update its Topology."""
    ctl = app.controller
    if namespace is not None:
        ctl.enqueue("Topology", namespace, str(labels[SERVE_LABEL]))


class _Lazy(Mapping[str, V]):
    """A read-only mapping filled on demand from the indexes."""

    def __init__(self, fetch: Callable[[str], V | None]) -> None:
        self._fetch = fetch
        self._cache: dict[str, V | None] = {}

    def __getitem__(self, key: str) -> V:
        if key not in self._cache:
            self._cache[key] = self._fetch(key)
        value = self._cache[key]
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(k for k, v in self._cache.items() if v is not None)

    def __len__(self) -> int:
        return sum(1 for v in self._cache.values() if v is not None)


def spec_of(view: Mapping[str, Any]) -> AgentSpec | None:
    """An Agent view's validated spec (None when invalid: its own status says why), for the
    harness nodes' admission (:func:`..builders.topology.harness_check`)."""
    try:
        return AgentSpec.model_validate(view["spec"])
    except ValueError:
        return None


async def reconcile_topology(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    view = ctl.lookup(IndexId.TOPOLOGY_VIEWS, (namespace, name))
    if view is None:
        return "gone"
    spec = view["spec"]
    ws_name = view["workspace"] or ""
    workspace = workspace_view(ctl, namespace, ws_name) if ws_name else None
    funnels = {
        f: found["spec"]
        for f in funnel_names(spec)
        if (found := ctl.lookup(IndexId.FUNNEL_VIEWS, (namespace, f))) is not None
    }
    agents, topologies = _namespace_views(ctl, namespace)
    category, reviewer_writes = _skill_checks(ctl, namespace, workspace)
    render = resolve_topology(
        name,
        spec,
        agents,
        topologies,
        _graph(ctl, namespace),
        workspace,
        funnels,
        category,
        reviewer_writes,
    )
    accepted = any(v.type == ACCEPTED and v.status == "True" for v in render.verdicts)
    if accepted and not force:
        _defer_while_inputs_pending(ctl, namespace, name, view, render)

    fields = render.status_fields()
    verdicts = list(render.verdicts)
    if accepted:
        await _serve(ctl, namespace, name, view, render, fields, verdicts)
    promoted = await _promotion(ctl, namespace, name, view, render, funnels)
    fields.update(promoted.fields)
    verdicts += promoted.verdicts
    written = await ctl.write_status(
        StatusOf.of_view("Topology", namespace, name, view),
        fields,
        verdicts,
    )
    return "changed" if written else "unchanged"


def _namespace_views(
    ctl: Controller, namespace: str
) -> tuple[_Lazy[AgentView], _Lazy[TopologyView]]:
    """The namespace's Agents and Topologies as the builder sees them, read on demand."""

    def agent(a: str) -> AgentView | None:
        v = ctl.lookup(IndexId.AGENT_VIEWS, (namespace, a))
        if v is None:
            return None
        return AgentView(a, v["version"], v["ready"], v["reason"], v["workspace"], spec_of(v))

    def topology(t: str) -> TopologyView | None:
        v = ctl.lookup(IndexId.TOPOLOGY_VIEWS, (namespace, t))
        if v is None:
            return None
        return TopologyView(t, v["agents"], v["version"], v["ready"], v["reason"])

    return _Lazy(agent), _Lazy(topology)


def _graph(ctl: Controller, namespace: str) -> Graph:
    """The namespace's static call graph (topology → agents → skills → topologies)."""

    def topology_agents(t: str) -> tuple[str, ...] | None:
        v = ctl.lookup(IndexId.TOPOLOGY_VIEWS, (namespace, t))
        return None if v is None else tuple(v["agents"])

    def agent_grants(a: str) -> tuple[str, ...] | None:
        v = ctl.lookup(IndexId.AGENT_VIEWS, (namespace, a))
        return None if v is None else tuple(granted_skill_names(v["spec"]))

    def composes(s: str) -> tuple[str, ...] | None:
        v = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, s))
        return None if v is None else tuple(v["composes"])

    def target(s: str) -> str | None:
        v = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, s))
        return None if v is None else v["target"]

    return Graph(_Lazy(topology_agents), _Lazy(agent_grants), _Lazy(composes), _Lazy(target))


def _skill_checks(
    ctl: Controller, namespace: str, workspace: WorkspaceView | None
) -> tuple[Callable[[str], str | None], Callable[[str], list[str]]]:
    """What the funnel checks ask: a Skill's category, and what a reviewer agent may write."""

    def category(s: str) -> str | None:
        v = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, s))
        return None if v is None else v.get("category")

    def skill_facts(s: str) -> SkillFacts | None:
        v = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, s))
        return None if v is None else v.get("facts")

    def reviewer_writes(a: str) -> list[str]:
        v = ctl.lookup(IndexId.AGENT_VIEWS, (namespace, a))
        ws_spec = workspace.spec if workspace is not None else None
        return [] if v is None else not_read_only(v["spec"], skill_facts, ws_spec)

    return category, reviewer_writes


def _defer_while_inputs_pending(
    ctl: Controller, namespace: str, name: str, view: Mapping[str, Any], render: TopologyRender
) -> None:
    """Raise :class:`Deferred` while the status of an Agent, child Topology or the Workspace
    this one reads is about to change (:meth:`Controller.pending`)."""
    inputs: list[tuple[Key, Any]] = [
        (("Agent", namespace, a), ctl.lookup(IndexId.AGENT_VIEWS, (namespace, a)))
        for a in view["agents"]
    ]
    inputs += [
        (("Topology", namespace, c), ctl.lookup(IndexId.TOPOLOGY_VIEWS, (namespace, c)))
        for c in render.children
        if c != name
    ]
    ws_name = view["workspace"] or ""
    ws_raw = ctl.lookup(IndexId.WORKSPACE_VIEWS, (namespace, ws_name))
    if ws_raw is not None:
        inputs.append((("Workspace", namespace, ws_name), ws_raw))
    waiting = [k for k, v in inputs if ctl.pending(k, v)]
    if waiting:
        raise Deferred(waiting)


async def _serve(
    ctl: Controller,
    namespace: str,
    name: str,
    view: Mapping[str, Any],
    render: TopologyRender,
    fields: dict[str, Any],
    verdicts: list[Verdict],
) -> None:
    """``spec.serve`` (or a served Deployment left to take down): add its status fields
    and ``Serving`` verdict to the reconcile's."""
    if view["spec"].get("serve") is None and "serving" not in view["status"]:
        return
    served = await serving.reconcile_serving(
        ctl,
        ctl.services.resolver if isinstance(ctl.services.resolver, Resolver) else None,
        ctl.config,
        namespace,
        name,
        view,
        render.ready,
    )
    fields.update(served.fields)
    verdicts += served.verdicts
    if served.recheck is not None:
        ctl.enqueue("Topology", namespace, name, delay=served.recheck)


async def _promotion(
    ctl: Controller,
    namespace: str,
    name: str,
    view: Mapping[str, Any],
    render: TopologyRender,
    funnels: Mapping[str, Any],
) -> promotion.Promotion:
    """``spec.promotion``: the version's render (its agents at the renders it was made
    Ready with) and where its promotion stands."""
    owner = ObjectRef("Topology", name, namespace, view["uid"])
    if view["spec"].get("promotion") is None:
        return promotion.NONE
    if not render.ready or render.version is None or render.spec is None:
        return await promotion.reconcile_promotion(ctl, owner, view, None)
    agents: dict[str, pr.PinnedAgentRender] = {}
    for agent in render.agent_versions or {}:
        v = ctl.lookup(IndexId.AGENT_VIEWS, (namespace, agent))
        if v is None or not v["renderedConfigMap"]:
            return await promotion.reconcile_promotion(ctl, owner, view, None)
        agents[agent] = pr.PinnedAgentRender(
            v["version"],
            v["renderedConfigMap"],
            tuple(v["skillConfigMaps"]),
            v.get("renderedSha256"),
        )
    manifest, current = pr.topology_render(
        owner,
        render.version,
        render.spec.wire(),
        agents,
        {f: funnels[f] for f in render.funnel_versions or {} if f in funnels},
        render.funnel_versions or {},
        render.children,
    )
    return await promotion.reconcile_promotion(ctl, owner, view, current, manifest)


KIND = Kind(
    "Topology",
    priority=3,  # after everything it runs: Agents, Funnels, child Topologies' inputs
    reconcile=reconcile_topology,
    api=TOPOLOGY,
    indexes=(topology_views, topology_by_agent, topology_by_workspace, topology_by_funnel),
    dependents_view=dependents_view,
    dependents=dependents,
    # A Funnel its nodes name, and its Workspace: a new version or readiness, once the
    # source's status shows it.
    watches=(
        Watch("Funnel", IndexId.TOPOLOGY_BY_FUNNEL),
        Watch("Workspace", IndexId.TOPOLOGY_BY_WORKSPACE),
    ),
)
