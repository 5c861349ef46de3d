"""Starting a Run: its immutable bundle ConfigMap and its Job; and recreating a lost Job.

A Run goes through the runner-workload pipeline (:mod:`swarmkit_operator.workload`) like a
served Topology or a gateway, with its budget gate between the refusals and the bundle; its
bundle is the pipeline's bundle step in its pinned mode (``pipeline.ensure_bundle``) and its
NetworkPolicy the egress step for a Job (``pipeline.create_policy``, the one builder).
Its objects are idempotent by name (derived from the Run's name and uid, and for the Job
the recreation count): AlreadyExists means "already done" when the object is provably the
operator's (a bundle with the digest the Run recorded, a Job or NetworkPolicy whose uid its
status records; else ``TamperedObject``), and an existing bundle is reused as it is, so a
start retried after a crash runs with what the Run pinned the first time.
The Job's name, the bundle's name and what was pinned go to ``status`` at once, so a later
reconcile (or another operator process) knows which Job is current; when that write is
lost (the leader lost its lease right after the create), the next reconcile that finds the
Job proven the operator's writes the same record from what the Job runs
(:func:`record_found`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from swarmkit_api.conditions import (
    REASON_JOB_LOST,
    REASON_TAMPERED_OBJECT,
    REASON_VALIDATION_FAILED,
)
from swarmkit_api.review import ResumeDecision
from swarmkit_api.run import RunSpec

from .. import egress, k8s
from ..builders import RUN_LABEL, trust
from ..builders import bundle as bundles
from ..builders import job as jobs
from ..builders import run_status as rs
from ..builders.pod import bundle_source
from ..builders.review import resume_files
from ..builders.workload import Target
from ..workload import pipeline
from . import budget, status, tracing
from .cleanup import release_pods
from .model import NO_POD_EVENTS_AFTER, RunView, error_line, run_ref
from .state import RunState
from .summaries import job_summary

#: Event reason (Warning) on a Run whose declared destinations did not resolve.
EVENT_EGRESS_UNRESOLVED = "EgressUnresolved"


async def start(st: RunState, run: RunView, spec: RunSpec) -> float | None:
    """The runner-workload pipeline for a Run (:mod:`swarmkit_operator.workload`): resolve
    (Pending while the target is not Ready), refusals, the budget gate, the egress plan,
    then the bundle, its NetworkPolicy and the Job."""
    st.mark(run.uid, "reconcile_start")
    ref = run_ref(run, spec)
    target = jobs.target_of(ref)
    try:
        resolution = await pipeline.resolve(st.resolver, target, spec)
    except (ValidationError, bundles.BundleTooLarge, ValueError, KeyError) as exc:
        message = error_line(exc)
        await status.write(
            st, run, rs.final(REASON_VALIDATION_FAILED, f"cannot build the bundle: {message}")
        )
        return None
    if isinstance(resolution, pipeline.Stop):
        # Re-kicked by any change to a Topology, Agent, Skill or Workspace of the namespace.
        st.waiting.setdefault(run.namespace, set()).add(run.uid)
        await status.write(st, run, rs.pending(resolution.message))
        return resolution.recheck
    st.waiting.get(run.namespace, set()).discard(run.uid)
    st.mark(run.uid, "resolved")
    refused = await pipeline.refusals(resolution.rendered.bundle)
    if refused is not None:
        verdict = rs.Verdict(
            phase="Pending", status="Unknown", reason=refused.reason, message=refused.message
        )
        await status.write(st, run, verdict)
        return refused.recheck
    # SpendQuotas: reserve the Run's cap before anything is created (or wait / fail).
    st.mark(run.uid, "budget_start")
    admitted, recheck = await budget.gate(st, run, spec, resolution.rendered.bundle.workspace)
    if not admitted:
        return recheck
    st.mark(run.uid, "budget_checked")
    rendered = await with_egress(resolution.rendered)
    st.mark(run.uid, "egress_planned")
    _warn_unresolved(st, run, rendered)
    return await _create(st, run, ref, rendered)


def _warn_unresolved(st: RunState, run: RunView, rendered: bundles.RenderedBundle) -> None:
    """A Warning Event (on the first attempt) for declared destinations that did not
    resolve: the NetworkPolicy has no rule for them."""
    plan = rendered.bundle.egress
    if plan is None or not plan.unresolved or run.uid in st.start_attempts:
        return
    message = (
        f"declared destination(s) {', '.join(plan.unresolved)} did not resolve when the "
        "Run was rendered: its NetworkPolicy has no rule for them (list their addresses "
        "in the Workspace's egress.allow)"
    )
    st.spawn(k8s.post_event(run.involved, "Warning", EVENT_EGRESS_UNRESOLVED, message))


async def _create(
    st: RunState, run: RunView, ref: jobs.RunRef, rendered: bundles.RenderedBundle
) -> float | None:
    """The bundle, the NetworkPolicy and the Job (steps 3 to 5 of the pipeline)."""
    cm_name = jobs.bundle_config_map_name(run.name, run.uid)
    cm_manifest = bundles.build_bundle_config_map(ref, rendered)
    first = run.uid not in st.start_attempts and bundle_absent(st, run.namespace, cm_name)
    st.start_attempts.add(run.uid)
    if not first:
        # A bundle may exist already (an earlier attempt): create it first, then the Job
        # from whichever bundle is there.
        rendered = await _bundle_again(st, run, cm_manifest, rendered)
        return await create_job(st, run, ref, rendered, cm_name, recreation=0)
    # Nothing was created for this Run before (the bundle index, pre-populated at
    # start-up, does not know its bundle): create the bundle and the Job together,
    # after the NetworkPolicy (the pod never runs unconfined).
    await ensure_policy(st, run, ref, rendered)
    st.mark(run.uid, "policy_created")
    job_manifest = job_manifest_for(st, ref, rendered, cm_name, recreation=0)
    cm_task = asyncio.ensure_future(pipeline.ensure_bundle(cm_manifest, _pinned(run)))
    job_task = asyncio.ensure_future(
        pipeline.create_owned(job_manifest, jobs.target_of(ref), proof(st, run))
    )
    await asyncio.wait([cm_task, job_task])
    st.mark(run.uid, "bundle_created")
    cm_error, job_error = cm_task.exception(), job_task.exception()
    job_res = None if job_error else job_task.result()
    found = None if cm_error else cm_task.result()
    if cm_error is not None or (found is not None and not _same(found, cm_manifest)):
        # No bundle of ours with what the Job was built from: it must not run.
        if job_res is not None and job_res.created is not None:
            await k8s.delete_job(run.namespace, str(job_manifest["metadata"]["name"]))
        if cm_error is not None:
            raise cm_error
        # The Run pinned another bundle before: the next attempt runs with that one.
        raise RuntimeError(f"bundle {cm_name} appeared concurrently; starting again")
    if job_error is not None:
        raise job_error
    return await record_job(st, run, rendered, job_manifest, job_task.result(), cm_name, 0)


def _pinned(run: RunView) -> str:
    """The digest a bundle already under the Run's name must have to be the Run's: the one
    its status records; "" before that write (a crash before it): the one rendered now,
    which the bundle step computes only when a bundle is there."""
    return str(run.status.get("bundleSha256") or "")


def _same(found: Mapping[str, Any], cm_manifest: Mapping[str, Any]) -> bool:
    return trust.data_digest(found.get("data") or {}) == trust.data_digest(cm_manifest["data"])


async def _bundle_again(
    st: RunState,
    run: RunView,
    cm_manifest: Mapping[str, Any],
    rendered: bundles.RenderedBundle,
) -> bundles.RenderedBundle:
    """Create the bundle, or take the one an earlier attempt made: the run keeps what it
    pinned then, if it is provably ours (:func:`_pinned`). Anything else was created by
    someone else (``TamperedObject``, raised by the pipeline's bundle step)."""
    found = await pipeline.ensure_bundle(cm_manifest, _pinned(run))
    st.mark(run.uid, "bundle_created")
    if found is None:
        return rendered
    return await st.resolver.pinned_bundle(run.namespace, found)


async def with_egress(rendered: bundles.RenderedBundle) -> bundles.RenderedBundle:
    """``rendered`` with its resolved egress plan pinned in the bundle (the runner checks
    its connections against it; the NetworkPolicy is built from it)."""
    plan = await egress.plan_for(rendered.bundle)
    if plan is None:
        return rendered
    bundle = rendered.bundle.model_copy(update={"egress": plan})
    return dataclasses.replace(rendered, bundle=bundle, bundle_json=bundle.to_json())


async def ensure_policy(
    st: RunState, run: RunView, ref: jobs.RunRef, rendered: bundles.RenderedBundle
) -> None:
    """The pipeline's egress step for the Run (:func:`pipeline.create_policy`): the
    NetworkPolicy of all its Jobs' pods, from the plan its bundle pins, named after its
    first Job; one already there is kept only if the operator provably made it for the Run."""
    name = jobs.job_name(ref.name, ref.uid)
    owned = await pipeline.create_policy(
        jobs.target_of(ref),
        proof(st, run),
        rendered.bundle.egress,
        name=name,
        pod_selector={jobs.RUN_UID_LABEL: jobs.label_value(ref.uid)},
        labels={RUN_LABEL: jobs.label_value(ref.name)},
    )
    if owned is not None:
        remember(st, run, "NetworkPolicy", name, owned.uid)


def run_target(run: RunView) -> Target:
    """The Run as the owner of its workload objects."""
    return Target("Run", run.namespace, run.name, run.uid, run.name)


def proof(st: RunState, run: RunView) -> trust.Made:
    """What proves that an object under one of ``run``'s derived names (its Jobs, its
    NetworkPolicy) is the operator's (:func:`~swarmkit_operator.builders.trust.check_made`):
    the uids recorded in its status, those this process created, and the earliest time the
    operator starts it (``spec.startAfter``)."""
    recorded = run.status.get("createdUids") or {}
    when = rs.parse_time(run.spec.get("startAfter"))
    return st.resolver.ledger.proof(run_target(run), recorded, when)


def remember(st: RunState, run: RunView, kind: str, name: str, made: str) -> None:
    """This process created (or proved) ``kind`` ``name`` (uid ``made``) for ``run``: the
    record in its status follows with the next write."""
    st.resolver.ledger.remember(run_target(run), kind, name, made)


def unrecorded(st: RunState, run: RunView) -> dict[str, Any]:
    """``createdUids`` for the next status write when it lacks an object this process made
    or proved (a record write that failed, a predecessor's Job); else nothing."""
    uids = st.resolver.ledger.record(run_target(run), run.status.get("createdUids") or {})
    return {} if uids is None else {"createdUids": uids}


def bundle_absent(st: RunState, namespace: str, cm_name: str) -> bool:
    """Whether the bundle index knows for sure that ``cm_name`` does not exist."""
    if st.idx.bundles is None:
        return False
    return all(e.get("bundle") != cm_name for e in st.idx.bundles.get(namespace) or ())


def job_manifest_for(
    st: RunState,
    ref: jobs.RunRef,
    rendered: bundles.RenderedBundle,
    cm_name: str,
    recreation: int,
    resume: int = 0,
    decision: ResumeDecision | None = None,
    checkpoint_sha256: str = "",
) -> dict[str, Any]:
    return jobs.build_job(
        run=ref,
        bundle=rendered.bundle,
        skill_mounts=rendered.skill_mounts,
        config=st.config,
        bundle_config_map=cm_name,
        flow_data_keys=rendered.flow_data_keys,
        recreation=recreation,
        resume=resume,
        resume_files=resume_files(ref.name, ref.uid, resume, decision, checkpoint_sha256),
        bundle_sha256=bundles.bundle_file_sha256(rendered),
    )


async def create_job(
    st: RunState,
    run: RunView,
    ref: jobs.RunRef,
    rendered: bundles.RenderedBundle,
    cm_name: str,
    recreation: int,
    verdict: rs.Verdict | None = None,
    resume: int = 0,
    extra: Mapping[str, Any] | None = None,
    decision: ResumeDecision | None = None,
) -> float | None:
    """Create the Job of stage ``resume`` (recreation ``recreation``; a resumed stage
    with ``decision``, from its Review) and record it."""
    await ensure_policy(st, run, ref, rendered)  # gone with a lost Job? the new one gets it back
    checkpoint_sha256 = str(run.status.get("checkpointSha256") or "")
    manifest = job_manifest_for(
        st, ref, rendered, cm_name, recreation, resume, decision, checkpoint_sha256
    )
    created = await pipeline.create_owned(manifest, jobs.target_of(ref), proof(st, run))
    return await record_job(
        st, run, rendered, manifest, created, cm_name, recreation, verdict, extra
    )


async def record_job(
    st: RunState,
    run: RunView,
    rendered: bundles.RenderedBundle,
    manifest: Mapping[str, Any],
    owned: pipeline.Owned,
    cm_name: str,
    recreation: int,
    verdict: rs.Verdict | None = None,
    extra: Mapping[str, Any] | None = None,
) -> float | None:
    """Write the started Job (created now, or there already and proven the operator's) to
    ``status``, with its uid in ``createdUids``: what proves it the operator's from then on."""
    name = str(manifest["metadata"]["name"])
    remember(st, run, "Job", name, owned.uid)
    if owned.created is not None:
        # Trusted briefly, until the Jobs index shows the Job (see observe.reconcile).
        st.created_jobs[run.uid] = (time.monotonic(), name, job_summary(owned.created))
    st.mark(run.uid, "job_created")
    st.trace(run.uid)
    await status.write(
        st,
        run,
        verdict or rs.pending(f"waiting for Job {name} to create its pod"),
        start_record(st, run, rendered, name, cm_name, recreation, extra),
        event=verdict is not None,  # "Job created" is not worth an Event of its own
    )
    # Re-check once a pod should exist (if none does, the Job's Events say why).
    return NO_POD_EVENTS_AFTER + 0.5


def start_record(
    st: RunState,
    run: RunView,
    rendered: bundles.RenderedBundle,
    name: str,
    cm_name: str,
    recreation: int,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The status fields that record Job ``name`` as the Run's current Job, running bundle
    ``cm_name`` (``rendered``): what a later reconcile, a recreation and a grader read."""
    return {
        "jobName": name,
        "bundleConfigMap": cm_name,
        "bundleSha256": trust.data_digest(bundles.bundle_data(rendered)),
        "pinned": rendered.pinned.wire(),
        "jobRecreations": recreation,
        **unrecorded(st, run),
        # Tracing hook: status.traceId of a traced Run (its uid: resumes keep it).
        **tracing.status_fields(run.uid, rendered.bundle.workspace.tracing),
        **(extra or {}),
    }


async def record_found(st: RunState, run: RunView, spec: RunSpec, current: str) -> None:
    """Write the start record of the Run's current Job ``current``, found proven the
    operator's (:func:`proof`) while the Run's status has none: a predecessor (or this
    process) created it and lost the write that records it (its lease, a conflict).

    It is recorded with what the Job runs, never with what the target resolves to now:
    the bundle ConfigMap its bundle volume mounts, whose content must be the bundle.json
    the Job's ``SWARMKIT_BUNDLE_SHA256`` names and the flow data files that pins
    (:func:`~swarmkit_operator.builders.bundle.job_bundle_mismatch`; else
    ``TamperedObject``, gone: ``PinnedRevisionMissing``). A Job gone by now is left to
    the lost-Job path."""
    live = await k8s.get_job(run.namespace, current)
    if live is None or (live.get("metadata") or {}).get("deletionTimestamp"):
        return
    made = trust.check_made("Job", live, jobs.target_of(run_ref(run, spec)), proof(st, run))
    remember(st, run, "Job", current, made)
    template = ((live.get("spec") or {}).get("template") or {}).get("spec") or {}
    cm_name, digest = bundle_source(template)
    if not cm_name:
        raise trust.Refused(
            REASON_TAMPERED_OBJECT,
            f"the run's Job {current} mounts no bundle ConfigMap: it is not the operator's",
        )
    cm = await k8s.read_config_map(run.namespace, cm_name)
    if cm is None:
        raise trust.missing("the run's bundle", cm_name)
    why = bundles.job_bundle_mismatch(cm.get("data") or {}, digest)
    if why is not None:
        raise trust.Refused(
            REASON_TAMPERED_OBJECT,
            f"the run's bundle ConfigMap {cm_name} is not the one its Job {current} runs "
            f"({why}): it is not used",
        )
    # Only what the record needs (digest, pins, tracing): no skill mounts are built here.
    rendered = bundles.rendered_from_config_map(cm, {})
    recreation = int(run.status.get("jobRecreations") or 0)
    await status.write_fields(
        st, run, start_record(st, run, rendered, current, cm_name, recreation)
    )


async def recreate(
    st: RunState,
    run: RunView,
    spec: RunSpec,
    recreation: int,
    lost: str,
    decision: ResumeDecision | None = None,
) -> float | None:
    """Job ``lost`` vanished before the run finished: recreate it from the pinned bundle
    (up to ``maxJobRecreations`` times), or fail the run with ``JobLost``. A resumed
    stage's Job is recreated with ``decision`` (from its Review)."""
    limit = st.config.max_job_recreations
    if recreation >= limit:
        message = (
            f"Job {lost} was deleted before the run finished; it was recreated "
            f"{recreation} time(s), the limit (maxJobRecreations) is {limit}"
        )
        await status.write(st, run, rs.final(REASON_JOB_LOST, message))
        await release_pods(st, st.pods_of(run.uid))
        return None
    cm_name = str(
        run.status.get("bundleConfigMap") or jobs.bundle_config_map_name(run.name, run.uid)
    )
    rendered = await st.resolver.existing_bundle(
        run.namespace, cm_name, run.status.get("bundleSha256")
    )
    nxt = recreation + 1
    resume = int(run.status.get("resumes") or 0)
    message = (
        f"Job {lost} was deleted before the run finished; recreated as "
        f"{jobs.job_name(run.name, run.uid, nxt, resume)} ({nxt}/{limit})"
    )
    verdict = rs.Verdict(phase="Pending", status="Unknown", reason=REASON_JOB_LOST, message=message)
    return await create_job(
        st, run, run_ref(run, spec), rendered, cm_name, nxt, verdict, resume, decision=decision
    )
