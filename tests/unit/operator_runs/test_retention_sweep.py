"""A retention sweep over many finished Runs never holds up the operator's event loop.

The sweep runs right after every Run finishes; with thousands of finished Runs one pass
takes tens of milliseconds (more on a busy node), and Run starts and status writes share
the event loop with it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.runs import Indexes, RunController
from swarmkit_operator.runs.retention import SWEEP_BATCH, Retention
from swarmkit_operator.runs.summaries import run_summary, topology_summary, workspace_summary


def finished_run(i: int) -> dict[str, Any]:
    return run_summary(
        {
            "metadata": {"name": f"r-{i}", "namespace": "ns", "uid": f"u{i}"},
            "spec": {"topologyRef": {"name": "fast"}},
            "status": {
                "completionTime": "2026-12-03T08:00:00Z",
                "conditions": [{"type": "Succeeded", "status": "True", "reason": "Succeeded"}],
            },
        }
    )


def controller(runs: int) -> RunController:
    topology = {"metadata": {"name": "fast", "namespace": "ns"}, "spec": {}}
    topology["spec"]["workspaceRef"] = {"name": "default"}
    workspace = {"metadata": {"name": "default", "namespace": "ns"}, "spec": {"runtime": {}}}
    indexes = Indexes(
        runs={f"u{i}": [finished_run(i)] for i in range(runs)},
        jobs={},
        pods={},
        topologies={("ns", "fast"): [topology_summary(topology)]},
        agents={},
        skills={},
        workspaces={("ns", "default"): [workspace_summary(workspace)]},
    )
    ctl = RunController(OperatorConfig(), indexes)
    ctl.ready.set()
    return ctl


async def test_sweep_of_thousands_of_finished_runs_lets_other_work_run_meanwhile() -> None:
    runs = 20 * SWEEP_BATCH
    retention = Retention(controller(runs))
    ticks = 0
    sweeping = True

    async def other_work() -> None:  # stands for Run starts and status writes
        nonlocal ticks
        while sweeping:
            ticks += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    before = ticks
    await retention.sweep()  # nothing is old enough or over a limit: nothing to delete
    sweeping = False
    await other

    assert ticks - before >= runs // SWEEP_BATCH - 1
