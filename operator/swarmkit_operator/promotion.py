"""Promotion gated on evaluation: what a Topology's or Agent's reconcile adds for
``spec.promotion`` (``status.promotion`` and the ``Promoted`` condition).

The decision is pure (:func:`swarmkit_operator.builders.promotion.decide`); this module
gathers its inputs from the indexes (the candidate's EvalRuns, the EvalSets, its Review, a
forced promotion's annotations), writes what the decision asks for (the Topology version's
render, the EvalRuns of the candidate, the Review of an inconclusive one, opened through the
Reviews owner) and returns the status fields and verdict the kind's reconcile writes with
its own. The version a Run, a served Topology or a gateway runs is picked from that status
by the one Resolver (:mod:`swarmkit_operator.workload.resolve`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from swarmkit_api.conditions import PROMOTED, REASON_TAMPERED_OBJECT
from swarmkit_api.promotion import (
    FORCE_PROMOTE_ANNOTATION,
    FORCE_PROMOTED_BY_ANNOTATION,
    PromotionSpec,
    PromotionStatus,
)
from swarmkit_api.review import decision_of

from . import k8s
from .builders import ObjectRef, Verdict
from .builders import promotion as pr
from .indexes import IndexId
from .reconcile.controller import Controller
from .reconcile.views import Key
from .reviews import ReviewsController

log = logging.getLogger("swarmkit_operator.promotion")

#: Index ids this module reads (declared in :mod:`swarmkit_operator.handlers.promotion`).
EVAL_RUNS_INDEX = IndexId.PROMOTION_EVAL_RUNS
REVIEWS_INDEX = IndexId.PROMOTION_REVIEWS
EVAL_SETS_INDEX = IndexId.EVALSET_VIEWS  # the EvalSet kind's views (its declaration)


@dataclass(frozen=True)
class Promotion:
    """What a reconcile writes for ``spec.promotion``."""

    fields: Mapping[str, Any]
    verdicts: tuple[Verdict, ...]


NONE = Promotion({}, ())


def force_of(annotations: Mapping[str, str]) -> pr.Force | None:
    """A forced promotion from the annotations (the admission policy checked the caller's
    ``promote`` verb and that ``force-promoted-by`` is them)."""
    version = annotations.get(FORCE_PROMOTE_ANNOTATION)
    by = annotations.get(FORCE_PROMOTED_BY_ANNOTATION)
    return pr.Force(str(version), str(by)) if version and by else None


def spec_of(raw: Mapping[str, Any]) -> PromotionSpec | None:
    """``spec.promotion`` (admission validated it; a stale schema gives None)."""
    promotion = raw.get("promotion")
    if promotion is None:
        return None
    try:
        return PromotionSpec.model_validate(promotion)
    except ValidationError:
        return None


def _previous(status: Mapping[str, Any]) -> PromotionStatus | None:
    raw = status.get("promotion")
    if not raw:
        return None
    try:
        return PromotionStatus.model_validate(raw)
    except ValidationError:  # written by an older operator: start over from it
        return None


async def reconcile_promotion(
    ctl: Controller,
    owner: ObjectRef,
    view: Mapping[str, Any],
    current: pr.Version | None,
    render: Mapping[str, Any] | None = None,
) -> Promotion:
    """``status.promotion`` and ``Promoted`` for ``owner`` (a Topology or an Agent) whose
    current version is ``current`` (None: not Ready). ``render``: the Topology version's
    ConfigMap (an Agent's render is its own)."""
    spec = spec_of(view["spec"])
    if spec is None:
        return NONE
    ns, name = owner.namespace, owner.name
    if render is not None and current is not None:
        why = await _ensure_render(ctl, owner, render)
        if why is not None:
            message = f"the ConfigMap bearing the render's name is not the render: {why}"
            verdict = Verdict(PROMOTED, "False", REASON_TAMPERED_OBJECT, message)
            return Promotion({"promotion": view["status"].get("promotion")}, (verdict,))
    label = pr.promotion_label(owner.kind, name)
    version = current.version if current is not None else ""
    runs = {
        str(r["evalSet"]): pr.EvalOutcome(
            r["name"], str(r["evalSet"]), r.get("verdict"), tuple(r.get("regressions") or ())
        )
        for r in ctl.lookup_all(EVAL_RUNS_INDEX, (ns, label))
        if r.get("version") == version
    }
    missing = tuple(
        e.name for e in spec.eval_sets if ctl.lookup(EVAL_SETS_INDEX, (ns, e.name)) is None
    )
    review_name = pr.review_name(owner.kind, name, version)
    decision = next(
        (
            decision_of(r)
            for r in ctl.lookup_all(REVIEWS_INDEX, (ns, label))
            if (r.get("metadata") or {}).get("name") == review_name
        ),
        None,
    )
    plan = pr.decide(
        pr.PromotionInputs(
            spec=spec,
            current=current,
            previous=_previous(view["status"]),
            now=datetime.now(UTC),
            eval_runs=runs,
            missing_eval_sets=missing,
            review_verdict=decision.verdict if decision is not None else None,
            review_name=review_name,
            force=force_of(view.get("annotations") or {}),
        )
    )
    if plan.start_eval_sets and current is not None and plan.status.active is not None:
        await _start_eval_runs(ctl, owner, spec, current, plan)
    if plan.open_review and plan.status.active is not None:
        await _open_review(ctl, owner, version, plan.status.active.version, review_name)
    return Promotion({"promotion": plan.status_field()}, (plan.verdict,))


async def _ensure_render(
    ctl: Controller, owner: ObjectRef, render: Mapping[str, Any]
) -> str | None:
    """Write the Topology version's render unless it is there; why not, when a ConfigMap
    bearing its name is not it (the same adoption rule as every render)."""
    if await ctl.ensure_config_map(render):
        return None
    key: Key = (owner.kind, owner.namespace, owner.name)
    return await ctl.foreign_render(render, key)


async def _start_eval_runs(
    ctl: Controller,
    owner: ObjectRef,
    spec: PromotionSpec,
    current: pr.Version,
    plan: pr.PromotionPlan,
) -> None:
    assert plan.status.active is not None
    for eval_set in plan.start_eval_sets:
        manifest = pr.eval_run_manifest(
            owner, eval_set, current.version, plan.status.active.version, spec.gate
        )
        created = await k8s.create_custom_if_absent("evalruns", owner.namespace, manifest)
        if created is not None:
            log.info(
                "%s %s/%s: started EvalRun %s of candidate %s",
                owner.kind,
                owner.namespace,
                owner.name,
                manifest["metadata"]["name"],
                current.version,
            )


async def _open_review(
    ctl: Controller, owner: ObjectRef, candidate: str, active: str, name: str
) -> None:
    """Queue the Review with the EvalRuns' comparison; the Reviews owner opens it."""
    label = pr.promotion_label(owner.kind, owner.name)
    runs = [
        r
        for r in ctl.lookup_all(EVAL_RUNS_INDEX, (owner.namespace, label))
        if r.get("version") == candidate
    ]
    manifest = pr.build_promotion_review(owner, name, candidate, active, pr.comparison_text(runs))
    if isinstance(ctl.services.reviews, ReviewsController):
        await ctl.services.reviews.open(manifest, wait=False)


def agent_version(status: Mapping[str, Any], ready: bool) -> pr.Version | None:
    """An Agent's current version as a promotion sees it: its render and its skills'."""
    version, cm = status.get("version"), status.get("renderedConfigMap")
    if not ready or not version or not cm:
        return None
    skills = tuple(str(s.get("renderedConfigMap")) for s in status.get("resolvedSkills") or () if s)
    return pr.Version(str(version), str(cm), tuple(sorted(s for s in skills if s)))


def force_asked(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` asks to force its candidate (an annotation edit: no new generation,
    so its own event must queue its reconcile) and it is not active yet."""
    force = force_of((body.get("metadata") or {}).get("annotations") or {})
    if force is None:
        return False
    promotion = (body.get("status") or {}).get("promotion") or {}
    candidate = (promotion.get("candidate") or {}).get("version")
    active = (promotion.get("active") or {}).get("version")
    return candidate == force.version and active != force.version
