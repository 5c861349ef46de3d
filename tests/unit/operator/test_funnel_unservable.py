"""A bundle that can reach a funnel-gated node is not served (A2A serve, MCP gateway).

The served topology's own nodes and the topologies its agents' skills run as child runs
(every topology the bundle pins) are looked at; the refusal names each gated node.
"""

from __future__ import annotations

from swarmkit_api.bundle import BundleTopology
from swarmkit_api.funnel import FunnelSpec
from swarmkit_api.topology import TopologySpec
from swarmkit_operator.builders.unservable import gated_nodes, refusal
from tests.support.bundles import agent, bundle, topology_of

FUNNEL = FunnelSpec.model_validate(
    {"approve": {"rules": [{"roles": ["l"], "quorum": "any"}], "roles": {"l": {"users": ["a"]}}}}
)


def _gated(name: str) -> BundleTopology:
    spec = TopologySpec.model_validate(
        {
            "workspaceRef": {"name": "default"},
            "agents": [
                {"name": "lead", "agentRef": {"name": "lead"}, "role": "root"},
                {
                    "name": "draft",
                    "agentRef": {"name": "writer"},
                    "role": "leader",
                    "parent": "lead",
                    "funnel": {"name": "notes-gate"},
                },
            ],
        }
    )
    return BundleTopology(name=name, version="v1", spec=spec, funnels={"notes-gate": FUNNEL})


def test_an_ungated_bundle_is_served() -> None:
    b = bundle(agents=[agent("solo")], topology=topology_of("plain", "solo"))
    assert gated_nodes(b) == []
    assert refusal(b, "served topology plain") is None


def test_a_gated_node_in_a_child_topology_refuses_the_serve_naming_it() -> None:
    agents = [agent("solo"), agent("lead"), agent("writer")]
    b = bundle(agents=agents, topology=topology_of("front", "solo"), topologies=[_gated("notes")])
    assert gated_nodes(b) == ["notes/draft (Funnel notes-gate)"]
    why = refusal(b, "served topology front")
    assert why is not None
    assert why.startswith(
        "served topology front can reach funnel-gated node(s) notes/draft (Funnel notes-gate): "
    )
    assert "start a Run of the Topology instead" in why
