"""A parked Run: its checkpoint, its Review, and resuming it with the decision.

When the runner of stage n ends with outcome AwaitingReview (:func:`parked`):

1. the checkpoint line is read from the pod's log, checked against the sha256 the runner
   put in its result and stored as the immutable ConfigMap ``...-ckpt-<n>``;
2. the Review is created (owned by the Run; its deadline = when the run parked + the
   item's timeout) and the Run's status says AwaitingReview, naming it;
3. the pod's outcome finalizer is released (nothing in it is needed any more).

While it waits (:func:`waiting`, also after an operator restart or with the parked pod
and Job gone), each reconcile looks at the Review (kicked by its watch events): a decision
→ :func:`resume`; the deadline passed → the Review is marked ``Expired`` (from then on the
admission policy refuses decisions) and the run resumes with verdict ``timeout``;
otherwise the reconcile asks to be run again at the deadline.

:func:`resume` checks the checkpoint and the bundle against the digests in the Run's
status, creates stage n+1's Job (the bundle, the checkpoint and the decision mounted; the
decision is read from the Review, never from a ConfigMap), records the decision (who,
when) in the Run's ``status.decisions`` and asks the Reviews controller
(:mod:`swarmkit_operator.reviews`, the one writer of a Review's status) to record it in
the Review's status. Every step is idempotent
by name, so a crash anywhere is repaired by the next reconcile. A run cancelled while it
waits closes its Review (:func:`close`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from swarmkit_api.bundle import ReviewItem
from swarmkit_api.conditions import REASON_FAILED, REASON_PINNED_REVISION_MISSING, REASON_RESUMED
from swarmkit_api.review import CHECKPOINT_FILE, Checkpoint, ResumeDecision
from swarmkit_api.run import RunSpec

from .. import k8s
from ..builders import job as jobs
from ..builders import review as rv
from ..builders import run_status as rs
from ..builders import trust
from ..reviews import Transition
from . import cleanup, funnel_gate, status
from .model import RunView, run_ref
from .start import create_job
from .state import RunState

log = logging.getLogger("swarmkit_operator.runs")
REVIEWS = "reviews"


def stage_of(run: RunView) -> int:
    return int(run.status.get("resumes") or 0)


def _review_entry(st: RunState, run: RunView, stage: int) -> dict[str, Any] | None:
    name = rv.review_name(run.name, run.uid, stage)
    return next(
        (r for r in st.reviews_of(run.uid) if r.get("metadata", {}).get("name") == name), None
    )


async def parked(
    st: RunState,
    run: RunView,
    spec: RunSpec,
    verdict: rs.Verdict,
    pods: list[dict[str, Any]],
) -> float | None:
    """Stage n's runner parked: checkpoint, Review, status (see the module docstring)."""
    stage = stage_of(run)
    ref = run_ref(run, spec)
    cm_name = rv.checkpoint_config_map_name(run.name, run.uid, stage)
    review = _review_entry(st, run, stage) or await k8s.get_custom(
        REVIEWS, run.namespace, rv.review_name(run.name, run.uid, stage)
    )
    if review is not None:
        await st.reviews.adopt(review)  # the operator's own, or TamperedObject
    else:
        encoded = await _store_checkpoint(st, run, ref, stage, verdict)
        if encoded is None:
            return None  # failed, status written
        try:
            item = ReviewItem.model_validate(Checkpoint.decode(encoded).item)
        except (ValueError, ValidationError) as exc:
            await status.write(
                st, run, rs.final(REASON_FAILED, f"invalid checkpoint {cm_name}: {exc}")
            )
            return None
        parked_at = rs.parse_time(verdict.completion_time) or datetime.now(UTC)
        manifest = rv.build_review(ref, item, stage, parked_at)
        if item.kind == funnel_gate.FUNNEL_APPROVAL:
            gate = await _funnel_gate(st, run, item)
            if isinstance(gate, str):
                await status.write(st, run, rs.final(REASON_FAILED, gate))
                return None
            manifest["spec"]["request"]["gate"] = gate
        review = await st.reviews.open(manifest)
        if review is None:
            raise RuntimeError(f"Review {manifest['metadata']['name']} vanished")
        st.mark(run.uid, "review_created")
    # The Review shows Pending before the Run says AwaitingReview: whoever sees the Run
    # parked and lists the Reviews finds it waiting on people, never a blank state.
    review = await _mark_pending(st, run.namespace, review)
    items = [_item_of(review)]
    fields: dict[str, Any] = {"checkpointConfigMap": cm_name, "reviewItems": items}
    reported = verdict.result.checkpoint_sha256 if verdict.result is not None else None
    if reported:  # what the resume checks the checkpoint against (check_checkpoint)
        fields["checkpointSha256"] = reported
    gates = funnel_gate.gates_after(run.status.get("gates") or [], review, None)
    if gates is not None:
        fields["gates"] = gates
    await status.write(st, run, verdict, fields)
    await cleanup.release_pods(st, pods)
    return await waiting(st, run, spec, review)


async def _mark_pending(st: RunState, namespace: str, review: dict[str, Any]) -> dict[str, Any]:
    """``review`` with ``status.state: Pending`` written (a no-op once it says so)."""
    if ((review.get("status") or {}).get("state")) == "Pending":
        return review
    name = review["metadata"]["name"]
    written = await st.reviews.transition(namespace, name, Transition("Pending"))
    return written or review


async def _store_checkpoint(
    st: RunState, run: RunView, ref: jobs.RunRef, stage: int, verdict: rs.Verdict
) -> str | None:
    """The checkpoint of stage ``stage``: from its ConfigMap, else from the pod's log.

    An existing ConfigMap is used only when it holds what the runner reported (the sha256
    in its result): anyone who may edit the namespace can create one by that name, and the
    reviewer would be shown its question (TamperedObject)."""
    cm_name = rv.checkpoint_config_map_name(run.name, run.uid, stage)
    sha = verdict.result.checkpoint_sha256 if verdict.result is not None else None
    existing = await k8s.read_config_map(run.namespace, cm_name)
    if existing is not None:
        stored = str((existing.get("data") or {}).get(CHECKPOINT_FILE) or "")
        recorded = sha or str(run.status.get("checkpointSha256") or "")
        found = trust.text_digest(stored)
        if found != recorded:
            raise trust.tampered("the run's checkpoint", cm_name, recorded or "none", found)
        return stored
    text = None
    if sha and verdict.pod_name:
        text = await k8s.read_pod_log(run.namespace, verdict.pod_name, jobs.CONTAINER_NAME)
    encoded = rv.checkpoint_from_log(text or "", sha or "")
    if encoded is None:
        why = (
            "its result carries no checkpoint"
            if not sha
            else f"its checkpoint line (sha256 {sha[:12]}) is not in pod {verdict.pod_name}'s log"
        )
        await status.write(
            st, run, rs.final(REASON_FAILED, f"the run parked for review but cannot resume: {why}")
        )
        return None
    if len(encoded) > rv.MAX_CHECKPOINT_BYTES:
        message = (
            f"the run parked for review but cannot resume: its checkpoint is {len(encoded)} "
            f"bytes, over the {rv.MAX_CHECKPOINT_BYTES} a ConfigMap holds"
        )
        await status.write(st, run, rs.final(REASON_FAILED, message))
        return None
    await k8s.create_config_map(rv.build_checkpoint_config_map(ref, stage, encoded))
    st.mark(run.uid, "checkpoint_stored")
    return encoded


async def _funnel_gate(st: RunState, run: RunView, item: ReviewItem) -> dict[str, Any] | str:
    """The Review's ``request.gate``: the pinned approve layer and the Run's author
    (:mod:`.funnel_gate`), or why the gate cannot open (the run fails: never silently)."""
    cm_name = str(
        run.status.get("bundleConfigMap") or jobs.bundle_config_map_name(run.name, run.uid)
    )
    rendered = await st.resolver.existing_bundle(
        run.namespace, cm_name, run.status.get("bundleSha256")
    )
    obj = await k8s.get_custom("runs", run.namespace, run.name)
    if obj is None:
        return "the funnel approval cannot open: the Run is gone"
    # A revision was the run's last funnel decision: this is the gate's next round, and
    # the earlier rounds' signatures come from their Reviews (onRevision, quorum.py).
    revised = funnel_gate.revised_review(list(run.status.get("decisions") or ()))
    previous = await k8s.get_custom(REVIEWS, run.namespace, revised) if revised else None
    rounds = funnel_gate.rounds_before(previous, item)
    author = funnel_gate.author_of(obj)
    return funnel_gate.gate_request(item, rendered.bundle, author, rounds, run.namespace)


def _item_of(review: dict[str, Any]) -> dict[str, Any]:
    """The Run's ``status.reviewItems`` entry for ``review``."""
    request = (review.get("spec") or {}).get("request") or {}
    item = {
        "kind": request.get("kind"),
        "question": request.get("question") or "",
        "skill": (request.get("skillRef") or {}).get("name"),
        "agent": request.get("agent"),
        "tool": request.get("tool"),
        "taskId": request.get("taskId"),
        "review": (review.get("metadata") or {}).get("name"),
    }
    return {k: v for k, v in item.items() if v is not None}


async def waiting(
    st: RunState, run: RunView, spec: RunSpec, review: dict[str, Any] | None = None
) -> float | None:
    """The run waits on its Review: resume on a decision or at the deadline."""
    stage = stage_of(run)
    review = review or _review_entry(st, run, stage)
    if review is None:
        review = await k8s.get_custom(
            REVIEWS, run.namespace, rv.review_name(run.name, run.uid, stage)
        )
        if review is None:
            message = f"its Review {rv.review_name(run.name, run.uid, stage)} was deleted"
            await status.write(
                st, run, rs.final(REASON_FAILED, f"the run cannot resume: {message}")
            )
            return None
    await st.reviews.adopt(review)
    found = rv.decision_of(review)
    now = datetime.now(UTC)
    if found is None:
        deadline = rv.deadline_of(review)
        if deadline is not None and now >= deadline:
            name = review["metadata"]["name"]
            expired = await st.reviews.transition(run.namespace, name, Transition("Expired"))
            # A decision admitted before the Review was marked Expired still counts.
            found = rv.decision_of(expired or {}) or rv.timeout_decision(review, now)
        else:
            await _mark_pending(st, run.namespace, review)
            return max((deadline - now).total_seconds(), 0.5) if deadline else None
    return await resume(st, run, spec, stage, found, review)


async def resume(
    st: RunState,
    run: RunView,
    spec: RunSpec,
    stage: int,
    found: ResumeDecision,
    review: dict[str, Any],
) -> float | None:
    """Start stage ``stage``+1 with ``found`` and record who decided."""
    st.mark(run.uid, "decision_seen")
    nxt = stage + 1
    ref = run_ref(run, spec)
    await check_checkpoint(run, stage)
    cm_name = str(
        run.status.get("bundleConfigMap") or jobs.bundle_config_map_name(run.name, run.uid)
    )
    rendered = await st.resolver.existing_bundle(
        run.namespace, cm_name, run.status.get("bundleSha256")
    )
    recreation = int(run.status.get("jobRecreations") or 0)
    job = jobs.job_name(run.name, run.uid, recreation, nxt)
    name = review["metadata"]["name"]
    who = f"{found.verdict} by {found.decided_by}"
    verdict = rs.Verdict(
        phase="Pending",
        status="Unknown",
        reason=REASON_RESUMED,
        message=f"resumed after review {name} ({who}); waiting for Job {job}",
    )
    recorded = {
        "review": name,
        "kind": found.kind,
        "verdict": found.verdict,
        "decidedBy": found.decided_by,
        "decidedAt": found.decided_at or None,
        "resumedJob": job,
    }
    decisions = [d for d in run.status.get("decisions") or () if d.get("review") != name]
    decisions.append({k: v for k, v in recorded.items() if v is not None})
    state = "Expired" if found.verdict == "timeout" else "Resumed"
    taken_up = Transition(state, found.verdict, found.decided_by, found.decided_at, job)
    await st.reviews.transition(run.namespace, name, taken_up)
    fields: dict[str, Any] = {"resumes": nxt, "decisions": decisions, "reviewItems": []}
    gates = funnel_gate.gates_after(run.status.get("gates") or [], review, found.verdict)
    if gates is not None:
        fields["gates"] = gates
    again = await create_job(
        st, run, ref, rendered, cm_name, recreation, verdict, nxt, fields, decision=found
    )
    st.mark(run.uid, "resumed_job_created")
    log.info(
        "run %s/%s: resumed as %s after review %s (%s)", run.namespace, run.name, job, name, who
    )
    return again


async def check_checkpoint(run: RunView, stage: int) -> None:
    """The checkpoint stage ``stage`` parked with is still the runner's (its sha256 is in
    ``status.checkpointSha256``, recorded when it parked), before a resumed Job mounts it:
    else :class:`~swarmkit_operator.builders.trust.Refused`."""
    name = rv.checkpoint_config_map_name(run.name, run.uid, stage)
    cm = await k8s.read_config_map(run.namespace, name)
    if cm is None:
        raise trust.missing("the run's checkpoint", name)
    recorded = run.status.get("checkpointSha256")
    found = trust.text_digest(str((cm.get("data") or {}).get(CHECKPOINT_FILE) or ""))
    if recorded and found != recorded:  # none: parked before digests were recorded
        raise trust.tampered("the run's checkpoint", name, str(recorded), found)


async def decision_for(st: RunState, run: RunView, resume: int) -> ResumeDecision:
    """What resumed stage ``resume`` (≥ 1) goes on with, read again from its Review (a lost
    resumed Job is recreated with the same decision; the Review's spec was checked by the
    admission policy, its status is written only by the operator)."""
    name = rv.review_name(run.name, run.uid, resume - 1)
    review = await k8s.get_custom(REVIEWS, run.namespace, name)
    if review is None:
        raise trust.Refused(
            REASON_PINNED_REVISION_MISSING,
            f"the Review {name} the run resumed after is gone: its Job cannot be recreated",
        )
    await st.reviews.adopt(review)
    found = rv.decision_of(review)
    if found is not None:
        return found
    # Expired: the timeout decision, at the time the operator recorded.
    when = rs.parse_time((review.get("status") or {}).get("decidedAt")) or datetime.now(UTC)
    return rv.timeout_decision(review, when)


async def close(st: RunState, run: RunView) -> None:
    """The run ended while its Review waited (cancelled): the Review is ``Closed``, and the
    admission policy refuses decisions on it from then on."""
    name = rv.review_name(run.name, run.uid, stage_of(run))
    await st.reviews.transition(run.namespace, name, Transition("Closed"))


__all__ = ["close", "parked", "resume", "waiting"]
