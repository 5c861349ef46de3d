"""Funnel-gated nodes cannot be served: a served task or a gateway call has no Run to park.

A funnel's approval is a Review signed by Kubernetes identities in their roles, with a
quorum, a four-eyes floor and ``excludeAuthor`` (the Run's creator, recorded by admission),
and the gated run waits for it parked (checkpoint, resume in a new Job). A served
Topology's A2A task and an MCP gateway session have none of that: no Run, no recorded
author, and their only way to wait for a person is A2A ``input-required``, which the
*caller* answers; letting the caller approve would let the requester sign off their own
artifact, one answer standing for a quorum. So a bundle that could reach a gated node is
refused where it is served, at reconcile time: the served Topology's (or the Agent
gateway's) ``Serving`` condition is ``False`` with reason ``FunnelNotServable`` naming the
gated nodes, and no workload runs it (an existing one is removed: serving the previous,
ungated version would let artifacts through the gate the Topology now names). The Topology
itself stays Ready for Runs, where the gate works. Reachable means in the bundle the serve
or gateway would pin: the topology's own nodes and every topology its agents' skills can
run as a child run.
"""

from __future__ import annotations

from swarmkit_api.bundle import RunBundle


def gated_nodes(bundle: RunBundle) -> list[str]:
    """``topology/node (Funnel f)`` for every funnel-gated node the bundle can run."""
    return [
        f"{name}/{node.name} (Funnel {node.funnel.name})"
        for name, topology in sorted(bundle.topologies.items())
        for node in topology.spec.agents
        if node.funnel is not None
    ]


def refusal(bundle: RunBundle, what: str) -> str | None:
    """Why ``what`` (the served topology, the agent's gateway) cannot serve ``bundle``."""
    gated = gated_nodes(bundle)
    if not gated:
        return None
    return (
        f"{what} can reach funnel-gated node(s) {', '.join(gated)}: a funnel's approval "
        "needs a Run to park (a served task or gateway call has none, and its caller "
        "cannot stand for the approvers); start a Run of the Topology instead"
    )


__all__ = ["gated_nodes", "refusal"]
