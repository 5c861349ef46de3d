"""Promotion gated on evaluation: what a Topology's or Agent's reconcile adds for
``spec.promotion`` (``status.promotion`` and the ``Promoted`` condition).

The decision is pure (:func:`swarmkit_operator.builders.promotion.decide`); this module
gathers its inputs from the indexes (the candidate's EvalRuns, the EvalSets, its Review, a
forced promotion's annotations), writes what the decision asks for (the Topology version's
render, the EvalRuns of the candidate, the Review of an inconclusive one, opened through the
Reviews owner) and returns the status fields and verdict the kind's reconcile writes with
its own. The version a Run, a served Topology or a gateway runs is picked from that status
by the one Resolver (:mod:`swarmkit_operator.workload.resolve`).

The EvalRuns it creates are recorded in ``status.promotion.createdUids`` (the one ledger
holds each uid until then) and only those are counted
(:func:`~swarmkit_operator.builders.promotion.counted_eval_runs`). A candidate waiting for
a calibrated judge is evaluated again when its EvalSet's calibration changes: the EvalSet's
events queue this reconcile (:mod:`swarmkit_operator.handlers.promotion`), which reads the
EvalSet's version and Funnel agreement from its view.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from swarmkit_api.conditions import PROMOTED, REASON_EVALUATING, REASON_TAMPERED_OBJECT
from swarmkit_api.promotion import (
    FORCE_PROMOTE_ANNOTATION,
    FORCE_PROMOTED_BY_ANNOTATION,
    PromotedVersion,
    PromotionSpec,
    PromotionStatus,
)
from swarmkit_api.review import decision_of

from . import k8s
from .builders import ObjectRef, Verdict
from .builders import promotion as pr
from .builders.trust import made_key
from .builders.workload import Target
from .indexes import IndexId
from .reconcile.controller import Controller
from .reconcile.views import Key
from .reviews import ReviewsController
from .workload.ledger import Ledger
from .workload.resolve import ledger_of

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
    names = tuple(e.name for e in spec.eval_sets)
    target, ledger = pr.promotion_target(owner), ledger_of(ctl.services.resolver)
    previous = _previous(view["status"])
    recorded = dict(previous.created_uids) if previous is not None else {}
    entries = list(ctl.lookup_all(EVAL_RUNS_INDEX, (ns, label)))
    sets = {n: ctl.lookup(EVAL_SETS_INDEX, (ns, n)) for n in names}
    missing = tuple(n for n in names if sets[n] is None)
    calibration = {n: c for n, v in sets.items() if v and (c := pr.calibration_input(v))}
    review_name = pr.review_name(owner.kind, name, version)
    decision = _decision(ctl, ns, label, review_name)

    def decide() -> tuple[pr.Counted, pr.PromotionPlan]:
        made = ledger.proof(target, recorded)
        counted = pr.counted_eval_runs(owner, version, names, entries, made, calibration)
        return counted, pr.decide(
            pr.PromotionInputs(
                spec=spec,
                current=current,
                previous=previous,
                now=datetime.now(UTC),
                eval_runs=counted.runs,
                missing_eval_sets=missing,
                review_verdict=decision,
                review_name=review_name,
                force=force_of(view.get("annotations") or {}),
                tampered=counted.tampered,
            )
        )

    counted, plan = decide()
    starts = {e: pr.eval_run_name(owner.kind, name, version, e) for e in plan.start_eval_sets}
    if plan.verdict.reason == REASON_EVALUATING:  # re-evaluations: not while one failed
        starts.update(counted.restart)
    if starts and current is not None and plan.status.active is not None:
        found = await _start_eval_runs(ctl, owner, spec, current, plan.status.active, starts)
        if found:  # a planned name already taken: checked like every other one
            entries += found
            counted, plan = decide()
    if plan.open_review and plan.status.active is not None:
        counted_names = {r.name for r in counted.runs.values()}
        runs = [e for e in entries if e.get("name") in counted_names]
        await _open_review(ctl, owner, version, plan.status.active.version, review_name, runs)
    # The candidate's EvalRuns are kept even before the index shows them.
    candidate = plan.status.candidate.version if plan.status.candidate else version
    kept = {str(e.get("name")) for e in entries}
    versions = {version, candidate} - {""}
    kept |= {pr.eval_run_name(owner.kind, name, v, e) for v in versions for e in names}
    uids = _record(ledger, target, recorded, counted.own, kept)
    status = {k: v for k, v in plan.status_field().items() if k != "createdUids"}
    fields = {**status, "createdUids": uids} if uids else status
    return Promotion({"promotion": fields}, (plan.verdict,))


def _decision(ctl: Controller, ns: str, label: str, review_name: str) -> str | None:
    """The verdict of the candidate's Review (``approve`` / ``reject``), once decided."""
    for review in ctl.lookup_all(REVIEWS_INDEX, (ns, label)):
        if (review.get("metadata") or {}).get("name") == review_name:
            decision = decision_of(review)
            return decision.verdict if decision is not None else None
    return None


def _record(
    ledger: Ledger,
    target: Target,
    recorded: Mapping[str, str],
    own: tuple[tuple[str, str], ...],
    kept: set[str],
) -> dict[str, str]:
    """``status.promotion.createdUids`` as this write must record it: the EvalRuns the
    operator created for the object's candidates (the ledger holds those not recorded yet),
    those of the current candidate and every other one while it exists (``kept``: a
    candidate the spec goes back to keeps its evaluation; one the index does not show yet
    is the current candidate's), so the record is as bounded as the EvalRuns kept."""
    for run, uid in own:
        if recorded.get(made_key("EvalRun", run)) != uid:
            ledger.remember(target, "EvalRun", run, uid)  # a predecessor's, recorded now
    merged = ledger.recorded(target, recorded)
    names = {made_key("EvalRun", n) for n in kept}
    return {k: v for k, v in merged.items() if k in names or recorded.get(k) != v}


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
    active: PromotedVersion,
    starts: Mapping[str, str],
) -> list[dict[str, Any]]:
    """Create the candidate's missing EvalRuns (``starts``: EvalSet → planned name), each
    one's uid remembered until the status records it. A planned name already taken is never
    taken as created: what is found there (not in the index: unlabelled, or not seen yet)
    is returned, to be checked."""
    ledger, target = ledger_of(ctl.services.resolver), pr.promotion_target(owner)
    found: list[dict[str, Any]] = []
    for eval_set, name in starts.items():
        manifest = pr.eval_run_manifest(
            owner, eval_set, current.version, active.version, spec.gate, name
        )
        created = await k8s.create_custom_if_absent("evalruns", owner.namespace, manifest)
        if created is None:
            there = await k8s.get_custom("evalruns", owner.namespace, name)
            if there is not None:
                found.append(pr.eval_run_outcome(there))
            continue
        ledger.remember(target, "EvalRun", name, str(created["metadata"].get("uid") or ""))
        log.info(
            "%s %s/%s: started EvalRun %s of candidate %s",
            owner.kind,
            owner.namespace,
            owner.name,
            name,
            current.version,
        )
    return found


async def _open_review(
    ctl: Controller,
    owner: ObjectRef,
    candidate: str,
    active: str,
    name: str,
    runs: list[dict[str, Any]],
) -> None:
    """Queue the Review with the comparison of the EvalRuns counted (``runs``: the ones the
    operator created); the Reviews owner opens it."""
    manifest = pr.build_promotion_review(owner, name, candidate, active, pr.comparison_text(runs))
    if isinstance(ctl.services.reviews, ReviewsController):
        await ctl.services.reviews.open(manifest, wait=False)


def agent_version(status: Mapping[str, Any], ready: bool) -> pr.Version | None:
    """An Agent's current version as a promotion sees it: its render (with the content
    digest recorded with it) and its skills'."""
    version, cm = status.get("version"), status.get("renderedConfigMap")
    if not ready or not version or not cm:
        return None
    skills = tuple(str(s.get("renderedConfigMap")) for s in status.get("resolvedSkills") or () if s)
    digest = status.get("renderedSha256")
    pins = tuple(sorted(s for s in skills if s))
    return pr.Version(str(version), str(cm), pins, str(digest) if digest else None)


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
