"""Promotion's watches: the EvalRuns and Reviews of candidates, back to their Topology or
Agent (:mod:`swarmkit_operator.promotion` decides from these indexes).

The operator labels what it starts for a candidate with ``swarmkit.dev/promotion-of``; the
indexes here keep what a promotion reads of them (an EvalRun's verdict and regressions, a
Review's decision), and every event of one queues its owner's reconcile. An EvalSet that
appears or changes queues the Topologies and Agents whose ``spec.promotion`` names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION
from swarmkit_api.promotion import PROMOTION_LABEL

from ..builders import promotion as pr
from ..indexes import PRESENT, IndexId, index
from ..promotion import EVAL_RUNS_INDEX, REVIEWS_INDEX
from .common import App
from .events import on_event

#: The kinds that may declare ``spec.promotion``.
PROMOTED_KINDS = ("Topology", "Agent")


@index(
    "evalruns", id=EVAL_RUNS_INDEX, labels={PROMOTION_LABEL: PRESENT}, group=GROUP, version=VERSION
)
def promotion_eval_runs(
    body: kopf.Body, namespace: str | None, labels: Mapping[str, str], **_: Any
) -> dict[Any, Any]:
    """(namespace, promotion label) → each EvalRun's verdict, regressions and summary."""
    return {(namespace, labels[PROMOTION_LABEL]): pr.eval_run_outcome(body)}


@index("reviews", id=REVIEWS_INDEX, labels={PROMOTION_LABEL: PRESENT}, group=GROUP, version=VERSION)
def promotion_reviews(
    body: kopf.Body, namespace: str | None, labels: Mapping[str, str], **_: Any
) -> dict[Any, Any]:
    """(namespace, promotion label) → its Reviews (name and spec: the decision)."""
    meta = body.get("metadata") or {}
    value = {"metadata": {"name": meta.get("name")}, "spec": dict(body.get("spec") or {})}
    return {(namespace, labels[PROMOTION_LABEL]): value}


def _eval_sets(body: Mapping[str, Any]) -> list[str]:
    """The EvalSets ``spec.promotion`` names."""
    promotion = (body.get("spec") or {}).get("promotion") or {}
    sets = promotion.get("evalSets") if isinstance(promotion, Mapping) else None
    return [str(e["name"]) for e in sets or () if isinstance(e, Mapping) and e.get("name")]


@index("topologies", id=IndexId.PROMOTION_TOPOLOGIES_BY_EVAL_SET)
def topologies_by_eval_set(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    return {(namespace, es): name for es in _eval_sets(body)}


@index("agents", id=IndexId.PROMOTION_AGENTS_BY_EVAL_SET)
def agents_by_eval_set(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    return {(namespace, es): name for es in _eval_sets(body)}


def _owner(body: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in (body.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") in PROMOTED_KINDS:
            return str(ref["kind"]), str(ref["name"])
    return None


# On the EvalRun kind's own stream, not a labelled one: that stream keeps the indexes
# current (promotion_eval_runs too), and a second stream's event could come first and
# reconcile the owner before the index shows the verdict.
@on_event(GROUP, VERSION, "evalruns")
async def candidate_eval_run(
    body: kopf.Body, namespace: str | None, labels: Mapping[str, str], app: App, **_: Any
) -> None:
    """A candidate's EvalRun changed (its verdict came): reconcile its owner."""
    owner = _owner(body) if PROMOTION_LABEL in labels else None
    if owner is not None and namespace:
        app.controller.enqueue(owner[0], namespace, owner[1])


@on_event(GROUP, VERSION, "reviews", labels={PROMOTION_LABEL: PRESENT})
async def candidate_review(
    type: str | None, body: kopf.Body, namespace: str | None, app: App, **_: Any
) -> None:
    """A candidate's Review changed: its owner (the Reviews controller records the
    decision in the Review's status) and the owning Topology or Agent (it promotes)."""
    app.reviews.observed(type, body)
    owner = _owner(body)
    if owner is not None and namespace:
        app.controller.enqueue(owner[0], namespace, owner[1])


@on_event(GROUP, VERSION, "evalsets")
async def eval_set_event(namespace: str | None, name: str, app: App, **_: Any) -> None:
    """An EvalSet appeared, changed or went: the objects whose promotion names it."""
    ctl = app.controller
    if not namespace:
        return
    ctl.enqueue_many(
        "Topology",
        namespace,
        ctl.lookup_all(IndexId.PROMOTION_TOPOLOGIES_BY_EVAL_SET, (namespace, name)),
    )
    ctl.enqueue_many(
        "Agent", namespace, ctl.lookup_all(IndexId.PROMOTION_AGENTS_BY_EVAL_SET, (namespace, name))
    )
