"""Where an agent runs in a run: its topology node (if any) and the topology.

A leaf of the runner's module graph (it imports only :mod:`swarmkit_api`), so the run
context can name it in the agent-loop protocol without importing the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.topology import TopologyNode


@dataclass(frozen=True)
class AgentPosition:
    """An agent at its place in the run: topology node (if any) and its children."""

    agent: BundleAgent
    node: TopologyNode | None
    topology: str | None
