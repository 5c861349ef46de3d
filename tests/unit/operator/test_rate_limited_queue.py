"""One rate-limited queue for every controller, and the same metrics whatever the controller.

A process function that raises is re-added after the queue's backoff (doubled per failure in
a row, capped, with jitter); a success forgets the failures; ``requeue_after`` re-adds the
key. The workers count each pass in ``swarmkit_reconcile_total{kind, outcome}`` and each
retry in ``swarmkit_workqueue_retries_total{kind}``: the gateways controller too (it
recorded nothing before).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client import REGISTRY

from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.gateways import GatewayController
from swarmkit_operator.runs import Indexes
from swarmkit_operator.runtime.workqueue import MAX_DELAY, Result, Workers, WorkQueue, backoff


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_backoff_doubles_per_failure_up_to_its_cap() -> None:
    for failures, base in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0)):
        assert base * 0.8 <= backoff(failures) <= base * 1.2
    assert backoff(30) <= MAX_DELAY * 1.2


async def test_a_failure_is_retried_later_and_a_success_forgets_it() -> None:
    queue: WorkQueue[str] = WorkQueue()
    outcomes = iter([RuntimeError("apiserver away"), RuntimeError("again"), "ok"])

    async def process(key: str) -> Result:
        got = next(outcomes)
        if isinstance(got, Exception):
            raise got
        return Result("changed", requeue_after=30.0)

    workers: Workers[str] = Workers(queue, process, "test", kind=lambda _: "Test")
    queue.add("k")
    for attempt in (1, 2):
        key = await queue.get()
        before = time.monotonic()
        await workers.process(key)
        queue.done(key)
        assert queue.failures("k") == attempt
        due = queue._scheduled["k"] - before  # the retry's delay, from the backoff
        assert 0.5 * 2 ** (attempt - 1) * 0.8 <= due + 0.01
        assert due <= 0.5 * 2 ** (attempt - 1) * 1.2
        queue._scheduled["k"] = time.monotonic()  # due now (not wait for it here)
        queue._ready[0].append("k")
    key = await queue.get()
    await workers.process(key)
    queue.done(key)
    assert queue.failures("k") == 0  # forgotten
    assert 29 <= queue._scheduled["k"] - time.monotonic() <= 30  # requeue_after
    assert _value("swarmkit_workqueue_retries_total", kind="Test") == 2
    assert _value("swarmkit_reconcile_total", kind="Test", outcome="error") == 2
    assert _value("swarmkit_reconcile_total", kind="Test", outcome="changed") == 1


async def test_gateway_reconciles_are_counted_like_every_controllers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    indexes = Indexes(runs={}, jobs={}, pods={}, topologies={}, agents={}, skills={}, workspaces={})
    ctl = GatewayController(OperatorConfig(), indexes, {})
    calls: list[tuple[str, str]] = []

    async def reconcile(namespace: str, name: str) -> float | None:
        calls.append((namespace, name))
        if len(calls) == 1:
            raise RuntimeError("the Deployment apply failed")
        return None

    monkeypatch.setattr(ctl, "reconcile", reconcile)
    errors = _value("swarmkit_reconcile_total", kind="Gateway", outcome="error")
    done = _value("swarmkit_reconcile_total", kind="Gateway", outcome="reconciled")
    retries = _value("swarmkit_workqueue_retries_total", kind="Gateway")
    seconds: Any = _value("swarmkit_reconcile_duration_seconds_count", kind="Gateway")
    ctl.kick("ns", "a")
    key = await ctl.queue.get()
    await ctl._workers.process(key)
    ctl.queue.done(key)
    assert ctl.queue.pending(("ns", "a")) and ctl.queue.failures(("ns", "a")) == 1
    await ctl._workers.process(key)
    assert _value("swarmkit_reconcile_total", kind="Gateway", outcome="error") == errors + 1
    assert _value("swarmkit_reconcile_total", kind="Gateway", outcome="reconciled") == done + 1
    assert _value("swarmkit_workqueue_retries_total", kind="Gateway") == retries + 1
    assert _value("swarmkit_reconcile_duration_seconds_count", kind="Gateway") == seconds + 2
    assert ctl.queue.failures(("ns", "a")) == 0
