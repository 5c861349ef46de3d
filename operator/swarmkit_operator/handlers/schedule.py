"""Scheduled Runs (Topology ``spec.schedule``) and Run retention (TTL and ``historyLimit``).

Schedules work like a CronJob's: every few seconds, for each Topology with a schedule (from
the Runs controller's Topology index; no kopf timer, so no finalizer on the Topology), find
the most recent scheduled time at or before now (``croniter`` in the schedule's IANA time zone) and,
when it is later than ``status.lastScheduleTime`` (or the Topology's creation), creates the
Run ``<topology>-<minutes since the epoch of that time>``. The name makes creation
idempotent across operator restarts, and taking only the most recent missed time means that
after downtime at most one missed run is caught up. ``concurrencyPolicy``: ``Forbid`` (the
default) waits while a scheduled Run of the Topology is unfinished (the missed time is then
caught up once it finishes), ``Replace`` deletes the unfinished ones first, ``Allow`` just
creates. ``suspend: true`` stops creating Runs. Scheduled Runs are owned by the Topology.

Retention, every :data:`SWEEP_SECONDS` and right after a Run finishes:

* ``runtime.runTtlSecondsAfterFinished`` of the run's Workspace: finished Runs older than
  that (since ``completionTime``) are deleted;
* a Topology's ``historyLimit {succeeded, failed}`` keeps that many finished Runs of each
  outcome (newest first) and deletes the rest; without a ``historyLimit`` only the
  Topology's *scheduled* Runs are trimmed (to the defaults, 10 and 10), manual Runs are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import kopf
from croniter import croniter
from pydantic import ValidationError

from swarmkit_api.topology import HistoryLimit, Schedule

from .. import k8s
from ..builders import run_status as rs
from ..conditions import get_condition
from ..runs.model import one
from . import run as runs

log = logging.getLogger("swarmkit_operator.schedule")

SCHEDULED_LABEL = "swarmkit.dev/scheduled"
SCHEDULED_AT_ANNOTATION = "swarmkit.dev/scheduled-at"
TOPOLOGY_LABEL = "swarmkit.dev/topology"
SWEEP_SECONDS = float(os.environ.get("SWARMKIT_RETENTION_SWEEP_SECONDS", "10"))
SCHEDULE_INTERVAL = float(os.environ.get("SWARMKIT_SCHEDULE_INTERVAL_SECONDS", "5"))


# --- pure helpers (unit-tested) --------------------------------------------------------------


def due_time(schedule: Schedule, last: datetime, now: datetime) -> datetime | None:
    """The most recent scheduled time in ``(last, now]``, or None (nothing is due)."""
    tz = ZoneInfo(schedule.timezone)
    local_now = now.astimezone(tz)
    # get_prev is strictly before its start: start just after now so "now" itself counts.
    it = croniter(schedule.cron, local_now + timedelta(seconds=1))
    prev: datetime = it.get_prev(datetime)
    if prev.tzinfo is None:
        prev = prev.replace(tzinfo=tz)
    if prev > local_now:
        prev = it.get_prev(datetime)
    prev = prev.astimezone(UTC)
    return prev if prev > last else None


def scheduled_run_name(topology: str, when: datetime) -> str:
    minutes = int(when.timestamp() // 60)
    return f"{topology[:40].rstrip('-')}-{minutes}"


def scheduled_run(
    topology: str, namespace: str, topology_uid: str, schedule: Schedule, when: datetime
) -> dict[str, Any]:
    name = scheduled_run_name(topology, when)
    return {
        "apiVersion": f"{runs.GROUP}/{runs.VERSION}",
        "kind": "Run",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                TOPOLOGY_LABEL: topology,
                SCHEDULED_LABEL: "true",
                "app.kubernetes.io/managed-by": "swarmkit-operator",
            },
            "annotations": {SCHEDULED_AT_ANNOTATION: rs.rfc3339(when)},
            "ownerReferences": [
                {
                    "apiVersion": f"{runs.GROUP}/{runs.VERSION}",
                    "kind": "Topology",
                    "name": topology,
                    "uid": topology_uid,
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "topologyRef": {"name": topology},
            "input": schedule.input,
            "correlationId": name,
        },
    }


def _outcome(status: dict[str, Any]) -> str | None:
    cond = get_condition(status.get("conditions"), rs.SUCCEEDED)
    if cond is None:
        return None
    return {"True": "succeeded", "False": "failed"}.get(str(cond.get("status")))


def history_victims(finished: Iterable[tuple[str, str, str]], limit: HistoryLimit) -> list[str]:
    """Names to delete among (name, outcome, completionTime) beyond the limits."""
    keep = {"succeeded": limit.succeeded, "failed": limit.failed}
    out: list[str] = []
    for outcome in ("succeeded", "failed"):
        group = sorted(
            (f for f in finished if f[1] == outcome), key=lambda f: (f[2], f[0]), reverse=True
        )
        out.extend(name for name, _, _ in group[keep[outcome] :])
    return out


# --- the schedule loop ----------------------------------------------------------------------
# One loop over the Topologies index rather than a kopf timer per Topology: kopf timers put a
# finalizer on their object, and the operator writes nothing but status to user objects.


async def schedule_topology(ctl: runs.RunController, topo: dict[str, Any], now: datetime) -> None:
    """Create the due Run of one scheduled Topology (idempotent), then record the time."""
    name, namespace, uid = topo.get("name"), topo.get("namespace"), topo.get("uid")
    spec = topo.get("spec") or {}
    if not name or not namespace or not uid or not spec.get("schedule"):
        return
    try:
        schedule = Schedule.model_validate(spec["schedule"])
    except ValidationError:
        return  # the reconcile loop reports the invalid spec
    if schedule.suspend or topo.get("deletionTimestamp"):
        return
    status = topo.get("status") or {}
    last = rs.parse_time(status.get("lastScheduleTime")) or rs.parse_time(
        topo.get("creationTimestamp")
    )
    try:
        when = due_time(schedule, last or now, now)
    except (ZoneInfoNotFoundError, ValueError, KeyError) as exc:
        log.warning("topology %s/%s: bad schedule: %s", namespace, name, exc)
        return
    if when is None:
        return
    run_name = scheduled_run_name(name, when)
    active = [
        r
        for r in ctl.all_runs()
        if r.namespace == namespace
        and r.labels.get(SCHEDULED_LABEL) == "true"
        and (r.spec.get("topologyRef") or {}).get("name") == name
        and not rs.is_final(r.status.get("conditions"))
        and r.name != run_name
    ]
    if active and schedule.concurrency_policy == "Forbid":
        return  # caught up once the running one finishes
    if active and schedule.concurrency_policy == "Replace":
        for r in active:
            await k8s.delete_custom("runs", namespace, r.name)
    manifest = scheduled_run(name, namespace, uid, schedule, when)
    created = await k8s.create_custom_if_absent("runs", namespace, manifest)
    if created is not None:
        log.info("topology %s/%s: created scheduled Run %s", namespace, name, run_name)
        involved = {
            "apiVersion": f"{runs.GROUP}/{runs.VERSION}",
            "kind": "Topology",
            "name": name,
            "namespace": namespace,
            "uid": uid,
        }
        await k8s.post_event(involved, "Normal", "Scheduled", f"created Run {run_name}")
    await k8s.patch_status("topologies", namespace, name, {"lastScheduleTime": rs.rfc3339(when)})


class Scheduler:
    """Every :data:`SCHEDULE_INTERVAL` seconds: create the due Runs of scheduled Topologies."""

    def __init__(self, ctl: runs.RunController) -> None:
        self.ctl = ctl

    async def loop(self) -> None:
        await self.ctl.ready.wait()
        while True:
            try:
                await self.tick(datetime.now(UTC))
            except Exception as exc:
                log.warning("schedule tick failed: %s", exc)
            await asyncio.sleep(SCHEDULE_INTERVAL)

    async def tick(self, now: datetime) -> None:
        for key in list(self.ctl.idx.topologies.keys()):
            topo = one(self.ctl.idx.topologies, key)
            if topo is None or not (topo.get("spec") or {}).get("schedule"):
                continue
            await schedule_topology(self.ctl, topo, now)


# --- retention --------------------------------------------------------------------------------


class Retention:
    """Deletes finished Runs past their TTL or beyond their Topology's history limit."""

    def __init__(self, ctl: runs.RunController) -> None:
        self.ctl = ctl
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def poke(self, namespace: str, topology: str | None) -> None:
        self.wake.set()

    async def loop(self) -> None:
        await self.ctl.ready.wait()
        while True:
            try:
                await self.sweep()
            except Exception as exc:
                log.warning("retention sweep failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), SWEEP_SECONDS)
            self.wake.clear()
            await asyncio.sleep(0.5)  # let a burst of finishing runs settle

    def _workspace_ttl(self, namespace: str, spec: dict[str, Any]) -> int | None:
        ws_name: str | None = None
        topo_ref = (spec.get("topologyRef") or {}).get("name")
        if topo_ref:
            topo = one(self.ctl.idx.topologies, (namespace, topo_ref))
            ws_name = (((topo or {}).get("spec") or {}).get("workspaceRef") or {}).get("name")
        else:
            agent = one(self.ctl.idx.agents, (namespace, (spec.get("agentRef") or {}).get("name")))
            ws_name = (agent or {}).get("workspace")
        if not ws_name:
            return None
        ws = one(self.ctl.idx.workspaces, (namespace, ws_name))
        runtime = ((ws or {}).get("spec") or {}).get("runtime") or {}
        ttl = runtime.get("runTtlSecondsAfterFinished")
        return int(ttl) if isinstance(ttl, int) else None

    async def sweep(self) -> None:
        now = datetime.now(UTC)
        groups: dict[tuple[str, str], list[tuple[str, str, str, bool]]] = {}
        doomed: list[tuple[str, str]] = []
        for r in self.ctl.all_runs():
            if r.deleting:
                continue
            outcome = _outcome(r.status)
            if outcome is None:
                continue
            done = str(r.status.get("completionTime") or "")
            ttl = self._workspace_ttl(r.namespace, r.spec)
            finished_at = rs.parse_time(done)
            expired = ttl is not None and finished_at is not None
            if expired and ttl is not None and finished_at is not None:
                expired = (now - finished_at).total_seconds() >= ttl
            if expired:
                doomed.append((r.namespace, r.name))
                continue
            topo = (r.spec.get("topologyRef") or {}).get("name")
            if topo:
                scheduled = r.labels.get(SCHEDULED_LABEL) == "true"
                groups.setdefault((r.namespace, str(topo)), []).append(
                    (r.name, outcome, done, scheduled)
                )
        for (namespace, topo), members in groups.items():
            view = one(self.ctl.idx.topologies, (namespace, topo))
            raw = ((view or {}).get("spec") or {}).get("historyLimit")
            if raw is not None:
                limit = HistoryLimit.model_validate(raw)
                candidates = [(n, o, d) for n, o, d, _ in members]
            else:
                limit = HistoryLimit()
                candidates = [(n, o, d) for n, o, d, s in members if s]
            doomed.extend((namespace, n) for n in history_victims(candidates, limit))
        for namespace, name in doomed:
            if await k8s.delete_custom("runs", namespace, name):
                log.info("deleted finished Run %s/%s (retention)", namespace, name)


_loops: list[asyncio.Task[None]] = []


@kopf.on.startup()
async def runs_schedule_start(**_: Any) -> None:
    ctl = runs.controller()
    if ctl is None:
        return
    retention = Retention(ctl)
    ctl.on_finished.append(retention.poke)
    loop = asyncio.get_running_loop()
    _loops.append(loop.create_task(retention.loop()))
    _loops.append(loop.create_task(Scheduler(ctl).loop()))


@kopf.on.cleanup()
async def runs_schedule_stop(**_: Any) -> None:
    for task in _loops:
        task.cancel()
    for task in _loops:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    _loops.clear()


__all__ = [
    "Retention",
    "Scheduler",
    "due_time",
    "history_victims",
    "schedule_topology",
    "scheduled_run",
    "scheduled_run_name",
]
