"""The manager runs runnables that say whether they need the lease; periodic loops are one
``Periodic`` each (first pass at once, then every period or sooner when poked; a failed
pass does not end the loop)."""

from __future__ import annotations

import asyncio
from typing import Any

from swarmkit_operator import k8s
from swarmkit_operator.runtime import Manager, Periodic, Runnable
from swarmkit_operator.runtime.leader import LeaseSettings


def _recorder(started: list[str], name: str) -> Any:
    async def start() -> None:
        started.append(name)

    return start


async def test_a_standby_starts_only_what_needs_no_lease_behind_the_write_gate() -> None:
    lease = LeaseSettings("l", "ns", "me", lease_duration=12, renew_deadline=8, retry_period=2)
    manager = Manager.build(lease)
    started: list[str] = []
    refused: list[str | None] = []

    async def watch() -> None:
        refused.append(k8s.write_refusal())  # what a write from an event would meet
        started.append("watch")

    manager.add(Runnable("workers", _recorder(started, "workers")))
    manager.add(Runnable("watch", watch, needs_leader=False))
    try:
        await manager.start()  # campaigns for the Lease (no apiserver here: never wins)
        await asyncio.sleep(0.05)
        assert started == ["watch"] and not manager.started
        assert refused[0] is not None  # the gate was in place before the streams started
        assert manager.writers == ["workers"]
    finally:
        await manager.stop()
        k8s.set_write_gate(None)


async def test_without_leader_election_every_runnable_starts_in_order() -> None:
    manager = Manager.build(None)
    started: list[str] = []
    manager.add(Runnable("reconcile", _recorder(started, "reconcile")))
    manager.add(Runnable("watch", _recorder(started, "watch"), needs_leader=False))
    manager.add(Runnable("runs", _recorder(started, "runs")))
    try:
        await manager.start()
        # What every replica runs first, then the writers in the order they were added.
        assert started == ["watch", "reconcile", "runs"] and manager.started
    finally:
        await manager.stop()
        k8s.set_write_gate(None)


async def test_a_periodic_loop_survives_a_failed_pass_and_runs_again_when_poked() -> None:
    passes: list[int] = []

    async def tick() -> None:
        passes.append(len(passes))
        if len(passes) == 1:
            raise RuntimeError("the apiserver went away")

    loop = Periodic("test", tick, every=3600.0)
    manager = Manager.build(None)
    manager.add(loop)
    try:
        await manager.start()
        await asyncio.sleep(0.05)
        assert passes == [0]  # the first pass at once (it failed)
        loop.poke()
        await asyncio.sleep(0.05)
        assert passes == [0, 1]  # the loop lived on; the poke did not wait an hour
    finally:
        await manager.stop()
        k8s.set_write_gate(None)
    assert all(t.done() for t in manager.tasks) and not manager.tasks


async def test_a_graceful_stop_drains_the_writers_before_the_lease_is_handed_over() -> None:
    """The skill library's last flush and the reconcile controller's in-flight work write
    at a graceful stop: after the hand-over the write gate refused them (the library's
    last changes were lost on every rolling update)."""
    lease = LeaseSettings("l", "ns", "me", lease_duration=12, renew_deadline=8, retry_period=2)
    manager = Manager.build(lease)
    seen: list[tuple[str, str | None]] = []
    passes: list[str] = []

    async def flush() -> None:
        passes.append("pass")
        await asyncio.sleep(3600)  # a pass still running when the stop comes

    async def last_flush() -> None:
        seen.append(("library", k8s.write_refusal()))

    async def finish_reconciles() -> None:
        seen.append(("reconcile", k8s.write_refusal()))

    async def start() -> None:
        return None

    manager.add(Runnable("reconcile", start, drain=finish_reconciles))
    manager.add(Periodic("skill library", flush, every=3600.0, last=last_flush))
    manager.add(Runnable("watch", start, needs_leader=False))
    released: list[str | None] = []

    async def release() -> None:
        released.append(k8s.write_refusal())
        manager.leadership.leading = False

    try:
        await manager.start()
        # As if it won the election (no apiserver here): what the elector does.
        manager.leadership.start_leading()
        await manager._start_writers()
        await asyncio.sleep(0.05)
        assert passes == ["pass"]
        assert manager.elector is not None
        manager.elector.release = release  # type: ignore[method-assign]
        await manager.stop()
    finally:
        k8s.set_write_gate(None)
    # The last added drains first, every write allowed, and only then the hand-over.
    assert seen == [("library", None), ("reconcile", None)]
    assert released == [None]
