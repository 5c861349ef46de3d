"""Events under control (issue 43): the same reason about the same object within the window
is one Event with a count, a burst queued at once is one write, an object's first status
posts no Normal Event (its Warnings stay), and a later transition still posts one."""

from __future__ import annotations

import asyncio

from swarmkit_api.conditions import READY
from swarmkit_operator import k8s
from swarmkit_operator.k8s.events import EventCorrelator, coalesce, correlation_key
from tests.support.fake_k8s import FakeApi
from tests.support.reconciling import Reconciling

from .reconcile_cases import NS, WORKSPACE, condition, events, skill_spec

INVOLVED = {
    "apiVersion": "swarmkit.dev/v1alpha1",
    "kind": "Skill",
    "name": "s",
    "namespace": NS,
    "uid": "uid-s",
}


def event_writes(api: FakeApi) -> list[str]:
    return [verb for verb, path in api.writes() if "/events" in path]


def test_a_repeat_within_the_window_is_the_same_entry_and_a_late_one_a_new_one() -> None:
    correlator = EventCorrelator(window=600.0, max_entries=2)
    key = correlation_key(INVOLVED, "Warning", "SkillNotFound")
    first = correlator.occurred(key, "one", now=0.0)
    again = correlator.occurred(key, "two", now=599.0)
    assert again is first and again.count == 2 and again.message == "two"
    late = correlator.occurred(key, "three", now=599.0 + 601.0)
    assert late is not first and late.count == 1
    # another reason of the same object is another Event
    other = correlator.occurred(correlation_key(INVOLVED, "Warning", "Other"), "x", now=1.0)
    assert other is not late
    # the LRU keeps max_entries keys: the oldest is forgotten
    correlator.occurred(correlation_key({**INVOLVED, "name": "t"}, "Normal", "R"), "x", 2.0)
    assert len(correlator) == 2
    assert correlator.occurred(key, "four", now=1201.0).count == 1


def test_coalesce_folds_a_queued_burst_per_object_and_reason() -> None:
    other = {**INVOLVED, "name": "t", "uid": "uid-t"}
    batch = [(INVOLVED, "Warning", "Failed", f"try {i}") for i in range(5)]
    batch.insert(2, (other, "Warning", "Failed", "t failed"))
    assert coalesce(batch) == [
        (INVOLVED, "Warning", "Failed", "try 4", 5),
        (other, "Warning", "Failed", "t failed", 1),
    ]


async def test_repeats_raise_the_count_of_one_event(api: FakeApi) -> None:
    for i in range(10):
        await k8s.post_event(INVOLVED, "Warning", "SkillNotFound", f"attempt {i}")
    posted = [e for e in api.list("Event", NS) if e["involvedObject"]["uid"] == "uid-s"]
    assert len(posted) == 1
    assert posted[0]["count"] == 10
    assert posted[0]["message"] == "attempt 9"
    assert event_writes(api) == ["POST"] + ["PATCH"] * 9
    # another reason is its own Event
    await k8s.post_event(INVOLVED, "Warning", "TooLarge", "big")
    assert sorted(e["reason"] for e in api.list("Event", NS)) == ["SkillNotFound", "TooLarge"]


async def test_a_concurrent_burst_is_one_post_and_at_most_one_patch(api: FakeApi) -> None:
    await asyncio.gather(
        *(k8s.post_event(INVOLVED, "Warning", "EffectFailed", f"#{i}") for i in range(50))
    )
    (posted,) = api.list("Event", NS)
    assert posted["count"] == 50
    assert event_writes(api) in (["POST"], ["POST", "PATCH"])


async def test_an_expired_event_is_posted_anew(api: FakeApi) -> None:
    await k8s.post_event(INVOLVED, "Warning", "SkillNotFound", "first")
    (posted,) = api.list("Event", NS)
    api.delete("Event", NS, posted["metadata"]["name"])  # the apiserver's TTL removed it
    await k8s.post_event(INVOLVED, "Warning", "SkillNotFound", "second")
    (again,) = api.list("Event", NS)
    assert again["metadata"]["name"] != posted["metadata"]["name"]
    assert again["message"] == "second"


async def test_the_controller_posts_a_queued_burst_as_one_event(
    api: FakeApi, operator: Reconciling
) -> None:
    ctl = operator.ctl
    assert ctl is not None
    for i in range(200):
        ctl.post_event(dict(INVOLVED), "Warning", "EffectFailed", f"#{i}")
    for _ in range(200):
        await asyncio.sleep(0.01)
        posted = api.list("Event", NS)
        if posted and posted[0]["count"] == 200:
            break
    (posted_event,) = api.list("Event", NS)
    assert posted_event["count"] == 200 and posted_event["message"] == "#199"
    assert len(event_writes(api)) <= 3


async def test_a_new_object_posts_no_normal_event_but_its_warnings_and_changes_do(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    # Ready on its first status: the condition says so, no Event.
    api.apply_spec("Skill", NS, "fine", skill_spec(instructions="# Fine\n"))
    # Not Ready on its first status: the Warning stays.
    api.apply_spec("Agent", NS, "waiting", {"skills": ["later"]})
    await operator.settle()
    assert condition(api, "Skill", "fine", READY)["status"] == "True"
    assert events(api, "fine") == []
    assert ("Warning", "SkillNotFound") in events(api, "waiting")
    assert not [e for e in events(api, "waiting") if e[0] == "Normal"]

    # The missing skill appears: the Agent recovers, and that change is a Normal Event.
    api.apply_spec("Skill", NS, "later", skill_spec(instructions="# Later\n"))
    await operator.settle()
    for _ in range(100):  # the Event poster runs beside the workers
        if any(t == "Normal" for t, _ in events(api, "waiting")):
            break
        await asyncio.sleep(0.02)
    assert condition(api, "Agent", "waiting", READY)["status"] == "True"
    assert any(t == "Normal" for t, _ in events(api, "waiting"))
