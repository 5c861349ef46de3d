"""The reconcile work queue: dedupe, delays, priorities, one worker per key."""

from __future__ import annotations

import asyncio

from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers.common import Controller, _same
from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.indexes import IndexId
from swarmkit_operator.reconcile.controller import ControllerSettings
from swarmkit_operator.reconcile.controller import reconcile_queue as queue_of

PRIORITY = wiring().priority  # the kinds' declared lanes


def reconcile_queue():  # type: ignore[no-untyped-def]
    return queue_of(PRIORITY)


async def test_dedupes_and_orders_by_priority() -> None:
    q = reconcile_queue()
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
    q = reconcile_queue()
    q.add(("Skill", "ns", "s"), delay=10)
    q.add(("Skill", "ns", "s"), delay=0.01)
    key = await asyncio.wait_for(q.get(), 1)
    assert key == ("Skill", "ns", "s")
    q.done(key)
    q.add(("Skill", "ns", "x"), delay=0.05)
    assert q.pending(("Skill", "ns", "x"))
    assert await asyncio.wait_for(q.get(), 1) == ("Skill", "ns", "x")


async def test_a_key_added_while_processing_runs_again_afterwards() -> None:
    q = reconcile_queue()
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
    ctl = wiring().controller(OperatorConfig())
    key = ("Skill", "ns", "s")
    assert not ctl.pending(key, {"observed": 1, "generation": 1})
    assert ctl.pending(key, {"observed": 1, "generation": 2})
    ctl.book.awaiting[key] = ("42", 1e18, {"version": "x"})
    assert ctl.pending(key, None)
    ctl.observed(key, {"metadata": {"resourceVersion": "42"}})
    assert not ctl.pending(key, None)


def test_status_comparison_treats_empty_as_absent() -> None:
    assert _same({"a": None, "b": [], "c": 1}, {"c": 1})
    assert not _same({"c": 2}, {"c": 1})
    assert _same({"scripts": []}, {"scripts": None})


def test_indexes_track_updates_and_deletes() -> None:
    from swarmkit_operator.handlers.common import Indexes, IndexSpec

    def by_grant(
        body: dict[str, object], namespace: str, name: str, **_: object
    ) -> dict[object, str]:
        spec = body.get("spec") or {}
        assert isinstance(spec, dict)
        return {(namespace, g): name for g in spec.get("skills", [])}

    idx = Indexes([IndexSpec(IndexId.AGENT_BY_GRANT, "agents", by_grant)])

    def agent(uid: str, name: str, skills: list[str]) -> dict[str, object]:
        return {
            "metadata": {"uid": uid, "name": name, "namespace": "ns"},
            "spec": {"skills": skills},
        }

    idx.update("agents", agent("u1", "a1", ["s1", "s2"]))
    idx.update("agents", agent("u2", "a2", ["s1"]))
    assert sorted(idx.values(IndexId.AGENT_BY_GRANT, ("ns", "s1"))) == ["a1", "a2"]
    idx.update("agents", agent("u1", "a1", ["s2"]))  # a grant removed
    assert idx.values(IndexId.AGENT_BY_GRANT, ("ns", "s1")) == ["a2"]
    idx.delete("agents", "u2")
    assert idx.values(IndexId.AGENT_BY_GRANT, ("ns", "s1")) == []
    assert ("ns", "s1") not in idx.keys(IndexId.AGENT_BY_GRANT)
    assert idx.prune("agents", present=set(), listed_at=0.0) == 0  # touched after the LIST
    assert idx.prune("agents", present=set(), listed_at=1e18) == 1
    assert idx.values(IndexId.AGENT_BY_GRANT, ("ns", "s2")) == []


def test_label_filters() -> None:
    from swarmkit_operator.handlers.common import PRESENT, IndexSpec

    spec = IndexSpec(
        IndexId.RENDERED_CONFIG_MAPS, "configmaps", lambda **_: {}, {"a": PRESENT, "b": "1"}
    )
    assert spec.matches({"a": "anything", "b": "1"})
    assert not spec.matches({"b": "1"})
    assert not spec.matches({"a": "", "b": "2"})
    assert spec.selector == "a,b=1"


async def test_deferred_keys_are_woken_when_their_input_settles() -> None:
    ctl = wiring().controller(OperatorConfig())
    skill, agent = ("Skill", "ns", "s"), ("Agent", "ns", "a")
    ctl.queue.add(skill)
    ctl.book.waiters[skill] = {agent}
    ctl._wake(skill)  # still queued: nothing yet
    assert not ctl.queue.pending(agent)
    assert await ctl.queue.get() == skill
    ctl.book.awaiting[skill] = ("", 1e18, {"version": "v2"})
    ctl.queue.done(skill)
    ctl._wake(skill)  # its write is not visible yet
    assert not ctl.queue.pending(agent)
    ctl.observed(skill, {"metadata": {"resourceVersion": "9"}, "status": {"version": "v2"}})
    assert ctl.queue.pending(agent)
    assert skill not in ctl.book.waiters


async def test_background_keys_wait_until_nothing_else_is_due() -> None:
    q = reconcile_queue()
    checks = [("Skill", "ns", f"old-{i}") for i in range(3)]
    for key in checks:
        q.add(key, background=True)
    q.add(("Topology", "ns", "t"), background=True)
    q.add(("Agent", "ns", "new"))  # an edit after the restart's listing
    assert len(q) == 5 and all(q.pending(k) for k in checks)
    first = await q.get()
    assert first == ("Agent", "ns", "new")  # ahead of the Skills' checks despite priority
    q.done(first)
    q.add(("Skill", "ns", "old-2"))  # now it matters: to the front
    got = [await q.get() for _ in range(4)]
    assert got == [
        ("Skill", "ns", "old-2"),
        ("Skill", "ns", "old-0"),
        ("Skill", "ns", "old-1"),
        ("Topology", "ns", "t"),  # background keys keep the kinds' order too
    ]
    for key in got:
        q.done(key)
    assert len(q) == 0


async def test_promote_and_delays_of_background_keys() -> None:
    q = reconcile_queue()
    a, b = ("Skill", "ns", "a"), ("Skill", "ns", "b")
    q.add(a, background=True)
    q.add(b, background=True)
    q.add(b, delay=5)  # a later retry does not pull it forward...
    q.promote(b)  # ...but a reconcile waiting for it does
    assert await q.get() == b
    q.promote(b)  # taken: nothing to promote, no duplicate
    assert await q.get() == a
    q.done(a)
    q.done(b)
    assert len(q) == 0


async def test_listed_objects_with_current_status_are_checked_in_the_background() -> None:
    ctl = wiring().controller(OperatorConfig())

    def body(name: str, observed: int | None) -> dict[str, object]:
        meta = {"uid": name, "name": name, "namespace": "ns", "generation": 2}
        return {"metadata": meta, "status": {"observedGeneration": observed}}

    def view_of(view: object) -> tuple[object, bool]:
        return (view, True)

    for name, observed in (("settled", 2), ("edited", 1)):
        ctl.observe_event("Skill", "skills", None, body(name, observed), "ns", name, view_of)
    ctl.observe_event("Skill", "skills", "ADDED", body("new", None), "ns", "new", view_of)
    order = [await ctl.queue.get() for _ in range(3)]
    assert [k[2] for k in order] == ["edited", "new", "settled"]


async def test_objects_changed_while_no_operator_ran_are_enqueued_at_start_up() -> None:
    ctl = wiring().controller(OperatorConfig())

    def skill(name: str, generation: int, observed: int | None) -> dict[str, object]:
        meta = {"uid": name, "name": name, "namespace": "ns", "generation": generation}
        return {"metadata": meta, "status": {"observedGeneration": observed}}

    ctl.indexes.update("skills", skill("settled", 3, 3))
    ctl.indexes.update("skills", skill("edited", 4, 3))
    ctl.indexes.update("skills", skill("created", 1, None))
    assert ctl.enqueue_unsettled() == 2
    got = {(await ctl.queue.get())[2] for _ in range(2)}
    assert got == {"edited", "created"} and len(ctl.queue) == 0


async def test_a_backlog_of_checks_that_write_nothing_does_not_starve_the_event_loop() -> None:
    """After a restart every object is queued for a background check, and a check that
    finds nothing to write awaits nothing real: the watch streams and the probes must
    still run while the workers go through thousands of them."""
    done: list[str] = []

    async def check(ctl: Controller, namespace: str, name: str, force: bool) -> str:
        done.append(name)
        return "unchanged"

    ctl = Controller(
        config=OperatorConfig(),
        settings=ControllerSettings(workers=4, resync_seconds=0),
        reconcilers={"Skill": check},
    )
    try:
        for i in range(3000):
            ctl.enqueue("Skill", "ns", f"o-{i}", background=True)
        ticks_at: list[int] = []

        async def other_work() -> None:  # a watch stream, a probe: anything on the loop
            while len(done) < 3000:
                ticks_at.append(len(done))
                await asyncio.sleep(0)

        await ctl.start()
        await asyncio.wait_for(other_work(), 10)
        assert len(done) == 3000
        # It ran all along, not once the backlog was through.
        assert len([t for t in ticks_at if t < 1500]) > 100, ticks_at[:5]
    finally:
        await ctl.stop()


async def test_a_lane_at_its_limit_lets_the_other_lanes_keys_through() -> None:
    """The Runs controller's shape: Runs to start (lane 0) and Runs to update (lane 1),
    each with its own budget of concurrent reconciles, so a flood of updates never keeps a
    new Run from starting, and neither exceeds its budget."""
    from swarmkit_operator.runtime.workqueue import WorkQueue

    starting = {"s1", "s2"}
    q: WorkQueue[str] = WorkQueue(lane=lambda k: 0 if k in starting else 1, lanes=2, limits=(1, 2))
    for key in ("u1", "u2", "u3", "s1", "s2"):
        q.add(key)
    assert await q.get() == "s1"  # lane 0 first
    assert await q.get() == "u1"  # lane 0 at its limit (1): lane 1 goes on
    assert await q.get() == "u2"
    blocked = asyncio.create_task(q.get())  # both lanes at their limits
    await asyncio.sleep(0.02)
    assert not blocked.done()
    q.done("u1")  # an update finished: lane 1 has room again, lane 0 still full
    assert await asyncio.wait_for(blocked, 1) == "u3"
    nxt = asyncio.create_task(q.get())
    await asyncio.sleep(0.02)
    assert not nxt.done()
    q.done("s1")
    assert await asyncio.wait_for(nxt, 1) == "s2"
    assert q.busy == 3 and len(q) == 0
