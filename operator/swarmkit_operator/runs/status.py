"""Writing a verdict to a Run's ``status``: the one place the controller patches a Run
(:func:`write`; the fields no verdict carries, a stage's ``effects``: :func:`write_fields`).

A write is skipped when it would change nothing (so an unchanged Run costs no API call),
remembered as the Run's overlay (so the next reconcile does not act on the stale index
entry), announced by an Event when the ``Succeeded`` condition changes, and, when the run
is final, followed by the finish hooks: the bundle ConfigMap is labelled finished (which
releases its pins for garbage collection) and the ``on_finished`` callbacks (retention) run.

Every metric of a Run is counted here, once, after the write that records what it counts
went through: spend and tokens with the write that first records its result
(``completionTime``), the GenAI metrics with the first report of a Job's result, a funnel
gate's transition with the write that first shows it in ``status.gates``. A write that
fails (and is retried by the queue), a Job that could not be created, or a leader that
re-reads a Run after a restart counts nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .. import genai_metrics, k8s, metrics
from ..builders import RUN_FINISHED_LABEL
from ..builders import run_status as rs
from ..conditions import get_condition
from . import funnel_gate, spend
from .model import RunView
from .state import RunState

log = logging.getLogger("swarmkit_operator.runs")

#: Bound on the set of labelled bundles; cleared when exceeded (a repeat label is harmless).
LABELLED_LIMIT = 100_000


async def write(
    st: RunState,
    run: RunView,
    verdict: rs.Verdict,
    extra: Mapping[str, Any] | None = None,
    event: bool = True,
) -> None:
    """Patch ``run``'s status to ``verdict`` (plus ``extra`` fields); ``run`` is updated."""
    before = run.status
    patch = rs.status_patch(before, verdict, run.generation)
    patch.update(extra or {})
    if verdict.final and before.get("spendReservations"):
        # Its reservations become what it spent, before the Run says it ended.
        await spend.settle(run, verdict.result)
        patch["spendReservations"] = None
    if all(before.get(k) == v for k, v in patch.items()):
        return
    first_report = genai_metrics.first_report(before, verdict)
    merged = await _patch(st, run, patch)
    if merged is None:
        return  # the Run is gone
    # Counted once the write that records them went through (see the module docstring).
    if verdict.final and verdict.result is not None and not before.get("completionTime"):
        metrics.record_spend(run.namespace, verdict.result.usage)
    if first_report and verdict.result is not None:
        genai_metrics.record(verdict.result)
    await count_gates(st, run, before.get("gates") or [], merged.get("gates") or [])
    old = get_condition(before.get("conditions"), rs.SUCCEEDED)
    if event and (
        old is None or (old.get("status"), old.get("reason")) != (verdict.status, verdict.reason)
    ):
        type_ = "Warning" if verdict.status == "False" else "Normal"
        # In the background: an Event is informative, the reconcile does not wait for it.
        st.spawn(k8s.post_event(run.involved, type_, verdict.reason, verdict.message))
    if verdict.final:
        st.mark(run.uid, "condition_final")
        st.trace(run.uid)
        # Tracing hook: the operator's spans of a traced Run (a no-op unless both are on).
        st.spans.export(run, verdict.reason, verdict.status, st.milestones.get(run.uid, {}))
        cm = run.status.get("bundleConfigMap")
        if cm:
            st.spawn(label_finished(st, run.namespace, str(cm)))
        topology = (run.spec.get("topologyRef") or {}).get("name")
        for callback in st.on_finished:
            callback(run.namespace, topology)
        st.forget(run.uid)  # its milestones were traced and exported above


async def write_fields(st: RunState, run: RunView, fields: Mapping[str, Any]) -> None:
    """Patch status ``fields`` no verdict carries (a stage's ``status.effects``, written
    before the verdict that ends or parks the stage); skipped when they would change
    nothing, remembered like every write; ``run`` is updated."""
    if all(run.status.get(k) == v for k, v in fields.items()):
        return
    await _patch(st, run, dict(fields))


async def _patch(st: RunState, run: RunView, patch: dict[str, Any]) -> dict[str, Any] | None:
    """The one PATCH of a Run's status: the merged status once it went through (remembered
    as the Run's overlay, ``run`` updated), or None when the Run is gone."""
    rv = await k8s.patch_status("runs", run.namespace, run.name, patch, k8s.RUNS_MANAGER)
    if rv is None:
        return None
    merged = {**run.status, **patch}
    st.changed.add(run.uid)
    st.overlay[run.uid] = {"resourceVersion": rv, "status": merged}
    run.status = merged
    return merged


async def label_finished(st: RunState, namespace: str, config_map: str) -> None:
    """Label a finished Run's bundle ConfigMap finished (its pins are released), once: the
    bundles index may show it unlabelled for a moment after this write, and the reconciles
    of the finished Run in that moment must not PATCH it again."""
    key = (namespace, config_map)
    if key in st.labelled:
        return
    st.labelled.add(key)
    if len(st.labelled) > LABELLED_LIMIT:
        st.labelled.clear()
        st.labelled.add(key)
    try:
        await k8s.label_config_map(namespace, config_map, {RUN_FINISHED_LABEL: "true"})
    except BaseException:
        st.labelled.discard(key)  # not done: a later reconcile (ensure_finished_label) retries
        raise


async def count_gates(
    st: RunState, run: RunView, before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> None:
    """Count the funnel gate transitions a write made (entries of ``status.gates`` whose
    state it shows first), with each gate's report from its Review (the index's copy, else
    one GET: a Review created moments ago may not be indexed yet)."""
    new = funnel_gate.new_transitions(before, after)
    if not new:
        return
    indexed = {str((r.get("metadata") or {}).get("name")): r for r in st.reviews_of(run.uid)}
    for name, state in new:
        review = indexed.get(name)
        if review is None:
            try:
                review = await k8s.get_custom("reviews", run.namespace, name)
            except k8s.ApiError as exc:  # the write stands; this one count is lost
                log.warning("run %s: funnel gate %s not counted: %s", run.uid, name, exc)
                continue
        if review is not None:
            funnel_gate.count_transition(review, state)
