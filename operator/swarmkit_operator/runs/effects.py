"""Materializing a Run's effects (schedule, agent_message, mailbox_send) once.

When a stage of a Run ends or parks, its result may carry ``outboxSha256``: the runner
printed that stage's effects on one stdout line (:mod:`swarmkit_api.effects`). Before the
verdict is written (while the pod's outcome finalizer still keeps its log), :func:`settle`
reads the line, checks it against the sha256, creates each effect's object
(:mod:`..builders.effects`; a 409 means an earlier attempt created it: done, no second
Event) and merges the outcome into ``status.effects`` (through :func:`.status.write_fields`,
as every Run status write). A crash anywhere before the verdict is written repeats the
whole step on the next reconcile, and the names make it exactly once. An Event on the Run
announces each object created (a Warning for one that cannot be).

:func:`hold` keeps a Run whose ``spec.startAfter`` lies ahead (a scheduled one) from
starting: ``Succeeded=Unknown`` reason ``Scheduled`` until then, recomputed from the spec on
every reconcile, so an operator restart in between changes nothing.

A Run cancelled while it runs never reports its last stage's effects (its pod is stopped
before it writes a result): only stages that ended or parked are materialized.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from swarmkit_api.conditions import REASON_SCHEDULED
from swarmkit_api.effects import Effect, RunEffect, object_name, outbox_from_log
from swarmkit_api.run import RunSpec

from .. import k8s
from ..builders import effects as fx
from ..builders import job as jobs
from ..builders import run_status as rs
from ..indexes import one
from . import spend_approval, status
from .model import RunView
from .state import RunState

log = logging.getLogger("swarmkit_operator.runs")

#: Statuses that will not change on a retry (invalid object, not allowed, namespace gone).
_FOR_GOOD = frozenset({400, 403, 404, 422})


async def settle(st: RunState, run: RunView, verdict: rs.Verdict) -> None:
    """Materialize the effects of the stage ``verdict`` reports (see the module docstring)."""
    sha = verdict.result.outbox_sha256 if verdict.result is not None else None
    if not sha:
        return
    effects = outbox_from_log(await stage_log(run, verdict), sha)
    if effects is None:
        message = (
            f"the runner reported effects (outbox sha256 {sha[:12]}) but their line is not "
            f"in pod {verdict.pod_name}'s log; they are not materialized"
        )
        log.warning("run %s/%s: %s", run.namespace, run.name, message)
        await _warn(run, message)
        return
    settled: list[RunEffect] = []
    for effect in effects:  # in order: an approve_spend may name a Run created just before
        settled.append(await _materialize(st, run, effect, settled))
    entries = fx.status_entries(run.status.get("effects") or (), settled)
    await status.write_fields(st, run, {"effects": entries})


async def stage_log(run: RunView, verdict: rs.Verdict) -> str:
    """The log of the pod whose stage ``verdict`` reports ("" when it has none): where the
    runner printed what its result is too small for (the outbox, the recording)."""
    if not verdict.pod_name:
        return ""
    text = await k8s.read_pod_log(run.namespace, verdict.pod_name, jobs.CONTAINER_NAME)
    return text or ""


async def _materialize(
    st: RunState, run: RunView, effect: Effect, earlier: list[RunEffect]
) -> RunEffect:
    base = RunEffect(
        seq=effect.seq,
        kind=effect.kind,
        agent=effect.agent,
        to=effect.to,
        start_after=effect.start_after,
    )
    if effect.kind == "approve_spend":  # creates nothing: checked and recorded
        return await spend_approval.materialize(st, run, effect, base, earlier)
    correlation = str(run.spec.get("correlationId") or run.uid)
    name = object_name(run.name, run.uid, effect.seq)
    if effect.kind == "schedule":
        topo = one(st.idx.topologies, (run.namespace, effect.to))
        if topo is None or not topo.get("uid"):
            return await _failed(run, base, f"Topology {effect.to} not found")
        manifest = fx.scheduled_run(
            run.name, run.namespace, run.uid, correlation, effect, str(topo["uid"])
        )
        plural, kind = "runs", "Run"
    elif effect.kind == "agent_message":
        manifest = fx.message_run(run.name, run.namespace, run.uid, correlation, effect)
        plural, kind = "runs", "Run"
    else:
        manifest = fx.mailbox_message(
            run.name, run.namespace, run.uid, correlation, effect, _has_webhook(st, run, effect)
        )
        plural, kind = "mailboxmessages", "MailboxMessage"
    try:
        created = await k8s.create_custom_if_absent(plural, run.namespace, manifest)
    except k8s.ApiError as exc:
        if isinstance(exc, k8s.NotLeader) or exc.status not in _FOR_GOOD:
            raise  # not leading, or transient: the reconcile is retried
        return await _failed(run, base, f"cannot create {kind} {name}: {exc}")
    done = base.model_copy(update={"state": "Materialized", "object": f"{kind}/{name}"})
    if created is not None:  # None: an earlier attempt created it (and announced it)
        log.info("run %s/%s: effect %d → %s/%s", run.namespace, run.name, effect.seq, kind, name)
        await _announce(run, effect, kind, name)
    return done


def _has_webhook(st: RunState, run: RunView, effect: Effect) -> bool:
    """Whether the Workspace routes the effect's mailbox to a webhook (:mod:`.delivery`)."""
    ws = one(st.idx.workspaces, (run.namespace, effect.workspace))
    for mailbox in ((ws or {}).get("spec") or {}).get("mailboxes") or ():
        if mailbox.get("name") == effect.to:
            return bool(mailbox.get("webhook"))
    return False


async def _announce(run: RunView, effect: Effect, kind: str, name: str) -> None:
    """The Event for a created object (literal reasons: the generated reference lists them)."""
    what = f"effect {effect.seq} ({effect.kind} by {effect.agent}): {kind} {name}"
    if effect.kind == "schedule":
        when = effect.start_after.isoformat() if effect.start_after else "now"
        text = f"{what} of Topology {effect.to} starts after {when}"
        await k8s.post_event(run.involved, "Normal", "RunScheduled", text)
    elif effect.kind == "agent_message":
        await k8s.post_event(run.involved, "Normal", "AgentMessaged", f"{what} runs {effect.to}")
    else:
        text = f"{what} in mailbox {effect.to}"
        await k8s.post_event(run.involved, "Normal", "MailboxPosted", text)


async def _warn(run: RunView, message: str) -> None:
    await k8s.post_event(run.involved, "Warning", "EffectFailed", message)


async def _failed(run: RunView, base: RunEffect, message: str) -> RunEffect:
    await _warn(run, f"effect {base.seq} ({base.kind}): {message}")
    return base.model_copy(update={"state": "Failed", "message": message})


#: Longest wait before a scheduled Run is looked at again without an event (a restarted
#: operator recomputes it from spec.startAfter anyway).
MAX_HOLD_SECONDS = 3600.0


async def hold(st: RunState, run: RunView, spec: RunSpec) -> float | None:
    """A Run whose ``spec.startAfter`` is ahead waits (``Succeeded=Unknown`` reason
    ``Scheduled``): returns when to look again, or None when it may start now."""
    if spec.start_after is None:
        return None
    when = spec.start_after if spec.start_after.tzinfo else spec.start_after.replace(tzinfo=UTC)
    left = (when - datetime.now(UTC)).total_seconds()
    if left <= 0:
        return None
    verdict = rs.Verdict(
        phase="Pending",
        status="Unknown",
        reason=REASON_SCHEDULED,
        message=f"scheduled: starts after {rs.rfc3339(when)}",
    )
    await status.write(st, run, verdict)
    return min(left, MAX_HOLD_SECONDS)


__all__ = ["hold", "settle"]
