"""The reconcile work queue: dedupe, delays, priorities, one worker per key."""

from __future__ import annotations

import asyncio

from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers.common import Controller, WorkQueue, _same


async def test_dedupes_and_orders_by_priority() -> None:
    q = WorkQueue()
    q.add(("Topology", "ns", "t"))
    q.add(("Agent", "ns", "a"))
    q.add(("Skill", "ns", "s"))
    q.add(("Skill", "ns", "s"))
    q.add(("Workspace", "ns", "w"))
    assert len(q) == 4
    got = [await q.get() for _ in range(4)]
    assert [k[0] for k in got] == ["Workspace", "Skill", "Agent", "Topology"]
    for key in got:
        q.done(key)
    assert len(q) == 0


async def test_delay_and_earliest_wins() -> None:
    q = WorkQueue()
    q.add(("Skill", "ns", "s"), delay=10)
    q.add(("Skill", "ns", "s"), delay=0.01)
    key = await asyncio.wait_for(q.get(), 1)
    assert key == ("Skill", "ns", "s")
    q.done(key)
    q.add(("Skill", "ns", "x"), delay=0.05)
    assert q.pending(("Skill", "ns", "x"))
    assert await asyncio.wait_for(q.get(), 1) == ("Skill", "ns", "x")


async def test_a_key_added_while_processing_runs_again_afterwards() -> None:
    q = WorkQueue()
    key = ("Agent", "ns", "a")
    q.add(key)
    assert await q.get() == key
    q.add(key)  # while processing: not handed to a second worker
    assert len(q) == 0
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.02)
    assert not getter.done()
    q.done(key)
    assert await asyncio.wait_for(getter, 1) == key


async def test_pending_covers_unobserved_writes() -> None:
    ctl = Controller(config=OperatorConfig(), indices={})
    key = ("Skill", "ns", "s")
    assert not ctl.pending(key, {"observed": 1, "generation": 1})
    assert ctl.pending(key, {"observed": 1, "generation": 2})
    ctl.awaiting[key] = ("42", 1e18)
    assert ctl.pending(key, None)
    ctl.observed(key, "42")
    assert not ctl.pending(key, None)


def test_status_comparison_treats_empty_as_absent() -> None:
    assert _same({"a": None, "b": [], "c": 1}, {"c": 1})
    assert not _same({"c": 2}, {"c": 1})
    assert _same({"scripts": []}, {"scripts": None})
