"""Topology resolution: depth and cycles through agent skills, versions, readiness."""

from __future__ import annotations

from typing import Any

from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders.agent import WorkspaceView
from swarmkit_operator.builders.topology import AgentView, Graph, TopologyView, resolve_topology

WS = WorkspaceView("default", WorkspaceSpec(), ready=True, reason="Rendered")


def tree(*agents: str) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [
        {"name": "root", "agentRef": {"name": agents[0]}, "role": "root"}
    ]
    for i, agent in enumerate(agents[1:]):
        nodes.append(
            {"name": f"w{i}", "agentRef": {"name": agent}, "role": "worker", "parent": "root"}
        )
    return {"workspaceRef": {"name": "default"}, "agents": nodes}


def chain_graph(edges: dict[str, str]) -> tuple[Graph, dict[str, TopologyView]]:
    """Topology t → (its agent a-t granting skill call-<child>) for each edge."""
    names = set(edges) | set(edges.values())
    topology_agents = {t: [f"a-{t}"] for t in names}
    agent_grants = {f"a-{t}": ([f"call-{edges[t]}"] if t in edges else []) for t in names}
    targets = {f"call-{c}": c for c in edges.values()}
    graph = Graph(topology_agents, agent_grants, {}, targets)
    topologies = {t: TopologyView(t, (f"a-{t}",), version=t * 3, ready=True) for t in names}
    return graph, topologies


def agents_for(names: Any) -> dict[str, AgentView]:
    return {f"a-{t}": AgentView(f"a-{t}", f"v-{t}", ready=True) for t in names}


def v(render: Any) -> dict[str, tuple[str, str]]:
    return {x.type: (x.status, x.reason) for x in render.verdicts}


def test_cycle_is_rejected_with_its_path() -> None:
    graph, topologies = chain_graph({"t1": "t2", "t2": "t1"})
    render = resolve_topology("t1", tree("a-t1"), agents_for(topologies), topologies, graph, WS)
    assert v(render)["Accepted"] == ("False", "Cycle")
    message = next(x.message for x in render.verdicts if x.type == "Accepted")
    assert "t1 → t2 → t1" in message
    assert render.version is None
    self_loop, topos = chain_graph({"t1": "t1"})
    render = resolve_topology("t1", tree("a-t1"), agents_for(topos), topos, self_loop, WS)
    assert v(render)["Accepted"] == ("False", "Cycle")


def test_depth_four_is_rejected_depth_three_is_fine() -> None:
    graph, topologies = chain_graph({"t1": "t2", "t2": "t3", "t3": "t4"})
    agents = agents_for(topologies)
    render = resolve_topology("t1", tree("a-t1"), agents, topologies, graph, WS)
    assert v(render)["Accepted"] == ("False", "DepthExceeded")
    assert "t1 → t2 → t3 → t4" in next(x.message for x in render.verdicts)
    render = resolve_topology("t2", tree("a-t2"), agents, topologies, graph, WS)
    assert v(render) == {"Accepted": ("True", "Valid"), "Ready": ("True", "Resolved")}
    assert render.children == ("t3",)


def test_version_covers_agents_and_children_not_schedule() -> None:
    graph, topologies = chain_graph({"t1": "t2"})
    agents = agents_for(topologies)
    base = resolve_topology("t1", tree("a-t1"), agents, topologies, graph, WS)
    assert base.agent_versions == {"a-t1": "v-t1"}
    scheduled = dict(tree("a-t1"), schedule={"cron": "0 * * * *"})
    assert resolve_topology("t1", scheduled, agents, topologies, graph, WS).version == base.version
    edited = dict(agents, **{"a-t1": AgentView("a-t1", "v-new", ready=True)})
    assert (
        resolve_topology("t1", tree("a-t1"), edited, topologies, graph, WS).version != base.version
    )
    child = dict(topologies, t2=TopologyView("t2", ("a-t2",), version="new", ready=True))
    assert resolve_topology("t1", tree("a-t1"), agents, child, graph, WS).version != base.version


def test_readiness() -> None:
    graph, topologies = chain_graph({"t1": "t2"})
    agents = agents_for(topologies)
    spec = tree("a-t1", "extra")
    render = resolve_topology("t1", spec, agents, topologies, graph, WS)
    assert v(render)["Ready"] == ("False", "AgentNotFound")
    assert "extra" in next(x.message for x in render.verdicts if x.type == "Ready")
    agents["extra"] = AgentView("extra", "v", ready=False, reason="UnknownTool")
    render = resolve_topology("t1", spec, agents, topologies, graph, WS)
    assert v(render)["Ready"] == ("False", "AgentNotReady")
    agents["extra"] = AgentView("extra", "v", ready=True)
    assert v(resolve_topology("t1", spec, agents, topologies, graph, WS))["Ready"][0] == "True"
    no_child = {k: t for k, t in topologies.items() if k != "t2"}
    render = resolve_topology("t1", spec, agents, no_child, graph, WS)
    assert v(render)["Ready"] == ("False", "ChildTopologyNotFound")
    render = resolve_topology("t1", spec, agents, topologies, graph, None)
    assert v(render)["Ready"] == ("False", "WorkspaceNotFound")
    other_ws = dict(agents, extra=AgentView("extra", "v", ready=True, workspace="prod"))
    render = resolve_topology("t1", spec, other_ws, topologies, graph, WS)
    assert v(render)["Accepted"] == ("False", "WorkspaceMismatch")


def test_invalid_tree() -> None:
    spec = {
        "workspaceRef": {"name": "default"},
        "agents": [{"name": "a", "agentRef": {"name": "x"}, "role": "worker", "parent": "b"}],
    }
    render = resolve_topology("t", spec, {}, {}, Graph({}, {}, {}, {}), WS)
    assert v(render)["Accepted"] == ("False", "Invalid")


def test_composed_and_explicit_topology_grants_are_followed() -> None:
    graph = Graph(
        {"t1": ["a1"], "t2": ["a2"], "t3": ["a3"]},
        {"a1": ["combo"], "a2": ["topology-t3"], "a3": []},
        {"combo": ["call-t2"]},
        {"call-t2": "t2"},
    )
    assert graph.children("t1") == ["t2"]
    assert graph.children("t2") == ["t3"]


def test_a_schedule_that_would_never_fire_is_not_accepted() -> None:
    # Issue 47.6: the apiserver checks the shape; the values and the zone are checked here.
    graph, topologies = chain_graph({"t1": "t2"})
    agents = agents_for(topologies)
    cases = {
        ("99 * * * *", "UTC"): "spec.schedule.cron: '99 * * * *'",
        ("0 9 * * tue", "Mars/Olympus"): "spec.schedule.timezone: 'Mars/Olympus'",
    }
    for (cron, tz), named in cases.items():
        spec = dict(tree("a-t1"), schedule={"cron": cron, "timezone": tz})
        render = resolve_topology("t1", spec, agents, topologies, graph, WS)
        assert v(render)["Accepted"] == ("False", "Invalid")
        assert v(render)["Ready"] == ("False", "Invalid")
        assert any(named in x.message for x in render.verdicts), render.verdicts
    fine = dict(tree("a-t1"), schedule={"cron": "0 9 * * tue", "timezone": "Europe/Paris"})
    assert v(resolve_topology("t1", fine, agents, topologies, graph, WS))["Accepted"][0] == "True"
