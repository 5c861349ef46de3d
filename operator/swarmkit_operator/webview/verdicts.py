"""The promotion verdict endpoint: ``GET /verdicts/<namespace>/<topologies|agents>/<name>``.

JSON for machines (the chart's Argo Rollouts ``ClusterAnalysisTemplate`` polls it; Kargo
verification and Flagger webhooks can too): whether the object's current version is
promoted (:func:`swarmkit_operator.builders.promotion.endpoint_verdict`). Read from the same
in-memory indexes as the pages, never from the API.
"""

from __future__ import annotations

from typing import Any

from ..builders.promotion import endpoint_verdict
from ..indexes import IndexId
from .pages import Sources

#: URL segment → the kind's views index.
VIEWS = {
    "topologies": ("Topology", IndexId.TOPOLOGY_VIEWS),
    "agents": ("Agent", IndexId.AGENT_VIEWS),
}


def verdict(sources: Sources, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
    """The verdict document of one object; None when there is no such object."""
    if plural not in VIEWS:
        return None
    kind, index = VIEWS[plural]
    view = sources.one(index, (namespace, name))
    if view is None:
        return None
    return {"kind": kind, "namespace": namespace, "name": name, **endpoint_verdict(view)}
