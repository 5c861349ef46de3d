"""The in-memory indexes keep the newest version of an object, whatever order bodies come in,
and index each version once."""

from __future__ import annotations

import time
from typing import Any

import pytest

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


def new_object(kind: str, name: str, namespace: str = "team-a") -> dict[str, Any]:
    """An object as a bulk apply creates it: no status written yet."""
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace, "uid": name}}


def test_a_burst_ends_when_too_few_of_its_arrivals_stay_within_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    idx = Indexes([])
    for i in range(30):  # 3 Skills and, in between, 3 Agents a second for 5 s
        clock[0] = 100.0 + i / 6
        idx.update("skills" if i % 2 else "agents", new_object("x", f"o{i}"))
    clock[0] = 105.0
    assert idx.arrived(("skills", "agents"), "team-a", 2.0) == 12
    # 10 must stay within 2 s: the 10th latest arrival (i = 20, t = 103.33) leaves at 105.33
    assert idx.burst_ends(("skills", "agents"), "team-a", 2.0, 10) == pytest.approx(
        105.333, abs=1e-3
    )
    # one kind alone has 15: its 10th latest (i = 11, t = 101.83) left at 103.83
    assert idx.burst_ends(("skills",), "team-a", 2.0, 10) == pytest.approx(103.833, abs=1e-3)
    # fewer arrivals than asked for in all: over already
    assert idx.burst_ends(("skills", "agents"), "team-a", 2.0, 31) == 105.0
    assert idx.burst_ends(("skills",), "elsewhere", 2.0, 10) == 105.0
    # an object with its status written (a restart's listing) is no arrival
    written = new_object("x", "listed") | {"status": {"observedGeneration": 1}}
    idx.update("skills", written)
    assert idx.arrived(("skills",), "team-a", 2.0) == 6


def test_a_namespace_settles_when_every_object_shows_its_generation_reconciled() -> None:
    idx = Indexes([])

    def skill(name: str, generation: int, observed: int | None, ns: str = "team-a") -> None:
        obj = new_object("Skill", name, ns)
        obj["metadata"]["generation"] = generation
        if observed is not None:
            obj["status"] = {"observedGeneration": observed}
        idx.update("skills", obj)

    skill("new", 1, None)  # created, not reconciled yet
    skill("edited", 2, 1)  # its edit not reconciled yet
    skill("ready", 1, 1)
    skill("other", 1, None, ns="team-b")
    assert idx.unsettled(("skills", "agents"), "team-a") == 2
    assert idx.unsettled(("agents",), "team-a") == 0
    skill("new", 1, 1)
    skill("new", 1, 1)  # the same again: counted once either way
    assert idx.unsettled(("skills",), "team-a") == 1
    idx.delete("skills", "edited")  # deleted before its reconcile
    assert idx.unsettled(("skills",), "team-a") == 0
    assert idx.unsettled(("skills",), "team-b") == 1
    skill("ready", 2, 1)  # edited again: not settled until reconciled
    assert idx.unsettled(("skills",), "team-a") == 1


def test_settling_is_tracked_for_the_kinds_the_library_records_only() -> None:
    """A ConfigMap (or Pod, Job) shows no observedGeneration: tracked, it would count as
    unsettled for as long as it lives, every render of the cluster."""
    idx = Indexes([])
    idx.update("configmaps", new_object("ConfigMap", "render"))
    assert idx._unsettled.get("configmaps") is None
    with pytest.raises(ValueError, match="configmaps"):
        idx.unsettled(("configmaps",), "team-a")
