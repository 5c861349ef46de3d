"""Funnels: checked and versioned, indexed for the Topologies whose nodes name them.

A Funnel's shape is checked at admission (CRD schema and CEL); its reconciler writes
``Accepted``/``Ready`` (:func:`~swarmkit_operator.builders.funnel.funnel_status`: ``Valid``,
``Invalid``/``InvalidSchema`` naming the field, ``QuorumUnreachable``, ``SkillNotFound``
while the judge skill does not exist) and ``status.version`` (sha256[:12] of the canonical
spec). What a Funnel means for a Topology
(found, judge skill granted, reviewer present, its version folded into the Topology's) is
the Topology reconciler's (:mod:`.topology`, :mod:`swarmkit_operator.builders.funnel`).
Every watch event of a Funnel enqueues it and the Topologies that name it; every watch event
of a Skill enqueues the Funnels judging with it.
"""

from __future__ import annotations

from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION

from ..builders.funnel import funnel_status
from ..indexes import index
from ..reconcile.controller import Controller, controller_of, reconciler
from ..reconcile.views import base_view
from .events import on_event


@index("funnels", id="funnel_views", group=GROUP, version=VERSION)
def funnel_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    view = base_view(body)
    view["spec"] = dict(body.get("spec") or {})
    return {(namespace, name): view}


@index("topologies", id="topology_by_funnel")
def topology_by_funnel(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, funnel) → topologies whose nodes name it."""
    return {(namespace, f): name for f in funnel_names(body.get("spec") or {})}


@index("funnels", id="funnel_by_reviewer", group=GROUP, version=VERSION)
def funnel_by_reviewer(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, agent) → funnels whose review layer runs it (its grants must stay
    read-only, so an edit of the agent re-checks the Topologies using those funnels)."""
    review = (body.get("spec") or {}).get("review")
    agent = review.get("agent") if isinstance(review, dict) else None
    return {(namespace, agent): name} if isinstance(agent, str) else {}


@index("funnels", id="funnel_by_judge", group=GROUP, version=VERSION)
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


@on_event(GROUP, VERSION, "funnels")
async def funnel_event(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    ctl = controller_of(memo)
    if ctl is not None and namespace is not None:
        ctl.enqueue("Funnel", namespace, name)
        ctl.enqueue_many(
            "Topology", namespace, set(ctl.lookup_all("topology_by_funnel", (namespace, name)))
        )


@on_event(GROUP, VERSION, "skills", metadata_only=True)
async def judge_skill_event(
    type: str | None, namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    """A Skill created or deleted: the Funnels judging with it re-check it exists."""
    ctl = controller_of(memo)
    if ctl is not None and namespace is not None and type in (None, "ADDED", "DELETED"):
        ctl.enqueue_many(
            "Funnel", namespace, set(ctl.lookup_all("funnel_by_judge", (namespace, name)))
        )


@reconciler("Funnel")
async def reconcile_funnel(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    view = ctl.lookup("funnel_views", (namespace, name))
    if view is None:
        return "gone"
    status = funnel_status(
        view["spec"], lambda s: ctl.lookup("skill_views", (namespace, s)) is not None
    )
    written = await ctl.write_status(
        "Funnel",
        namespace,
        name,
        view["uid"],
        int(view["generation"]),
        view["status"],
        dict(status.fields),
        status.verdicts,
    )
    return "changed" if written else "unchanged"
