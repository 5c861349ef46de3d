"""kopf wiring of scheduled Runs, Run retention and mailbox webhooks
(:mod:`swarmkit_operator.runs.schedule`, :mod:`swarmkit_operator.runs.retention`,
:mod:`swarmkit_operator.runs.delivery`): their loops start with the operator, after the
Runs controller, and stop with it; they write only in the leader (``ctl.ready``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import kopf

from ..runs.delivery import Delivery
from ..runs.retention import SWEEP_SECONDS, Retention, history_victims
from ..runs.schedule import (
    SCHEDULE_INTERVAL,
    SCHEDULED_AT_ANNOTATION,
    SCHEDULED_LABEL,
    TOPOLOGY_LABEL,
    Scheduler,
    due_time,
    schedule_topology,
    scheduled_run,
    scheduled_run_name,
)
from . import run as runs

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
    # Mailbox webhooks (runs/delivery.py): also waits for the leader's ctl.ready.
    _loops.append(loop.create_task(Delivery(ctl).loop()))


@kopf.on.cleanup()
async def runs_schedule_stop(**_: Any) -> None:
    for task in _loops:
        task.cancel()
    for task in _loops:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    _loops.clear()


# Re-exported: the names this module offered before the loops moved to runs/.
__all__ = [
    "SCHEDULED_AT_ANNOTATION",
    "SCHEDULED_LABEL",
    "SCHEDULE_INTERVAL",
    "SWEEP_SECONDS",
    "TOPOLOGY_LABEL",
    "Retention",
    "Scheduler",
    "due_time",
    "history_victims",
    "schedule_topology",
    "scheduled_run",
    "scheduled_run_name",
]
