"""Scheduled Runs: a Topology's ``spec.schedule`` creates Runs, like a CronJob its Jobs.

Every ``schedule_interval`` seconds (:class:`~swarmkit_operator.config.RunsSettings`), for
each Topology with a schedule (from the Runs controller's Topology index), find the most
recent scheduled time at or before now (``croniter`` in the schedule's IANA time zone)
and, when it is later than ``status.lastScheduleTime`` (or the Topology's creation), create the Run
``<topology>-<minutes since the epoch of that time>``. The name makes creation idempotent
across operator restarts, and taking only the most recent missed time means that after
downtime at most one missed run is caught up. ``concurrencyPolicy``: ``Forbid`` (the
default) waits while a scheduled Run of the Topology is unfinished (the missed time is then
caught up once it finishes), ``Replace`` deletes the unfinished ones first, ``Allow`` just
creates (:func:`concurrency_action`). A Run waiting on a budget (a SpendQuota that queues or
holds it) is unfinished like a running one. ``suspend: true`` stops creating Runs.
Scheduled Runs are owned by the Topology.

One loop over the Topologies index rather than a kopf timer per Topology: kopf timers put a
finalizer on their object, and the operator writes nothing but status to user objects.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import ValidationError

from swarmkit_api.topology import Schedule

from .. import k8s
from ..builders import run_status as rs
from ..builders.topology import schedule_problem
from ..hashing import dns_label, label_value
from . import passes
from .controller import RunController
from .model import GROUP, VERSION, RunView, one

log = logging.getLogger("swarmkit_operator.schedule")

SCHEDULED_LABEL = "swarmkit.dev/scheduled"
SCHEDULED_AT_ANNOTATION = "swarmkit.dev/scheduled-at"
TOPOLOGY_LABEL = "swarmkit.dev/topology"


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


def unfinished(
    runs: Iterable[RunView], namespace: str, topology: str, due_run: str
) -> list[RunView]:
    """The Topology's scheduled Runs that have not ended, the due one itself excepted."""
    return [
        r
        for r in runs
        if r.namespace == namespace
        and r.labels.get(SCHEDULED_LABEL) == "true"
        and (r.spec.get("topologyRef") or {}).get("name") == topology
        and not rs.is_final(r.status.get("conditions"))
        and r.name != due_run
    ]


def concurrency_action(
    policy: Literal["Allow", "Forbid", "Replace"], unfinished: Sequence[RunView]
) -> Literal["create", "skip", "replace"]:
    """What a due time does given the Topology's unfinished scheduled Runs.

    Unfinished means no final ``Succeeded`` condition: a Run waiting on a budget
    (``BudgetExhausted`` queued, ``BudgetHold``) counts exactly like a running one, so
    ``Forbid`` creates no second Run while one waits for budget, ``Replace`` replaces the
    waiting one (its reservations and hold Review go with it) and ``Allow`` lets both wait.
    """
    if not unfinished or policy == "Allow":
        return "create"
    return "skip" if policy == "Forbid" else "replace"


def scheduled_run_name(topology: str, when: datetime) -> str:
    """``<topology>-<minutes since the epoch>`` (hashed past 63 characters: two
    Topologies sharing a long prefix must not fire into one Run name)."""
    minutes = int(when.timestamp() // 60)
    return dns_label(topology, f"-{minutes}")


def scheduled_run(
    topology: str, namespace: str, topology_uid: str, schedule: Schedule, when: datetime
) -> dict[str, Any]:
    name = scheduled_run_name(topology, when)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Run",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                TOPOLOGY_LABEL: label_value(topology),
                SCHEDULED_LABEL: "true",
                "app.kubernetes.io/managed-by": "swarmkit-operator",
            },
            "annotations": {SCHEDULED_AT_ANNOTATION: rs.rfc3339(when)},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
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


# --- the schedule loop ----------------------------------------------------------------------


async def schedule_topology(ctl: RunController, topo: dict[str, Any], now: datetime) -> None:
    """Create the due Run of one scheduled Topology (idempotent), then record the time."""
    name, namespace, uid = topo.get("name"), topo.get("namespace"), topo.get("uid")
    spec = topo.get("spec") or {}
    if not name or not namespace or not uid or not spec.get("schedule"):
        return
    try:
        schedule = Schedule.model_validate(spec["schedule"])
    except ValidationError:
        return  # the reconcile loop reports the invalid spec
    if schedule.suspend or topo.get("deletionTimestamp") or schedule_problem(schedule):
        return  # an invalid schedule: the Topology's Accepted=False names the field
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
    active = unfinished(ctl.all_runs(), namespace, name, run_name)
    action = concurrency_action(schedule.concurrency_policy, active)
    if action == "skip":
        return  # caught up once the unfinished one finishes
    if action == "replace":
        for r in active:
            await k8s.delete_custom("runs", namespace, r.name)
    manifest = scheduled_run(name, namespace, uid, schedule, when)
    created = await k8s.create_custom_if_absent("runs", namespace, manifest)
    if created is not None:
        log.info("topology %s/%s: created scheduled Run %s", namespace, name, run_name)
        involved = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Topology",
            "name": name,
            "namespace": namespace,
            "uid": uid,
        }
        await k8s.post_event(involved, "Normal", "Scheduled", f"created Run {run_name}")
    await k8s.patch_status(
        "topologies",
        namespace,
        name,
        {"lastScheduleTime": rs.rfc3339(when)},
        k8s.SCHEDULER_MANAGER,
    )


class Scheduler:
    """Create the due Runs of scheduled Topologies: one :meth:`tick` every
    ``schedule_interval`` seconds (a :class:`~swarmkit_operator.runtime.Periodic` of the
    leader's, built by the composition root)."""

    def __init__(self, ctl: RunController) -> None:
        self.ctl = ctl

    async def tick_now(self) -> None:
        await self.tick(datetime.now(UTC))

    async def tick(self, now: datetime) -> None:
        scheduled = []
        for key in list(self.ctl.idx.topologies.keys()):
            topo = one(self.ctl.idx.topologies, key)
            if topo is not None and (topo.get("spec") or {}).get("schedule"):
                scheduled.append(topo)

        async def step(topo: dict[str, Any]) -> None:
            await schedule_topology(self.ctl, topo, now)

        await passes.each("schedules", scheduled, step, _ident)


def _ident(topo: dict[str, Any]) -> str:
    meta = topo.get("metadata") or {}
    return f"Topology {meta.get('namespace')}/{meta.get('name')}"
