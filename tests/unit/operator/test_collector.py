"""The start-up LIST fills the indexes with the cyclic collector paused, and leaves what it
indexed frozen (runtime/allocator.py): no collection walks the listed objects while they
arrive or after, the cost that grew faster than the objects on a restart (issue 43)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_operator.handlers.root import _populated
from swarmkit_operator.indexes import Indexes, IndexId, IndexSpec
from swarmkit_operator.runtime.allocator import collector_paused


@pytest.fixture
def collector() -> Iterator[None]:
    """The test process's collector as it was, whatever the test froze or switched."""
    enabled = gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
        else:
            gc.disable()


def walked_by_a_collection(obj: object) -> bool:
    """Whether a collection would walk ``obj``: a frozen object is in no generation (and
    one the collector does not track, a dict of strings, is never walked: not a case)."""
    assert gc.is_tracked(obj)
    return any(o is obj for o in gc.get_objects())


async def test_the_start_up_listing_indexes_with_the_collector_paused_and_freezes_it(
    fake: Any, collector: None
) -> None:
    for i in range(20):
        fake.create(
            {
                "apiVersion": "swarmkit.dev/v1alpha1",
                "kind": "Skill",
                "metadata": {"name": f"s{i}", "namespace": "ns"},
                "spec": {"description": f"skill {i}"},
            }
        )
    collecting: list[bool] = []

    def view(name: str, spec: dict[str, Any], **_: Any) -> dict[Any, Any]:
        collecting.append(gc.isenabled())
        return {name: {"description": spec["description"], "tags": ["a", "b"]}}

    gc.enable()
    indexes = Indexes([IndexSpec(IndexId.SKILL_VIEWS, "skills", view, {})])
    listings = await _populated(indexes, ["ns"], frozenset())

    assert collecting == [False] * 20
    assert gc.isenabled()
    indexed = indexes.values(IndexId.SKILL_VIEWS, "s7")[0]
    assert indexed == {"description": "skill 7", "tags": ["a", "b"]}
    assert not walked_by_a_collection(indexed)
    assert not walked_by_a_collection(listings[0].items[7])
    # Made after the start-up: collected as ever.
    later = {"made": ["after"]}
    assert walked_by_a_collection(later)


def test_a_paused_collector_is_left_as_it_was_found_and_a_failed_block_freezes_nothing(
    collector: None,
) -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # it was off: a pause does not switch it on
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        debris = {"listed": ["object"]}
        raise RuntimeError("the API went away")
    assert gc.isenabled()
    # A failed start's objects are not frozen: a cycle among them (its traceback's frames
    # hold them) stays collectable.
    assert walked_by_a_collection(debris)
