"""Runs: a Run becomes one Job in the runtime container; its outcome becomes conditions.

The handlers here are thin: kopf keeps indexes of Runs, of the Jobs and pods labelled with a
Run's uid, and small summaries of Topologies, Agents, Skills and Workspaces; every watch
event only *kicks* the Run it concerns. :class:`RunController` then reconciles each kicked
Run in its own coalescing worker (one at a time per Run, any number of Runs in parallel):

1. the Run is finished (``Succeeded`` True/False, or AwaitingReview) → only cleanup: the
   pods' outcome finalizers are released;
2. ``spec.cancelled`` → the Job is deleted (its process killed), ``Cancelled``;
3. nothing created yet → resolve the target from the indexes and the immutable rendered
   ConfigMaps; not Ready → ``Pending`` naming what is missing (re-kicked when any Topology,
   Agent, Skill or Workspace of the namespace changes); Ready → create the immutable bundle
   ConfigMap and the Job (both idempotent by name: AlreadyExists means "already done",
   and an existing bundle is reused as is);
4. otherwise → the verdict is derived from the Job and its pods only
   (:func:`swarmkit_operator.builders.run_status.derive`) and written to ``status``; a Job
   that vanished is recreated up to ``maxJobRecreations`` times (``JobLost``), after an
   authoritative GET so an index lagging behind never causes a duplicate.

Nothing about a Run lives only in memory: after an operator restart the indexes are
re-listed before any handler runs, and every decision is recomputed from the API objects.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import kopf
from pydantic import ValidationError

from swarmkit_api.run import RunSpec
from swarmkit_api.topology import TopologySpec
from swarmkit_api.workspace import WorkspaceSpec

from .. import k8s, metrics
from ..builders import RUN_FINISHED_LABEL
from ..builders import bundle as bundles
from ..builders import job as jobs
from ..builders import run_status as rs
from ..builders.skill import SKILL_MD, load_rendered_skill
from ..conditions import get_condition
from ..config import OperatorConfig
from .common import PRESENT, controller_of, index

log = logging.getLogger("swarmkit_operator.runs")

GROUP = "swarmkit.dev"
VERSION = "v1alpha1"
RUNS = (GROUP, VERSION, "runs")
TOPOLOGIES = (GROUP, VERSION, "topologies")
AGENTS = (GROUP, VERSION, "agents")
SKILLS = (GROUP, VERSION, "skills")
WORKSPACES = (GROUP, VERSION, "workspaces")
REVIEWED_ANNOTATION = "swarmkit.dev/reviewed-by"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
#: Seconds a Job may exist without a pod before its Events are consulted.
NO_POD_EVENTS_AFTER = 3.0
#: How often a Pending Run whose target is not Ready is re-checked without any event.
PENDING_RECHECK = 30.0
#: How long a pod may wait on its image or configuration before the run fails.
POD_START_GRACE = float(
    os.environ.get("SWARMKIT_POD_START_GRACE_SECONDS", rs.DEFAULT_POD_START_GRACE_SECONDS)
)
TRACE = bool(os.environ.get("SWARMKIT_RUNS_TRACE"))
#: How long a Job this process just created is trusted before the Jobs index shows it.
HINT_SECONDS = 2.0
#: Concurrent reconciles (bounded by the API client's thread pool anyway).
MAX_CONCURRENCY = 16


# --------------------------------------------------------------------------------------------
# Index summaries (small: kopf keeps them in memory)
# --------------------------------------------------------------------------------------------


def _meta_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body.get("metadata") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "generation": meta.get("generation") or 0,
        "resourceVersion": meta.get("resourceVersion"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "labels": dict(meta.get("labels") or {}),
    }


def _rv(obj: Mapping[str, Any] | None) -> int:
    try:
        return int((obj or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def _ready(summary: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a summarized object is Ready for its current generation, and why not."""
    status = summary.get("status") or {}
    cond = get_condition(status.get("conditions"), "Ready")
    generation = int(summary.get("generation") or 0)
    if cond is None:
        return False, "not reconciled yet"
    observed = int(cond.get("observedGeneration") or status.get("observedGeneration") or 0)
    if observed and generation and observed < generation:
        return False, "being reconciled"
    if cond.get("status") != "True":
        reason = cond.get("reason") or "NotReady"
        message = cond.get("message") or ""
        return False, f"{reason}: {message}" if message else str(reason)
    return True, ""


@dataclass
class RunView:
    """A Run as the controller sees it (index + its own latest write)."""

    name: str
    namespace: str
    uid: str
    generation: int
    spec: dict[str, Any]
    status: dict[str, Any]
    labels: dict[str, str]
    deleting: bool
    resource_version: int

    @property
    def involved(self) -> dict[str, str]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Run",
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
        }


@dataclass(frozen=True)
class Waiting:
    """The target is not ready: why, and when to look again without an event."""

    message: str
    recheck: float = PENDING_RECHECK


@dataclass(frozen=True)
class Resolved:
    rendered: bundles.RenderedBundle


IndexLike = Mapping[Any, Iterable[Any]]


@dataclass
class Indexes:
    runs: IndexLike
    jobs: IndexLike
    pods: IndexLike
    topologies: IndexLike
    agents: IndexLike
    skills: IndexLike
    workspaces: IndexLike
    #: The reconcile loop's index of bundle ConfigMaps (namespace → {bundle, pins,
    #: finished}); used to repair a missing run-finished label after a crash.
    bundles: IndexLike | None = None


def _one(index: IndexLike, key: Any) -> dict[str, Any] | None:
    values = index.get(key)
    if not values:
        return None
    return dict(next(iter(values)))


@dataclass
class _Worker:
    dirty: bool = False
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    failures: int = 0


# --------------------------------------------------------------------------------------------
# The controller
# --------------------------------------------------------------------------------------------


class RunController:
    """Reconciles Runs; see the module docstring."""

    def __init__(self, config: OperatorConfig, indexes: Indexes) -> None:
        self.config = config
        self.idx = indexes
        self.ready = asyncio.Event()
        self._workers: dict[str, _Worker] = {}
        self._sem = asyncio.Semaphore(MAX_CONCURRENCY)
        #: Runs not started yet have their own budget: starting never waits behind updates.
        self._start_sem = asyncio.Semaphore(MAX_CONCURRENCY)
        self._overlay: dict[str, dict[str, Any]] = {}
        #: run uid → (when, Job name, Job summary) of a Job this process just created, used
        #: only until the Jobs index has seen it (never to decide that a Job is gone).
        self._created_jobs: dict[str, tuple[float, str, dict[str, Any]]] = {}
        self._cm_cache: dict[tuple[str, str], dict[str, str]] = {}
        self._parsed: dict[Any, Any] = {}
        self._waiting: dict[str, set[str]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._released: set[str] = set()
        #: Runs whose current reconcile wrote something (for the reconcile metrics).
        self._changed: set[str] = set()
        #: Runs whose start was attempted by this process (a second attempt is sequential).
        self._start_attempts: set[str] = set()
        #: Called with (namespace, topology) when a Run of that topology finishes.
        self.on_finished: list[Callable[[str, str | None], None]] = []
        #: Test/bench hooks: monotonic times of milestones per run uid.
        self.milestones: dict[str, dict[str, float]] = {}

    # -- scheduling ------------------------------------------------------------------------
    def kick(self, uid: str, delay: float = 0.0) -> None:
        """Reconcile Run ``uid`` soon (coalesced: one worker per Run)."""
        if not uid:
            return
        if TRACE:
            self._mark(uid, "kicked")
        worker = self._workers.setdefault(uid, _Worker())
        if delay > 0:
            loop = asyncio.get_running_loop()
            if worker.timer is not None:
                if worker.timer.when() <= loop.time() + delay:
                    return
                worker.timer.cancel()
            worker.timer = loop.call_later(delay, self.kick, uid)
            return
        if worker.timer is not None:
            worker.timer.cancel()
            worker.timer = None
        worker.dirty = True
        if worker.task is None or worker.task.done():
            worker.task = asyncio.get_running_loop().create_task(self._work(uid, worker))

    def kick_waiting(self, namespace: str | None) -> None:
        """Re-check every Run of ``namespace`` waiting for its target."""
        for uid in list(self._waiting.get(namespace or "", ())):
            self.kick(uid)

    async def _work(self, uid: str, worker: _Worker) -> None:
        await self.ready.wait()
        while worker.dirty:
            worker.dirty = False
            started = time.monotonic()
            self._changed.discard(uid)
            try:
                async with self._budget(uid):
                    again = await self.reconcile(uid)
                worker.failures = 0
                outcome = "changed" if uid in self._changed else "unchanged"
            except Exception as exc:  # retried with backoff; never lost
                worker.failures += 1
                again = min(0.5 * 2**worker.failures, 60.0)
                outcome = "error"
                metrics.RETRIES.labels("Run").inc()
                log.warning("run %s: reconcile failed (retry in %.1fs): %s", uid, again, exc)
            metrics.RECONCILES.labels("Run", outcome).inc()
            metrics.RECONCILE_SECONDS.labels("Run").observe(time.monotonic() - started)
            if again is not None and not worker.dirty:
                self.kick(uid, again)
        if uid not in self._workers:
            return
        if worker.timer is None and not worker.dirty and self.run_view(uid) is None:
            self._workers.pop(uid, None)

    def _budget(self, uid: str) -> asyncio.Semaphore:
        view = self.run_view(uid)
        unstarted = view is not None and not view.status.get("jobName") and not self._jobs_of(uid)
        return self._start_sem if unstarted else self._sem

    def _spawn(self, coro: Awaitable[Any]) -> None:
        async def runner() -> None:
            try:
                await coro
            except Exception as exc:
                log.warning("background call failed: %s", exc)

        task = asyncio.get_running_loop().create_task(runner())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _mark(self, uid: str, what: str) -> None:
        self.milestones.setdefault(uid, {}).setdefault(what, time.monotonic())

    # -- views -----------------------------------------------------------------------------
    def run_view(self, uid: str) -> RunView | None:
        body = _one(self.idx.runs, uid)
        if body is None:
            self._overlay.pop(uid, None)
            return None
        status = dict(body.get("status") or {})
        rv = _rv(body)
        overlay = self._overlay.get(uid)
        if overlay is not None:
            if _rv(overlay) > rv:
                status = dict(overlay.get("status") or {})
                rv = _rv(overlay)
            else:
                self._overlay.pop(uid, None)
        return RunView(
            name=str(body["name"]),
            namespace=str(body["namespace"]),
            uid=uid,
            generation=int(body.get("generation") or 0),
            spec=dict(body.get("spec") or {}),
            status=status,
            labels=dict(body.get("labels") or {}),
            deleting=bool(body.get("deletionTimestamp")),
            resource_version=rv,
        )

    def all_runs(self) -> list[RunView]:
        out = []
        for uid in list(self.idx.runs.keys()):
            view = self.run_view(str(uid))
            if view is not None:
                out.append(view)
        return out

    def _jobs_of(self, uid: str) -> list[dict[str, Any]]:
        return [dict(j) for j in self.idx.jobs.get(uid) or ()]

    def _pods_of(self, uid: str) -> list[dict[str, Any]]:
        return [dict(p) for p in self.idx.pods.get(uid) or ()]

    async def _config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """Data of an immutable rendered ConfigMap (cached forever by name)."""
        key = (namespace, name)
        cached = self._cm_cache.get(key)
        if cached is not None:
            return cached
        cm = await k8s.read_config_map(namespace, name)
        if cm is None:
            return None
        data = {str(k): str(v) for k, v in (cm.get("data") or {}).items()}
        if cm.get("immutable"):
            if len(self._cm_cache) > 4096:
                self._cm_cache.clear()
            self._cm_cache[key] = data
        return data

    # -- reconcile -------------------------------------------------------------------------
    async def reconcile(self, uid: str) -> float | None:
        run = self.run_view(uid)
        pods = self._pods_of(uid)
        if run is None or run.deleting:
            # The Run is gone (or going): its Job and pods follow by garbage collection;
            # nothing will record their outcome, so release them.
            await self._release_pods(pods)
            for ws in self._waiting.values():
                ws.discard(uid)
            if run is None:
                self._created_jobs.pop(uid, None)
            return None
        status = run.status
        conditions = status.get("conditions")
        if rs.is_final(conditions):
            await self._release_pods(pods)
            await self._ensure_finished_label(run)
            return None
        try:
            spec = RunSpec.model_validate(run.spec)
        except ValidationError as exc:
            verdict = rs.final("ValidationFailed", f"invalid Run spec: {exc.errors()[0]['msg']}")
            await self._write(run, verdict)
            return None

        recreation = int(status.get("jobRecreations") or 0)
        current = jobs.job_name(run.name, uid, recreation)
        all_jobs = self._jobs_of(uid)
        job = next(
            (j for j in all_jobs if j.get("name") == current and not j.get("deletionTimestamp")),
            None,
        )
        hint = self._created_jobs.get(uid)
        if job is None and any(j.get("name") == current for j in all_jobs):
            hint = None  # the index has seen it: it is being deleted
        if hint is not None and (hint[1] != current or job is not None):
            self._created_jobs.pop(uid, None)
        elif job is None and hint is not None and time.monotonic() - hint[0] < HINT_SECONDS:
            job = hint[2]
        job_pods = [p for p in pods if _pod_job(p) == current]
        # Pods of Jobs this Run no longer uses (lost, replaced): nothing to record.
        await self._release_pods([p for p in pods if _pod_job(p) != current])

        if spec.cancelled:
            return await self._cancel(run, all_jobs, job, job_pods, pods)

        started = bool(status.get("jobName")) or job is not None or bool(job_pods)
        if not started and recreation == 0:
            return await self._start(run, spec)

        events: list[dict[str, Any]] = []
        if job is not None and not job_pods and job.get("uid"):
            age = _age(job)
            if age is not None and age >= NO_POD_EVENTS_AFTER:
                events = await k8s.object_events(run.namespace, str(job["uid"]))
        timeout = _timeout_of(job)
        verdict = rs.derive(
            job=job,
            pods=job_pods,
            events=events,
            timeout_seconds=timeout,
            pod_start_grace_seconds=POD_START_GRACE,
        )
        if verdict.phase == "Lost":
            live = await k8s.get_job(run.namespace, current)
            if live is not None and not (live.get("metadata") or {}).get("deletionTimestamp"):
                verdict = rs.derive(
                    job=_job_summary(live), pods=job_pods, events=(), timeout_seconds=timeout
                )
            else:
                # Decide from the API, not from what the indexes showed so far: the Run's own
                # latest status says which Job is current (a stale view must never recreate
                # a Job that was already recreated).
                fresh = await k8s.get_custom("runs", run.namespace, run.name)
                if fresh is None:
                    return None
                fresh_status = dict(fresh.get("status") or {})
                if int(fresh_status.get("jobRecreations") or 0) != recreation or rs.is_final(
                    fresh_status.get("conditions")
                ):
                    self._overlay[uid] = {
                        "resourceVersion": (fresh.get("metadata") or {}).get("resourceVersion"),
                        "status": fresh_status,
                    }
                    return 0.05
                return await self._recreate(run, spec, recreation, current)
        if verdict.stop_job and job is not None:
            await k8s.delete_job(run.namespace, current)
        await self._write(run, verdict)
        if verdict.final:
            await self._release_pods(pods)
            return None
        if verdict.recheck_after is not None:
            return verdict.recheck_after
        if verdict.phase == "Pending" and not job_pods:
            return NO_POD_EVENTS_AFTER + 0.5
        return None

    async def _cancel(
        self,
        run: RunView,
        all_jobs: list[dict[str, Any]],
        job: dict[str, Any] | None,
        job_pods: list[dict[str, Any]],
        pods: list[dict[str, Any]],
    ) -> float | None:
        if job is not None or job_pods:
            verdict = rs.derive(job=job, pods=job_pods, timeout_seconds=_timeout_of(job))
            if verdict.final and verdict.reason != "Cancelled":
                # It ended before the cancellation was seen: keep the real outcome.
                await self._write(run, verdict)
                await self._release_pods(pods)
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
        self._waiting.get(run.namespace, set()).discard(run.uid)
        await self._write(run, rs.final("Cancelled", message))
        await self._release_pods(pods)
        return None

    async def _start(self, run: RunView, spec: RunSpec) -> float | None:
        self._mark(run.uid, "reconcile_start")
        try:
            resolution = await self.resolve(run, spec)
        except (ValidationError, bundles.BundleTooLarge, ValueError, KeyError) as exc:
            message = _error_line(exc)
            await self._write(
                run, rs.final("ValidationFailed", f"cannot build the bundle: {message}")
            )
            return None
        if isinstance(resolution, Waiting):
            self._waiting.setdefault(run.namespace, set()).add(run.uid)
            await self._write(run, rs.pending(resolution.message))
            return resolution.recheck
        self._waiting.get(run.namespace, set()).discard(run.uid)
        rendered = resolution.rendered
        ref = _run_ref(run, spec)
        cm_name = jobs.bundle_config_map_name(run.name, run.uid)
        self._mark(run.uid, "resolved")
        cm_manifest = bundles.build_bundle_config_map(ref, rendered)
        cm_path = k8s.core_path("configmaps", run.namespace)
        first = run.uid not in self._start_attempts and self._bundle_absent(run.namespace, cm_name)
        self._start_attempts.add(run.uid)
        if first:
            # Nothing was created for this Run before (the bundle index, pre-populated at
            # start-up, does not know its bundle): create the bundle and the Job together.
            job_manifest = self._job_manifest(ref, rendered, cm_name, recreation=0)
            cm_task = asyncio.ensure_future(k8s.create_start_object(cm_path, cm_manifest))
            job_task = asyncio.ensure_future(
                k8s.create_start_object(k8s.batch_path("jobs", run.namespace), job_manifest)
            )
            await asyncio.wait([cm_task, job_task])
            self._mark(run.uid, "bundle_created")
            cm_error, job_error = cm_task.exception(), job_task.exception()
            job_res = None if job_error else job_task.result()
            if cm_error is not None or cm_task.result() is None:
                # No bundle of ours: the Job must not run without (or with another) one.
                if job_res is not None:
                    await k8s.delete_job(run.namespace, str(job_manifest["metadata"]["name"]))
                if cm_error is not None:
                    raise cm_error
                raise RuntimeError(f"bundle {cm_name} appeared concurrently; starting again")
            if job_error is not None:
                raise job_error
            return await self._record_job(run, rendered, job_manifest, job_res, cm_name, 0)
        created = await k8s.create_start_object(cm_path, cm_manifest)
        self._mark(run.uid, "bundle_created")
        if created is None:  # an earlier attempt made it: the run keeps what it pinned then
            rendered = await self._existing_bundle(run.namespace, cm_name) or rendered
        return await self._create_job(run, ref, rendered, cm_name, recreation=0)

    def _bundle_absent(self, namespace: str, cm_name: str) -> bool:
        """Whether the bundle index knows for sure that ``cm_name`` does not exist."""
        if self.idx.bundles is None:
            return False
        return all(e.get("bundle") != cm_name for e in self.idx.bundles.get(namespace) or ())

    async def _existing_bundle(self, namespace: str, cm_name: str) -> bundles.RenderedBundle | None:
        cm = await k8s.read_config_map(namespace, cm_name)
        if cm is None:
            return None
        data = cm.get("data") or {}
        from swarmkit_api.bundle import BUNDLE_FILE, RunBundle

        bundle = RunBundle.model_validate_json(data[BUNDLE_FILE])
        files: dict[str, tuple[jobs.SkillFileItem, ...]] = {}
        for skill in bundle.skills.values():
            if not skill.config_map:
                continue
            skill_data = await self._config_map_data(namespace, skill.config_map)
            if skill_data is None:
                raise ValueError(f"pinned skill ConfigMap {skill.config_map} is gone")
            rendered = load_rendered_skill(skill_data)
            files[skill.config_map] = bundles.skill_file_items(
                rendered.files, with_skill_md=SKILL_MD in skill_data
            )
        return bundles.rendered_from_config_map(cm, files)

    def _job_manifest(
        self, ref: jobs.RunRef, rendered: bundles.RenderedBundle, cm_name: str, recreation: int
    ) -> dict[str, Any]:
        return jobs.build_job(
            run=ref,
            bundle=rendered.bundle,
            skill_mounts=rendered.skill_mounts,
            config=self.config,
            bundle_config_map=cm_name,
            flow_data_keys=rendered.flow_data_keys,
            recreation=recreation,
        )

    async def _create_job(
        self,
        run: RunView,
        ref: jobs.RunRef,
        rendered: bundles.RenderedBundle,
        cm_name: str,
        recreation: int,
        verdict: rs.Verdict | None = None,
    ) -> float | None:
        manifest = self._job_manifest(ref, rendered, cm_name, recreation)
        created = await k8s.create_start_object(k8s.batch_path("jobs", run.namespace), manifest)
        return await self._record_job(
            run, rendered, manifest, created, cm_name, recreation, verdict
        )

    async def _record_job(
        self,
        run: RunView,
        rendered: bundles.RenderedBundle,
        manifest: Mapping[str, Any],
        created: dict[str, Any] | None,
        cm_name: str,
        recreation: int,
        verdict: rs.Verdict | None = None,
    ) -> float | None:
        name = str(manifest["metadata"]["name"])
        if created is not None:
            self._created_jobs[run.uid] = (time.monotonic(), name, _job_summary(created))
        self._mark(run.uid, "job_created")
        if TRACE:
            marks = self.milestones.get(run.uid, {})
            t0 = marks.get("kicked", marks.get("reconcile_start", 0.0))
            log.info("trace %s", {k: round((v - t0) * 1000, 1) for k, v in marks.items()})
        fields: dict[str, Any] = {
            "jobName": name,
            "bundleConfigMap": cm_name,
            "pinned": rendered.pinned.wire(),
            "jobRecreations": recreation,
        }
        await self._write(
            run,
            verdict or rs.pending(f"waiting for Job {name} to create its pod"),
            fields,
            event=verdict is not None,  # "Job created" is not worth an Event of its own
        )
        return NO_POD_EVENTS_AFTER + 0.5

    async def _recreate(
        self, run: RunView, spec: RunSpec, recreation: int, lost: str
    ) -> float | None:
        limit = self.config.max_job_recreations
        if recreation >= limit:
            message = (
                f"Job {lost} was deleted before the run finished; it was recreated "
                f"{recreation} time(s), the limit (maxJobRecreations) is {limit}"
            )
            await self._write(run, rs.final("JobLost", message))
            await self._release_pods(self._pods_of(run.uid))
            return None
        cm_name = str(
            run.status.get("bundleConfigMap") or jobs.bundle_config_map_name(run.name, run.uid)
        )
        rendered = await self._existing_bundle(run.namespace, cm_name)
        if rendered is None:
            await self._write(
                run, rs.final("JobLost", f"Job {lost} was deleted and its bundle {cm_name} is gone")
            )
            return None
        nxt = recreation + 1
        message = (
            f"Job {lost} was deleted before the run finished; recreated as "
            f"{jobs.job_name(run.name, run.uid, nxt)} ({nxt}/{limit})"
        )
        verdict = rs.Verdict(phase="Pending", status="Unknown", reason="JobLost", message=message)
        return await self._create_job(
            run, _run_ref(run, spec), rendered, cm_name, recreation=nxt, verdict=verdict
        )

    async def _write(
        self,
        run: RunView,
        verdict: rs.Verdict,
        extra: Mapping[str, Any] | None = None,
        event: bool = True,
    ) -> None:
        before = run.status
        patch = rs.status_patch(before, verdict, run.generation)
        patch.update(extra or {})
        if all(before.get(k) == v for k, v in patch.items()):
            return
        rv = await k8s.patch_status("runs", run.namespace, run.name, patch)
        if rv is None:
            return  # the Run is gone
        self._changed.add(run.uid)
        merged = {**before, **patch}
        self._overlay[run.uid] = {"resourceVersion": rv, "status": merged}
        run.status = merged
        old = get_condition(before.get("conditions"), rs.SUCCEEDED)
        if event and (
            old is None
            or (old.get("status"), old.get("reason")) != (verdict.status, verdict.reason)
        ):
            type_ = "Warning" if verdict.status == "False" else "Normal"
            self._spawn(k8s.post_event(run.involved, type_, verdict.reason, verdict.message))
        if verdict.final:
            self._mark(run.uid, "condition_final")
            cm = run.status.get("bundleConfigMap")
            if cm:
                self._spawn(
                    k8s.label_config_map(run.namespace, str(cm), {RUN_FINISHED_LABEL: "true"})
                )
            topology = (run.spec.get("topologyRef") or {}).get("name")
            for callback in self.on_finished:
                callback(run.namespace, topology)

    async def _ensure_finished_label(self, run: RunView) -> None:
        """Label the bundle of a finished Run if a crash skipped it (its pins are released)."""
        cm = run.status.get("bundleConfigMap")
        if not cm or self.idx.bundles is None:
            return
        for entry in self.idx.bundles.get(run.namespace) or ():
            if entry.get("bundle") == cm and not entry.get("finished"):
                await k8s.label_config_map(run.namespace, str(cm), {RUN_FINISHED_LABEL: "true"})
                return

    async def _release_pods(self, pods: Iterable[Mapping[str, Any]]) -> None:
        for pod in pods:
            meta = pod.get("metadata") or {}
            if jobs.POD_FINALIZER not in (meta.get("finalizers") or ()):
                continue
            key = str(meta.get("uid"))
            if key in self._released:
                continue
            await k8s.remove_pod_finalizer(
                str(meta.get("namespace")), str(meta.get("name")), jobs.POD_FINALIZER
            )
            self._released.add(key)
            if len(self._released) > 100_000:
                self._released.clear()

    # -- target resolution -----------------------------------------------------------------
    async def resolve(self, run: RunView, spec: RunSpec) -> Waiting | Resolved:
        """Everything the run pins, from the indexes and the immutable rendered ConfigMaps.

        A fixpoint over topologies (the target and every one reachable through
        ``childTopologies``, synthesized ``topology-<name>`` skills and agent-type skills),
        their agents (as their rendered ConfigMaps pin them) and those agents' skills.
        """
        ns = run.namespace
        target_kind: Literal["Topology", "Agent"]
        topologies: dict[str, bundles.PinnedTopology] = {}
        agents: dict[str, bundles.RenderedAgent] = {}
        skills: dict[str, bundles.PinnedSkill] = {}
        expected: dict[str, str] = {}
        topo_queue: list[str] = []
        agent_queue: list[str] = []
        ws_name: str | None = None
        if spec.topology_ref is not None:
            target_kind, target = "Topology", spec.topology_ref.name
            topo_queue.append(target)
        else:
            assert spec.agent_ref is not None
            target_kind, target = "Agent", spec.agent_ref.name
            agent_queue.append(target)

        while topo_queue or agent_queue:
            while topo_queue:
                tname = topo_queue.pop(0)
                if tname in topologies:
                    continue
                topo = _one(self.idx.topologies, (ns, tname))
                if topo is None:
                    return Waiting(f"waiting for Topology {tname}: not found")
                ok, why = _ready(topo)
                if not ok:
                    return Waiting(f"waiting for Topology {tname} to be Ready ({why})")
                tstatus = topo.get("status") or {}
                version = tstatus.get("version")
                if not version:
                    return Waiting(f"waiting for Topology {tname}: no version yet", 2.0)
                tspec = TopologySpec.model_validate(topo.get("spec") or {})
                topologies[tname] = bundles.PinnedTopology(tname, str(version), tspec)
                if tname == target and target_kind == "Topology":
                    ws_name = tspec.workspace_ref.name
                agent_queue.extend(n.agent_ref.name for n in tspec.agents)
                for aname, aversion in (tstatus.get("agentVersions") or {}).items():
                    expected.setdefault(str(aname), str(aversion))
                topo_queue.extend(str(c) for c in tstatus.get("childTopologies") or ())
            pending = list(dict.fromkeys(a for a in agent_queue if a not in agents))
            agent_queue.clear()
            results = await asyncio.gather(*(self._resolve_agent(ns, a) for a in pending))
            new_refs: dict[str, bundles.SkillRef] = {}
            for aname, result in zip(pending, results, strict=True):
                if isinstance(result, Waiting):
                    return result
                want = expected.get(aname)
                if want is not None and want != result.agent.version:
                    return Waiting(
                        f"waiting for the Topology to pick up Agent {aname}'s new version", 1.0
                    )
                agents[aname] = result
                topo_queue.extend(t for t in result.topologies if t not in topologies)
                for synth in result.synthesized:
                    skills.setdefault(synth.name, synth)
                for ref in result.skills:
                    if ref.name not in skills:
                        new_refs.setdefault(ref.name, ref)
            skill_results = await asyncio.gather(
                *(self._resolve_skill(ns, ref) for ref in new_refs.values())
            )
            for res in skill_results:
                if isinstance(res, Waiting):
                    return res
                skills[res.name] = res
                impl = res.spec.implementation
                if impl is not None and impl.type == "agent" and impl.topology:
                    topo_queue.append(impl.topology)

        if target_kind == "Agent":
            ws_name = agents[target].agent.spec.workspace_name
        assert ws_name is not None
        ws = _one(self.idx.workspaces, (ns, ws_name))
        if ws is None:
            return Waiting(f"waiting for Workspace {ws_name}: not found")
        ok, why = _ready(ws)
        if not ok:
            return Waiting(f"waiting for Workspace {ws_name} to be Ready ({why})")
        ws_spec = WorkspaceSpec.model_validate(ws.get("spec") or {})
        ws_cm = (ws.get("status") or {}).get("renderedConfigMap")

        flow = await self._flow_data(ns, ws_spec, agents.values())
        if isinstance(flow, Waiting):
            return flow
        rendered = bundles.render_bundle(
            run=bundles.RunInput(run.name, ns, run.uid, spec, run.labels),
            target_kind=target_kind,
            target=target,
            topologies=list(topologies.values()),
            agents=[ra.agent for ra in agents.values()],
            skills=list(skills.values()),
            workspace=bundles.PinnedWorkspace(ws_name, ws_spec, str(ws_cm) if ws_cm else None),
            config=self.config,
            flow_data=flow,
        )
        return Resolved(rendered)

    async def _resolve_agent(self, ns: str, name: str) -> bundles.RenderedAgent | Waiting:
        agent = _one(self.idx.agents, (ns, name))
        if agent is None:
            return Waiting(f"waiting for Agent {name}: not found")
        ok, why = _ready(agent)
        if not ok:
            return Waiting(f"waiting for Agent {name} to be Ready ({why})")
        status = agent.get("status") or {}
        version, cm = status.get("version"), status.get("renderedConfigMap")
        if not version or not cm:
            return Waiting(f"waiting for Agent {name}: not rendered yet", 2.0)
        key = (ns, str(cm), name, str(version))
        cached = self._parsed.get(key)
        if isinstance(cached, bundles.RenderedAgent):
            return cached
        data = await self._config_map_data(ns, str(cm))
        if data is None:
            return Waiting(f"waiting for Agent {name}: ConfigMap {cm} not found", 2.0)
        parsed = bundles.pinned_agent_from_config_map(
            name=name, version=str(version), config_map=str(cm), data=data
        )
        self._remember(key, parsed)
        return parsed

    async def _resolve_skill(self, ns: str, ref: bundles.SkillRef) -> bundles.PinnedSkill | Waiting:
        live = _one(self.idx.skills, (ns, ref.name)) or {}
        reviewed = bool((live.get("annotations") or {}).get(REVIEWED_ANNOTATION))
        key = (ns, ref, reviewed)
        cached = self._parsed.get(key)
        if isinstance(cached, bundles.PinnedSkill):
            return cached
        data = await self._config_map_data(ns, ref.config_map)
        if data is None:
            return Waiting(
                f"waiting for Skill {ref.name}: ConfigMap {ref.config_map} not found", 2.0
            )
        parsed = bundles.pinned_skill_from_config_map(
            name=ref.name,
            content_hash=ref.content_hash,
            config_map=ref.config_map,
            data=data,
            scripts=ref.scripts,
            reviewed=reviewed,
        )
        self._remember(key, parsed)
        return parsed

    def _remember(self, key: Any, value: Any) -> None:
        """Parsed immutable ConfigMaps (keyed by their content-addressed names)."""
        if len(self._parsed) > 4096:
            self._parsed.clear()
        self._parsed[key] = value

    async def _flow_data(
        self, ns: str, ws: WorkspaceSpec, agents: Iterable[bundles.RenderedAgent]
    ) -> dict[str, str] | Waiting:
        wanted = set(bundles.flow_data_paths(a.agent for a in agents))
        out: dict[str, str] = {}
        for item in ws.flow_data:
            if item.path not in wanted:
                continue
            if item.content is not None:
                out[item.path] = item.content
                continue
            assert item.config_map_ref is not None
            cm = await k8s.read_config_map(ns, item.config_map_ref.name)
            data = (cm or {}).get("data") or {}
            if item.config_map_ref.key not in data:
                return Waiting(
                    f"waiting for flow data {item.path}: ConfigMap "
                    f"{item.config_map_ref.name} key {item.config_map_ref.key} not found"
                )
            out[item.path] = str(data[item.config_map_ref.key])
        return out


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def _pod_job(pod: Mapping[str, Any]) -> str | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for key in JOB_NAME_LABELS:
        if labels.get(key):
            return str(labels[key])
    return None


def _age(obj: Mapping[str, Any]) -> float | None:
    created = rs.parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    if created is None:
        return None
    return (datetime.now(UTC) - created).total_seconds()


def _timeout_of(job: Mapping[str, Any] | None) -> int | None:
    deadline = ((job or {}).get("spec") or {}).get("activeDeadlineSeconds")
    if not isinstance(deadline, int):
        return None
    return max(deadline - jobs.DEADLINE_GRACE_SECONDS, 1)


def _error_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        return f"{loc}: {err.get('msg')}" if loc else str(err.get("msg"))
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _run_ref(run: RunView, spec: RunSpec) -> jobs.RunRef:
    return jobs.RunRef(
        name=run.name,
        namespace=run.namespace,
        uid=run.uid,
        labels=spec.labels,
        correlation_id=spec.correlation_id,
    )


def _job_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the controller keeps of a Job (also the shape of the Jobs index)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    return {
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "metadata": {
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "creationTimestamp": meta.get("creationTimestamp"),
            "deletionTimestamp": meta.get("deletionTimestamp"),
        },
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "spec": {
            "backoffLimit": spec.get("backoffLimit"),
            "activeDeadlineSeconds": spec.get("activeDeadlineSeconds"),
        },
        "status": dict(body.get("status") or {}),
    }


def _pod_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "labels": dict(meta.get("labels") or {}),
            "finalizers": list(meta.get("finalizers") or ()),
            "creationTimestamp": meta.get("creationTimestamp"),
            "deletionTimestamp": meta.get("deletionTimestamp"),
        },
        "status": {
            "phase": status.get("phase"),
            "reason": status.get("reason"),
            "message": status.get("message"),
            "startTime": status.get("startTime"),
            "conditions": list(status.get("conditions") or ()),
            "containerStatuses": list(status.get("containerStatuses") or ()),
        },
    }


# --------------------------------------------------------------------------------------------
# kopf wiring
# --------------------------------------------------------------------------------------------

_controller: RunController | None = None


def controller() -> RunController | None:
    """The running controller (None before start-up)."""
    return _controller


def _ctl() -> RunController | None:
    return _controller


# The indexes use the shared index machinery of handlers/common.py (filled by a paged LIST at
# start-up, then kept current by watch events, the same way as the reconcile loop's), not
# kopf's own indexes (whose pre-population is quadratic in the number of objects).


@index("runs", id="runs_by_uid", group=GROUP, version=VERSION)
def runs_by_uid(body: Mapping[str, Any], uid: str | None, **_: Any) -> dict[str, Any]:
    summary = _meta_summary(body)
    summary["spec"] = dict(body.get("spec") or {})
    summary["status"] = dict(body.get("status") or {})
    return {str(uid): summary}


@index(
    "jobs", id="runs_jobs_by_run", labels={jobs.RUN_UID_LABEL: PRESENT}, group="batch", version="v1"
)
def runs_jobs_by_run(
    body: Mapping[str, Any], labels: Mapping[str, str], **_: Any
) -> dict[str, Any]:
    return {str(labels[jobs.RUN_UID_LABEL]): _job_summary(body)}


@index("pods", id="runs_pods_by_run", labels={jobs.RUN_UID_LABEL: PRESENT}, version="v1")
def runs_pods_by_run(
    body: Mapping[str, Any], labels: Mapping[str, str], **_: Any
) -> dict[str, Any]:
    return {str(labels[jobs.RUN_UID_LABEL]): _pod_summary(body)}


@index("topologies", id="runs_topologies")
def runs_topologies(
    body: Mapping[str, Any], namespace: str | None, name: str | None, **_: Any
) -> dict[Any, Any]:
    summary = _meta_summary(body)
    summary["spec"] = dict(body.get("spec") or {})
    summary["status"] = dict(body.get("status") or {})
    return {(namespace, name): summary}


@index("agents", id="runs_agents")
def runs_agents(
    body: Mapping[str, Any], namespace: str | None, name: str | None, **_: Any
) -> dict[Any, Any]:
    summary = _meta_summary(body)
    status = body.get("status") or {}
    summary["status"] = {
        "observedGeneration": status.get("observedGeneration"),
        "version": status.get("version"),
        "renderedConfigMap": status.get("renderedConfigMap"),
        "conditions": list(status.get("conditions") or ()),
    }
    ws = (body.get("spec") or {}).get("workspaceRef") or {}
    summary["workspace"] = ws.get("name") or "default"
    return {(namespace, name): summary}


@index("skills", id="runs_skills")
def runs_skills(
    body: Mapping[str, Any], namespace: str | None, name: str | None, **_: Any
) -> dict[Any, Any]:
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    status = body.get("status") or {}
    return {
        (namespace, name): {
            "annotations": {k: v for k, v in annotations.items() if k == REVIEWED_ANNOTATION},
            "contentHash": status.get("contentHash"),
        }
    }


@index("workspaces", id="runs_workspaces")
def runs_workspaces(
    body: Mapping[str, Any], namespace: str | None, name: str | None, **_: Any
) -> dict[Any, Any]:
    summary = _meta_summary(body)
    summary["spec"] = dict(body.get("spec") or {})
    status = body.get("status") or {}
    summary["status"] = {
        "observedGeneration": status.get("observedGeneration"),
        "renderedConfigMap": status.get("renderedConfigMap"),
        "conditions": list(status.get("conditions") or ()),
    }
    return {(namespace, name): summary}


@kopf.on.startup()
async def runs_startup(
    settings: kopf.OperatorSettings,
    memo: Any,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    **kwargs: Any,
) -> None:
    global _controller
    # Watch only our Jobs and pods (server-side), not every pod of the cluster.
    settings.watching.label_selectors["batch", "v1", "jobs"] = jobs.RUN_UID_LABEL
    settings.watching.label_selectors["v1", "pods"] = jobs.RUN_UID_LABEL
    shared = controller_of(memo)
    if shared is None:
        raise RuntimeError("the shared start-up (handlers/common.py) must run first")
    config = shared.config
    k8s.configure()  # a no-op: the shared start-up configured the client already
    view = shared.indexes.view
    indexes = Indexes(
        runs=view("runs_by_uid"),
        jobs=view("runs_jobs_by_run"),
        pods=view("runs_pods_by_run"),
        topologies=view("runs_topologies"),
        agents=view("runs_agents"),
        skills=view("runs_skills"),
        workspaces=view("runs_workspaces"),
        bundles=view("pinned_config_maps") if "pinned_config_maps" in shared.indexes.data else None,
    )
    _controller = RunController(config, indexes)
    _controller.ready.set()  # the shared start-up pre-populated every index (LIST) already
    logger.info("runs controller started (max %d Job recreations)", config.max_job_recreations)


@kopf.on.event(*RUNS)
async def runs_on_run_event(uid: str | None, **_: Any) -> None:
    ctl = _ctl()
    if ctl is not None and uid:
        ctl.kick(uid)


@kopf.on.event("batch", "v1", "jobs", labels={jobs.RUN_UID_LABEL: kopf.PRESENT})
async def runs_on_job_event(labels: Mapping[str, str], **_: Any) -> None:
    ctl = _ctl()
    if ctl is not None:
        ctl.kick(str(labels.get(jobs.RUN_UID_LABEL, "")))


@kopf.on.event("v1", "pods", labels={jobs.RUN_UID_LABEL: kopf.PRESENT})
async def runs_on_pod_event(labels: Mapping[str, str], **_: Any) -> None:
    ctl = _ctl()
    if ctl is not None:
        ctl.kick(str(labels.get(jobs.RUN_UID_LABEL, "")))


@kopf.on.event(*TOPOLOGIES)
@kopf.on.event(*AGENTS)
@kopf.on.event(*SKILLS)
@kopf.on.event(*WORKSPACES)
async def runs_on_target_event(namespace: str | None, **_: Any) -> None:
    ctl = _ctl()
    if ctl is not None:
        ctl.kick_waiting(namespace)


__all__ = ["RunController", "controller"]
