"""Funnels: checked and versioned, indexed for the Topologies whose nodes name them.

A Funnel's shape is checked at admission (CRD schema and CEL); its reconciler writes
``Accepted``/``Ready`` (:func:`~swarmkit_operator.builders.funnel.funnel_status`: ``Valid``,
``Invalid``/``InvalidSchema`` naming the field, ``QuorumUnreachable``, ``SkillNotFound``
while the judge skill does not exist) and ``status.version`` (sha256[:12] of the canonical
spec). What a Funnel means for a Topology
(found, judge skill granted, reviewer present, its version folded into the Topology's) is
the Topology reconciler's (:mod:`.topology`, :mod:`swarmkit_operator.builders.funnel`).
A Funnel is declared like every other kind (:data:`KIND`): its own status echo enqueues
nothing; a spec change enqueues it. A Skill created or deleted enqueues the Funnels judging
with it: a :class:`~swarmkit_operator.reconcile.controller.Watch` of Skills on this
declaration (index ``funnel_by_judge``), so what wakes a Funnel is declared here. In the
same way the Topologies naming a Funnel declare their watch of it (``topology.KIND``, index
``topology_by_funnel``): they hear of its new ``status.version`` (or readiness) once it
shows.
"""

from __future__ import annotations

from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION
from swarmkit_api.resources import FUNNEL

from ..builders.funnel import funnel_status
from ..indexes import IndexId, index
from ..reconcile.controller import Controller, Kind, Watch, existence_changed
from ..reconcile.status import StatusOf
from ..reconcile.views import MISSING, base_view


@index("funnels", id=IndexId.FUNNEL_VIEWS, group=GROUP, version=VERSION)
def funnel_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    view = base_view(body)
    view["spec"] = dict(body.get("spec") or {})
    return {(namespace, name): view}


@index("topologies", id=IndexId.TOPOLOGY_BY_FUNNEL)
def topology_by_funnel(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, funnel) → topologies whose nodes name it."""
    return {(namespace, f): name for f in funnel_names(body.get("spec") or {})}


@index("funnels", id=IndexId.FUNNEL_BY_REVIEWER, group=GROUP, version=VERSION)
def funnel_by_reviewer(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, agent) → funnels whose review layer runs it (its grants must stay
    read-only, so an edit of the agent re-checks the Topologies using those funnels)."""
    review = (body.get("spec") or {}).get("review")
    agent = review.get("agent") if isinstance(review, dict) else None
    return {(namespace, agent): name} if isinstance(agent, str) else {}


@index("funnels", id=IndexId.FUNNEL_BY_JUDGE, group=GROUP, version=VERSION)
def funnel_by_judge(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, skill) → funnels whose judge layer runs it (Ready waits for it)."""
    judge = (body.get("spec") or {}).get("judge")
    skill = judge.get("skill") if isinstance(judge, dict) else None
    return {(namespace, skill): name} if isinstance(skill, str) else {}


def funnel_names(spec: Any) -> set[str]:
    """The funnels a Topology spec's nodes name."""
    return {
        str(n["funnel"].get("name"))
        for n in spec.get("agents") or ()
        if isinstance(n, dict) and isinstance(n.get("funnel"), dict)
    }


def dependents_view(view: dict[str, Any] | None) -> Any:
    """What the Topologies naming the Funnel read of it: its version (a hash of the spec)
    and readiness."""
    if view is None:
        return MISSING
    return (
        view["status"].get("version"),
        view["ready"],
        view["reason"],
        view["observed"] == view["generation"],
    )


async def reconcile_funnel(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    view = ctl.lookup(IndexId.FUNNEL_VIEWS, (namespace, name))
    if view is None:
        return "gone"
    status = funnel_status(
        view["spec"], lambda s: ctl.lookup(IndexId.SKILL_VIEWS, (namespace, s)) is not None
    )
    written = await ctl.write_status(
        StatusOf.of_view("Funnel", namespace, name, view),
        dict(status.fields),
        status.verdicts,
    )
    return "changed" if written else "unchanged"


KIND = Kind(
    "Funnel",
    priority=2,  # before the Topologies that name it
    reconcile=reconcile_funnel,
    api=FUNNEL,
    indexes=(funnel_views, funnel_by_reviewer, funnel_by_judge),
    dependents_view=dependents_view,
    # Ready says whether the judge skill exists: a Skill created or deleted re-checks it.
    watches=(Watch("Skill", IndexId.FUNNEL_BY_JUDGE, when=existence_changed),),
)
