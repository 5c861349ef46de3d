"""The in-memory indexes keep the newest version of an object, whatever order bodies come in."""

from __future__ import annotations

from typing import Any

from swarmkit_operator.indexes import Indexes, IndexId, IndexSpec


def generation_by_name(name: str, meta: dict[str, Any], **_: Any) -> dict[Any, Any]:
    return {name: meta.get("generation")}


def body(rv: str, generation: int, uid: str = "u1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "hot",
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": rv,
            "generation": generation,
        },
        "spec": {},
    }


def indexes() -> Indexes:
    return Indexes([IndexSpec(IndexId.SKILL_VIEWS, "skills", generation_by_name, {})])


def test_a_relist_older_than_the_watch_does_not_roll_an_object_back() -> None:
    # The watch showed generation 564 (rv 5510); a LIST that started earlier then returns
    # generation 557 (rv 5490). A reconcile reading the index must see 564.
    idx = indexes()
    idx.update("skills", body("5510", 564))
    idx.update("skills", body("5490", 557))
    assert idx.values(IndexId.SKILL_VIEWS, "hot") == [564]
    idx.update("skills", body("5520", 565))
    assert idx.values(IndexId.SKILL_VIEWS, "hot") == [565]


def test_a_deleted_and_recreated_object_is_indexed_afresh() -> None:
    idx = indexes()
    idx.update("skills", body("900", 3))
    idx.delete("skills", "u1")
    idx.update("skills", body("100", 1))  # a new object (after a restore: lower revision)
    assert idx.values(IndexId.SKILL_VIEWS, "hot") == [1]
    idx.update("skills", body("50", 1, uid="u2"))  # another uid is another object
    assert sorted(idx.values(IndexId.SKILL_VIEWS, "hot")) == [1, 1]


def test_non_numeric_resource_versions_are_never_compared() -> None:
    idx = indexes()
    idx.update("skills", body("b", 2))
    idx.update("skills", body("a", 1))
    assert idx.values(IndexId.SKILL_VIEWS, "hot") == [1]
