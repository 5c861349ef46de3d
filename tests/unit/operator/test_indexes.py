"""The in-memory indexes keep the newest version of an object, whatever order bodies come in,
and index each version once."""

from __future__ import annotations

import time
from typing import Any

from swarmkit_operator.indexes import Indexes, IndexId, IndexSpec, Listing, Resource
from swarmkit_operator.watching import Reflector


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


def named(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(obj, metadata=dict(obj["metadata"], name=name))


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


def test_the_version_already_indexed_is_not_indexed_again() -> None:
    # A restart: the start-up LIST fills the indexes, then the watch streams deliver the
    # same listing (and every resync lists what did not change). One version, one indexing.
    calls: list[str] = []

    def counted(name: str, meta: dict[str, Any], **_: Any) -> dict[Any, Any]:
        calls.append(name)
        return {name: meta.get("generation")}

    idx = Indexes([IndexSpec(IndexId.SKILL_VIEWS, "skills", counted, {})])
    idx.update("skills", body("700", 4), listed=True)
    idx.update("skills", body("700", 4), listed=True)
    idx.apply("skills", None, body("700", 4))  # a stream's delivery of a listing
    assert calls == ["hot"]
    assert idx.values(IndexId.SKILL_VIEWS, "hot") == [4]
    idx.update("skills", body("701", 5))  # a new version is indexed
    assert calls == ["hot", "hot"]
    assert idx.values(IndexId.SKILL_VIEWS, "hot") == [5]


def test_the_version_delivered_again_still_counts_as_refreshed_for_a_prune() -> None:
    # A prune spares what an event refreshed after its LIST started: the same version
    # delivered again is such an event, even though nothing is recomputed.
    idx = indexes()
    idx.update("skills", body("700", 4), listed=True)
    listed_at = time.monotonic()
    idx.update("skills", body("700", 4), listed=True)
    assert idx.prune("skills", present=set(), listed_at=listed_at) == 0
    assert idx.values(IndexId.SKILL_VIEWS, "hot") == [4]


async def test_a_restart_indexes_each_listed_object_once() -> None:
    # The start-up: populate's LIST indexes every object, then the stream seeded with that
    # listing delivers each one again (to queue its check); no object is indexed twice.
    calls: list[str] = []

    def counted(name: str, meta: dict[str, Any], **_: Any) -> dict[Any, Any]:
        calls.append(name)
        return {name: meta.get("generation")}

    idx = Indexes([IndexSpec(IndexId.SKILL_VIEWS, "skills", counted, {})])
    items = [named(body(str(100 + i), 1, uid=f"u{i}"), f"s{i}") for i in range(50)]
    for item in items:
        idx.update("skills", item, listed=True)  # what populate does

    async def deliver(type_: str | None, obj: dict[str, Any]) -> None:
        idx.apply("skills", type_, obj)

    stream = Reflector(Resource("swarmkit.dev", "v1alpha1", "skills"), None, deliver)
    stream.seed_from([Listing("skills", None, False, "150", items)])
    assert await stream.list() == "150"
    assert sorted(calls) == sorted(f"s{i}" for i in range(50))


def managers_of(meta: dict[str, Any], **_: Any) -> dict[Any, Any]:
    return {meta["name"]: tuple(m["manager"] for m in meta.get("managedFields") or ())}


async def test_a_slim_start_up_listing_drops_managed_fields_after_indexing(fake: Any) -> None:
    """The listing a stream starts from is held until delivered, every object at once: a
    slim one keeps no ``managedFields`` (most of a decoded Skill), while the index was
    computed from the whole object; a resource not slim keeps them."""
    from swarmkit_operator.handlers.root import _slim, wiring
    from swarmkit_operator.indexes import populate

    managed = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    for kind in ("Skill", "Review"):
        fake.create(
            {
                "apiVersion": "swarmkit.dev/v1alpha1",
                "kind": kind,
                "metadata": {"name": "one", "namespace": "ns", "managedFields": managed},
                "spec": {},
            }
        )
    idx = Indexes(
        [
            IndexSpec(IndexId.SKILL_VIEWS, "skills", managers_of, {}),
            IndexSpec(IndexId.RUNS_REVIEWS_BY_RUN, "reviews", managers_of, {}),
        ]
    )
    listings: list[Listing] = []
    await populate(idx, ["ns"], listings=listings, slim=_slim(wiring()))
    assert idx.values(IndexId.SKILL_VIEWS, "one") == [("kubectl",)]
    by = {listing.resource: listing.items for listing in listings}
    assert "managedFields" not in by["skills"][0]["metadata"]
    assert by["reviews"][0]["metadata"]["managedFields"][0]["manager"] == "kubectl"
