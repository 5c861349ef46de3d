"""Topology → a validated agent graph, its version and its Accepted/Ready verdicts.

Child topologies are the Topologies reachable through the skills the tree's agents are
granted: an ``implementation: {type: agent, topology: <x>}`` skill (also as the component
of a granted ``composed`` skill) or an explicit ``topology-<x>`` grant. ``pack:workspace``
grants (every topology, now and later) are not followed here, since they would make every
such agent a cycle; the runner's depth cap (3) bounds them at run time.

A chain deeper than :data:`MAX_TOPOLOGY_DEPTH` topologies (counting this one) is rejected
with reason ``DepthExceeded``, a topology reachable from itself with ``Cycle``; both name
the path (``a → b → a``).

``status.version`` is sha256[:12] over the canonical JSON of ``{"spec": <normalized spec
without schedule, historyLimit, serve and promotion>, "agents": {node: [agent,
agentVersion]}, "children": {topology: version}}``: it changes when any agent of the tree
(and so any skill granted there) or any child topology changes, and not when only the
schedule does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from swarmkit_api import FieldError, ManifestError, validate_spec
from swarmkit_api.agent import AgentSpec
from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_AGENT_NOT_FOUND,
    REASON_AGENT_NOT_READY,
    REASON_CHILD_TOPOLOGY_NOT_FOUND,
    REASON_CHILD_TOPOLOGY_NOT_READY,
    REASON_CYCLE,
    REASON_DEPTH_EXCEEDED,
    REASON_HARNESS_UNSUPPORTED,
    REASON_RESOLVED,
    REASON_VALID,
    REASON_WORKSPACE_MISMATCH,
    REASON_WORKSPACE_NOT_FOUND,
    REASON_WORKSPACE_NOT_READY,
)
from swarmkit_api.harness import agent_provider, harness_problem
from swarmkit_api.topology import MAX_TOPOLOGY_DEPTH, Schedule, TopologySpec

from ..hashing import canonical_json, sha256_hex
from . import Verdict, invalid_verdict
from .agent import WorkspaceView
from .funnel import check_funnels
from .skill import SYNTHESIZED_TOPOLOGY_PREFIX

ARROW = " → "


@dataclass(frozen=True)
class AgentView:
    """What a topology needs to know of an Agent (from its spec and status)."""

    name: str
    version: str | None = None
    ready: bool = False
    reason: str = ""
    workspace: str = "default"
    #: Its validated spec (None: not read, or invalid: its own status says why); harness
    #: nodes are checked against it (:func:`harness_check`).
    spec: AgentSpec | None = None


@dataclass(frozen=True)
class TopologyView:
    """Another topology: its agents (spec) and status."""

    name: str
    agents: tuple[str, ...] = ()
    version: str | None = None
    ready: bool = False
    reason: str = ""


@dataclass(frozen=True)
class Graph:
    """The static call graph: who grants what, which skills call which topology."""

    topology_agents: Mapping[str, Sequence[str]]
    agent_grants: Mapping[str, Sequence[str]]
    skill_composes: Mapping[str, Sequence[str]]
    skill_targets: Mapping[str, str]

    def skills_of(self, agent: str) -> list[str]:
        out: list[str] = []
        stack = list(reversed(self.agent_grants.get(agent, ())))
        while stack:
            name = stack.pop()
            if name in out:
                continue
            out.append(name)
            stack.extend(reversed(self.skill_composes.get(name, ())))
        return out

    def children(self, topology: str, agents: Sequence[str] | None = None) -> list[str]:
        found: set[str] = set()
        for agent in agents if agents is not None else self.topology_agents.get(topology, ()):
            for skill in self.skills_of(agent):
                target = self.skill_targets.get(skill)
                if target is not None:
                    found.add(target)
                elif skill.startswith(SYNTHESIZED_TOPOLOGY_PREFIX):
                    found.add(skill[len(SYNTHESIZED_TOPOLOGY_PREFIX) :])
        return sorted(found)


@dataclass(frozen=True)
class GraphProblem:
    reason: str  # Cycle | DepthExceeded
    path: tuple[str, ...]

    @property
    def message(self) -> str:
        text = ARROW.join(self.path)
        if self.reason == REASON_CYCLE:
            return f"cycle: {text}"
        return f"{text} nests {len(self.path)} topologies, over the limit of {MAX_TOPOLOGY_DEPTH}"


def check_graph(root: str, root_agents: Sequence[str], graph: Graph) -> GraphProblem | None:
    """The first cycle or over-deep chain reachable from ``root`` (deterministic order)."""

    def visit(node: str, path: tuple[str, ...]) -> GraphProblem | None:
        if len(path) > MAX_TOPOLOGY_DEPTH:
            return GraphProblem(REASON_DEPTH_EXCEEDED, path)
        kids = graph.children(node, root_agents if node == root else None)
        for child in kids:
            if child in path:
                return GraphProblem(REASON_CYCLE, (*path[path.index(child) :], child))
        for child in kids:
            if child == root or child not in graph.topology_agents:
                continue
            problem = visit(child, (*path, child))
            if problem is not None:
                return problem
        return None

    return visit(root, (root,))


@dataclass(frozen=True)
class TopologyRender:
    verdicts: tuple[Verdict, ...]
    spec: TopologySpec | None = None
    version: str | None = None
    agent_versions: Mapping[str, str] | None = None
    children: tuple[str, ...] = ()
    funnel_versions: Mapping[str, str] | None = None

    @property
    def ready(self) -> bool:
        return any(v.type == READY and v.status == "True" for v in self.verdicts)

    def status_fields(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "agentVersions": dict(self.agent_versions or {}),
            "childTopologies": list(self.children),
            **({"funnelVersions": dict(self.funnel_versions)} if self.funnel_versions else {}),
        }


def version_spec(spec: TopologySpec) -> dict[str, Any]:
    wire = spec.wire()
    wire.pop("schedule", None)
    wire.pop("historyLimit", None)
    wire.pop("serve", None)  # how it is served is not what it is (replicas never re-version)
    wire.pop("promotion", None)  # nor how its versions are promoted
    return wire


def topology_agent_names(raw_spec: Mapping[str, Any]) -> list[str]:
    """Agent names a (possibly invalid) spec references, in order, each once."""
    names: list[str] = []
    for node in raw_spec.get("agents") or ():
        if isinstance(node, Mapping):
            ref = node.get("agentRef")
            name = ref.get("name") if isinstance(ref, Mapping) else None
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def schedule_problem(schedule: Schedule) -> FieldError | None:
    """What the apiserver's pattern cannot see in a schedule: a cron field out of range or
    an unknown time zone (the schedule would never fire), naming the field; None when valid."""
    if not croniter.is_valid(schedule.cron):
        return FieldError(
            "spec.schedule.cron", f"{schedule.cron!r} is not a valid five-field cron expression"
        )
    try:
        ZoneInfo(schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return FieldError(
            "spec.schedule.timezone", f"{schedule.timezone!r} is not a known IANA time zone"
        )
    return None


def validated_topology(raw_spec: Mapping[str, Any]) -> TopologySpec:
    """The spec validated by its model, then its schedule (raises :class:`ManifestError`)."""
    model = validate_spec("Topology", dict(raw_spec))
    assert isinstance(model, TopologySpec)
    problem = schedule_problem(model.schedule) if model.schedule else None
    if problem is not None:
        raise ManifestError([problem])
    return model


def agents_problem(
    model: TopologySpec,
    names: Sequence[str],
    agents: Mapping[str, AgentView],
    workspace: WorkspaceView | None,
) -> tuple[str, str] | None:
    """Why the topology's Agents refuse it: an Agent of another Workspace, or a harness
    node its harness cannot run (:func:`harness_check`); (reason, message) or None."""
    ws_name = model.workspace_ref.name
    mismatched = [
        f"{a} (uses {agents[a].workspace!r})"
        for a in names
        if a in agents and agents[a].workspace != ws_name
    ]
    if mismatched:
        message = f"agents of another workspace than {ws_name!r}: " + ", ".join(mismatched)
        return REASON_WORKSPACE_MISMATCH, message
    harness = harness_check(model, agents, workspace)
    return None if harness is None else (REASON_HARNESS_UNSUPPORTED, harness)


def harness_check(
    model: TopologySpec, agents: Mapping[str, AgentView], workspace: WorkspaceView | None
) -> str | None:
    """Why a harness node of ``model`` cannot run (its Agent's provider speaks another wire
    format, or it needs a capability its harness has not shown), or None. An Agent or
    Workspace not found yet is left to the Ready checks."""
    providers = list(workspace.spec.model_providers) if workspace and workspace.spec else []
    for i, node in enumerate(model.agents):
        if node.harness is None:
            continue
        view = agents.get(node.agent_ref.name)
        spec = view.spec if view is not None else None
        if spec is None:
            continue
        provider = agent_provider(spec, providers) if providers else None
        problem = harness_problem(node.harness, spec, provider, f"spec.agents[{i}].harness")
        if problem is not None:
            return problem
    return None


def resolve_topology(
    name: str,
    raw_spec: Mapping[str, Any],
    agents: Mapping[str, AgentView],
    topologies: Mapping[str, TopologyView],
    graph: Graph,
    workspace: WorkspaceView | None,
    funnels: Mapping[str, Mapping[str, Any]] | None = None,
    skill_category: Callable[[str], str | None] | None = None,
    reviewer_writes: Callable[[str], Sequence[str]] | None = None,
) -> TopologyRender:
    """Check the tree and its call graph, and compute the version.

    ``agents`` and ``topologies`` hold what exists in the namespace (at least what this
    topology reaches); ``graph`` is the static call graph; ``workspace`` is this topology's
    Workspace (``None``: not found); ``funnels`` the specs of the Funnels its nodes name
    (:mod:`.funnel`); ``reviewer_writes`` what a funnel's reviewer agent holds that is not
    read-only (:mod:`.reviewer`).
    """
    try:
        model = validated_topology(raw_spec)
    except ManifestError as exc:
        verdict = invalid_verdict(exc)
        return TopologyRender(
            verdicts=(verdict, Verdict(READY, "False", verdict.reason, verdict.message))
        )
    unique_agents = tuple(dict.fromkeys(n.agent_ref.name for n in model.agents))
    children = tuple(graph.children(name, list(unique_agents)))
    reached = _Reached(unique_agents, children, agents, topologies)
    problem = check_graph(name, unique_agents, graph)
    refused = (
        (problem.reason, problem.message)
        if problem is not None
        else agents_problem(model, unique_agents, agents, workspace)
    )
    if refused is not None:
        reason, message = refused
        return TopologyRender(
            verdicts=(
                Verdict(ACCEPTED, "False", reason, message),
                Verdict(READY, "False", reason, message),
            ),
            spec=model,
            children=children,
        )
    agent_versions = {a: agents[a].version for a in unique_agents if a in agents}
    funnel_check = check_funnels(
        model,
        funnels or {},
        graph.skills_of,
        lambda a: a in agents,
        skill_category or (lambda _: None),
        reviewer_writes or (lambda _: ()),
    )
    accepted = Verdict(
        ACCEPTED,
        "True",
        REASON_VALID,
        f"{len(model.agents)} node(s), {len(children)} child topolog(ies)",
    )
    ws_name = model.workspace_ref.name
    ready = _not_found(reached, ws_name, workspace, funnel_check.problem) or _not_ready(
        reached, ws_name, workspace
    )
    return TopologyRender(
        verdicts=(accepted, ready),
        spec=model,
        version=_topology_version(model, agent_versions, reached, funnel_check.versions),
        agent_versions={a: v for a, v in agent_versions.items() if v is not None},
        children=children,
        funnel_versions=funnel_check.versions,
    )


@dataclass(frozen=True)
class _Reached:
    """The Agents and child Topologies one topology reaches, and what exists of each."""

    agent_names: tuple[str, ...]
    children: tuple[str, ...]
    agents: Mapping[str, AgentView]
    topologies: Mapping[str, TopologyView]


def _topology_version(
    model: TopologySpec,
    agent_versions: Mapping[str, str | None],
    reached: _Reached,
    funnel_versions: Mapping[str, str],
) -> str:
    """``status.version`` (see the module docstring for what it covers and what not)."""
    versioned: dict[str, Any] = {
        "spec": version_spec(model),
        "agents": {
            n.name: [n.agent_ref.name, agent_versions.get(n.agent_ref.name)] for n in model.agents
        },
        "children": {
            c: reached.topologies[c].version if c in reached.topologies else None
            for c in reached.children
        },
    }
    if any(n.funnel is not None for n in model.agents):
        # Only then: topologies without a funnel keep the versions they had.
        versioned["funnels"] = dict(funnel_versions)
    return sha256_hex(canonical_json(versioned))[:12]


def _not_found(
    reached: _Reached,
    ws_name: str,
    workspace: WorkspaceView | None,
    funnel_problem: Verdict | None,
) -> Verdict | None:
    """``Ready=False`` for what the tree needs and does not find (or a funnel's problem)."""
    if workspace is None:
        return Verdict(
            READY, "False", REASON_WORKSPACE_NOT_FOUND, f"Workspace {ws_name!r} not found"
        )
    missing_agents = [a for a in reached.agent_names if a not in reached.agents]
    if missing_agents:
        return Verdict(
            READY,
            "False",
            REASON_AGENT_NOT_FOUND,
            "agent(s) not found: " + ", ".join(missing_agents),
        )
    if funnel_problem is not None:
        return funnel_problem
    missing_children = [c for c in reached.children if c not in reached.topologies]
    if missing_children:
        return Verdict(
            READY,
            "False",
            REASON_CHILD_TOPOLOGY_NOT_FOUND,
            "topolog(ies) called through agent skills not found: " + ", ".join(missing_children),
        )
    return None


def _not_ready(reached: _Reached, ws_name: str, workspace: WorkspaceView | None) -> Verdict:
    """``Ready``: the Workspace, the Agents, then the child Topologies, each Ready."""
    agents, topologies = reached.agents, reached.topologies
    unready_agents = [
        f"{a} ({agents[a].reason or 'not Ready'})"
        for a in reached.agent_names
        if a in agents and not agents[a].ready
    ]
    unready_children = [
        f"{c} ({topologies[c].reason or 'not Ready'})"
        for c in reached.children
        if c in topologies and not topologies[c].ready
    ]
    if workspace is not None and not workspace.ready:
        return Verdict(
            READY,
            "False",
            REASON_WORKSPACE_NOT_READY,
            f"Workspace {ws_name!r} is not Ready ({workspace.reason}): {workspace.message}",
        )
    if unready_agents:
        return Verdict(
            READY,
            "False",
            REASON_AGENT_NOT_READY,
            "agent(s) not Ready: " + ", ".join(unready_agents),
        )
    if unready_children:
        return Verdict(
            READY,
            "False",
            REASON_CHILD_TOPOLOGY_NOT_READY,
            "child topolog(ies) not Ready: " + ", ".join(unready_children),
        )
    children = reached.children
    return Verdict(
        READY,
        "True",
        REASON_RESOLVED,
        f"{len(reached.agent_names)} agent(s) Ready"
        + (f", child topologies: {', '.join(children)}" if children else ""),
    )
