"""One reconcile of one Run: decide from the Run, its Job and its pods what to do next.

1. the Run is gone or being deleted → only cleanup (:func:`.cleanup.run_gone`);
2. the Run is finished (``Succeeded`` True/False) → only cleanup: the pods' outcome
   finalizers are released (and a missing finished label repaired);
3. ``spec.cancelled`` → the Job is deleted (its process killed), ``Cancelled``;
   parked for a review (AwaitingReview, checkpoint stored) →
   :func:`.review.waiting`;
4. nothing created yet → :func:`.start.start` (not before ``spec.startAfter``:
   :func:`.effects.hold`); a current Job proven the operator's whose start record is
   missing (its creator lost that write) → :func:`.start.record_found` first;
5. otherwise → the verdict is derived from the Job and its pods only
   (:func:`swarmkit_operator.builders.run_status.derive`) and written to ``status``; a
   runner that parked → :func:`.review.parked`; a stage that ended or parked has its
   effects materialized first (:func:`.effects.settle`); a Job that vanished is recreated
   (:func:`.start.recreate`), after an authoritative GET so an index lagging behind never
   causes a duplicate.

:func:`reconcile` returns when to look again without an event (seconds), or None.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from pydantic import ValidationError

from swarmkit_api.conditions import REASON_CANCELLED, REASON_PENDING, REASON_VALIDATION_FAILED
from swarmkit_api.run import RunSpec

from .. import k8s
from ..builders import job as jobs
from ..builders import run_pod, trust
from ..builders import run_status as rs
from . import cleanup, effects, recording, review, start, status
from .model import (
    HINT_SECONDS,
    NO_POD_EVENTS_AFTER,
    RunView,
    age,
    pod_job,
    run_ref,
    timeout_of,
)
from .state import RunState
from .summaries import job_summary


async def reconcile(st: RunState, uid: str) -> float | None:
    """Reconcile Run ``uid`` once; see the module docstring. An object the run depends on
    that is not the one the operator wrote, or is gone (:class:`.trust.Refused`), ends the
    run at once with that reason (and an Event): it is never used, and never waited for."""
    try:
        return await _reconcile(st, uid)
    except trust.Refused as refused:
        run = st.run_view(uid)
        if run is None:
            return None
        await status.write(st, run, rs.final(refused.reason, refused.message))
        await cleanup.release_pods(st, st.pods_of(uid))
        return None


async def _reconcile(st: RunState, uid: str) -> float | None:
    run = st.run_view(uid)
    pods = st.pods_of(uid)
    if run is None or run.deleting:
        await cleanup.run_gone(st, uid, pods, deleted=run is None)
        return None
    run_status = run.status
    conditions = run_status.get("conditions")
    if rs.is_final(conditions):
        await cleanup.finished(st, run, pods)
        return None
    try:
        spec = RunSpec.model_validate(run.spec)
    except ValidationError as exc:
        verdict = rs.final(REASON_VALIDATION_FAILED, f"invalid Run spec: {exc.errors()[0]['msg']}")
        await status.write(st, run, verdict)
        return None

    recreation = int(run_status.get("jobRecreations") or 0)
    resumes = int(run_status.get("resumes") or 0)
    current = jobs.job_name(run.name, uid, recreation, resumes)
    all_jobs = st.jobs_of(uid)
    job = _current_job(st, uid, all_jobs, current)
    job_pods = _proven(st, run, spec, job, [p for p in pods if pod_job(p) == current], current)
    # Pods of Jobs this Run no longer uses (lost, replaced): nothing to record.
    await cleanup.release_pods(st, [p for p in pods if pod_job(p) != current])

    if spec.cancelled:
        return await cancel(st, run, all_jobs, job, job_pods, pods)
    if rs.is_parked(conditions) and run_status.get("checkpointConfigMap"):
        # Parked and recorded: its Job and pod may be gone; only the Review matters now.
        # (The pod's finalizer may still be on after a crash right after the status write.)
        await cleanup.release_pods(st, job_pods)
        return await review.waiting(st, run, spec)

    started = bool(run_status.get("jobName")) or job is not None or bool(job_pods)
    if not started and recreation == 0:
        wait = await effects.hold(st, run, spec)  # spec.startAfter still ahead
        if wait is not None:
            return wait
        return await start.start(st, run, spec)
    if job is not None and not run_status.get("jobName"):
        # Proven the operator's (_proven) but its start record was never written (its
        # creator lost the write): recorded from what the Job runs, before anything else.
        await start.record_found(st, run, spec, current)

    verdict = await _observed(st, run, job, job_pods)
    if verdict.phase == "Parked":
        await effects.settle(st, run, verdict)  # the stage's outbox, before the pod goes
        await recording.settle(st, run, verdict)  # and its recording
        return await review.parked(st, run, spec, verdict, job_pods)
    if verdict.phase == "Lost":
        lost = await _lost(st, run, spec, recreation, current, job_pods, timeout_of(job))
        if not isinstance(lost, rs.Verdict):
            return lost
        verdict = lost
    record = start.unrecorded(st, run)  # a Job proven but not recorded yet: write it now
    if verdict.quiet and not record:
        return verdict.recheck_after
    if verdict.stop_job and job is not None:
        await k8s.delete_job(run.namespace, current)
    if verdict.final:
        await effects.settle(st, run, verdict)  # the last stage's outbox
        await recording.settle(st, run, verdict)  # and its recording
    await status.write(st, run, verdict, record)
    if verdict.final:
        await cleanup.release_pods(st, pods)
        return None
    if verdict.recheck_after is not None:
        return verdict.recheck_after
    if verdict.phase == "Pending" and not job_pods:
        return NO_POD_EVENTS_AFTER + 0.5
    return None


async def _observed(
    st: RunState, run: RunView, job: dict[str, Any] | None, job_pods: list[dict[str, Any]]
) -> rs.Verdict:
    """The verdict derived from the current Job and its pods (and, for a Job without a pod
    for a while, its Events), or the pod's mount problem."""
    events: list[dict[str, Any]] = []
    if job is not None and not job_pods and job.get("uid"):
        # A Job without a pod for a while: its Events say why (quota, admission, ...).
        job_age = age(job)
        if job_age is not None and job_age >= NO_POD_EVENTS_AFTER:
            events = await k8s.object_events(run.namespace, str(job["uid"]))
    verdict = rs.derive(
        job=job,
        pods=job_pods,
        events=events,
        timeout_seconds=timeout_of(job),
        pod_start_grace_seconds=st.settings.pod_start_grace_seconds,
    )
    return await _mount_problem(run, job_pods, verdict)


def _current_job(
    st: RunState, uid: str, all_jobs: list[dict[str, Any]], current: str
) -> dict[str, Any] | None:
    """The Run's current Job from the index, or the one this process just created."""
    job = next(
        (j for j in all_jobs if j.get("name") == current and not j.get("deletionTimestamp")),
        None,
    )
    # A Job this process just created stands in for the index entry that has not arrived
    # yet, for a short while; it is never used to conclude that a Job is gone.
    hint = st.created_jobs.get(uid)
    if job is None and any(j.get("name") == current for j in all_jobs):
        hint = None  # the index has seen it: it is being deleted
    if hint is not None and (hint[1] != current or job is not None):
        st.created_jobs.pop(uid, None)
    elif job is None and hint is not None and time.monotonic() - hint[0] < HINT_SECONDS:
        job = hint[2]
    return job


def _proven(
    st: RunState,
    run: RunView,
    spec: RunSpec,
    job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    current: str,
) -> list[dict[str, Any]]:
    """``pods`` (under the current Job's name) that are the Run's: the current Job is the
    Run's only when the operator provably made it (its uid recorded, or made by this
    process: :func:`~swarmkit_operator.builders.trust.check_made`; else ``TamperedObject``,
    never its verdict), and a pod only when that Job is its controller."""
    made, key = start.proof(st, run), trust.made_key("Job", current)
    job_uid = trust.check_made("Job", job, jobs.target_of(run_ref(run, spec)), made)
    if job_uid and made.recorded.get(key) != job_uid:  # recorded with the next write
        start.remember(st, run, "Job", current, job_uid)
    job_uid = job_uid or made.recorded.get(key, "")
    return [p for p in pods if _made_by(p, job_uid)]


def _made_by(pod: dict[str, Any], job_uid: str) -> bool:
    """Whether ``pod``'s controller is the Run's Job ``job_uid`` (not known yet: any pod
    under its name, as the Job's pods carry no other proof before the Job is known)."""
    if not job_uid:
        return True
    owners = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return any(o.get("uid") == job_uid and o.get("controller") for o in owners)


#: How often a pod still pending (past the quiet time) has its Events read for FailedMount.
MOUNT_RECHECK_SECONDS = 5.0


async def _mount_problem(
    run: RunView, pods: list[dict[str, Any]], verdict: rs.Verdict
) -> rs.Verdict:
    """A pending pod that has waited to start for a while: its FailedMount Events say why,
    in the Run's condition (the kubelet's message); a ConfigMap it mounts that is gone for
    good (a pinned revision, the bundle, a checkpoint) fails the run at once
    (``trust.missing``), never at the run's timeout."""
    if verdict.phase != "Pending" or len(pods) != 1:
        return verdict
    pod = pods[0]
    waited = age(pod)
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    creating = any(
        ((c.get("state") or {}).get("waiting") or {}).get("reason") == "ContainerCreating"
        for c in (pod.get("status") or {}).get("containerStatuses") or ()
    )  # on the node, mounting: not waiting to be scheduled (no Events GET for those)
    if waited is None or waited < NO_POD_EVENTS_AFTER or not uid or verdict.quiet or not creating:
        return verdict
    found = run_pod.failed_mount(await k8s.object_events(run.namespace, uid))
    if found is None:
        # Nothing changes on the pod while the kubelet retries a mount: look again.
        recheck = verdict.recheck_after or MOUNT_RECHECK_SECONDS
        return dataclasses.replace(verdict, recheck_after=recheck)
    message, missing = found
    if missing is not None and await k8s.read_config_map(run.namespace, missing) is None:
        raise trust.missing("a ConfigMap the run's pod mounts", missing)
    name = (pod.get("metadata") or {}).get("name")
    return dataclasses.replace(
        verdict,
        reason=REASON_PENDING,
        message=f"pod {name} cannot start: FailedMount: {message}",
        recheck_after=MOUNT_RECHECK_SECONDS,
    )


async def _lost(
    st: RunState,
    run: RunView,
    spec: RunSpec,
    recreation: int,
    current: str,
    job_pods: list[dict[str, Any]],
    timeout: int | None,
) -> rs.Verdict | float | None:
    """The indexes show no current Job: check with the API before recreating it.

    Returns the verdict to write when the Job does exist after all, or else what
    :func:`reconcile` returns (the Job was recreated, or the view was stale).
    """
    live = await k8s.get_job(run.namespace, current)
    if live is not None and not (live.get("metadata") or {}).get("deletionTimestamp"):
        target = jobs.target_of(run_ref(run, spec))
        start.remember(
            st, run, "Job", current, trust.check_made("Job", live, target, start.proof(st, run))
        )
        return rs.derive(job=job_summary(live), pods=job_pods, events=(), timeout_seconds=timeout)
    # Decide from the API, not from what the indexes showed so far: the Run's own latest
    # status says which Job is current (a stale view must never recreate a Job that was
    # already recreated).
    fresh = await k8s.get_custom("runs", run.namespace, run.name)
    if fresh is None:
        return None
    fresh_status = dict(fresh.get("status") or {})
    stale = int(fresh_status.get("jobRecreations") or 0) != recreation or int(
        fresh_status.get("resumes") or 0
    ) != int(run.status.get("resumes") or 0)
    if stale or rs.is_final(fresh_status.get("conditions")):
        # The view was stale: remember the fresh status and look again right away.
        st.overlay[run.uid] = {
            "resourceVersion": (fresh.get("metadata") or {}).get("resourceVersion"),
            "status": fresh_status,
        }
        return 0.05
    resumes = int(run.status.get("resumes") or 0)
    decision = await review.decision_for(st, run, resumes) if resumes else None
    return await start.recreate(st, run, spec, recreation, current, decision)


async def cancel(
    st: RunState,
    run: RunView,
    all_jobs: list[dict[str, Any]],
    job: dict[str, Any] | None,
    job_pods: list[dict[str, Any]],
    pods: list[dict[str, Any]],
) -> float | None:
    """``spec.cancelled``: stop every Job of the Run and record ``Cancelled``."""
    if job is not None or job_pods:
        verdict = rs.derive(job=job, pods=job_pods, timeout_seconds=timeout_of(job))
        if verdict.final and verdict.reason != REASON_CANCELLED:
            # It ended before the cancellation was seen: keep the real outcome.
            await status.write(st, run, verdict)
            await cleanup.release_pods(st, pods)
            return None
    stopped = []
    for j in all_jobs:
        if not j.get("deletionTimestamp"):
            await k8s.delete_job(run.namespace, str(j["name"]))
            stopped.append(str(j["name"]))
    message = "cancelled (spec.cancelled is true)"
    if stopped:
        message += f"; Job {', '.join(stopped)} stopped"
    elif not run.status.get("jobName"):
        message += " before it started"
    st.waiting.get(run.namespace, set()).discard(run.uid)
    parked = rs.is_parked(run.status.get("conditions"))
    await status.write(st, run, rs.final(REASON_CANCELLED, message))
    await cleanup.release_pods(st, pods)
    if parked:
        await review.close(st, run)
    return None
