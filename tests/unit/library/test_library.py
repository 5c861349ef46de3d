"""The skill library: runs rolled up once each, version history, batched writes, restarts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from swarmkit_operator import k8s, metrics
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.indexes import Indexes
from swarmkit_operator.library import SkillLibrary
from swarmkit_operator.library import records as rec

from .fixtures import agent, indexes, run, skill, usage


class FakeApi:
    """Records the library's writes (the one package that talks to the API is k8s)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, idx: Indexes) -> None:
        self.maps: list[dict[str, Any]] = []
        #: What the library said it knew of each ConfigMap it wrote (False: create it).
        self.existed: list[bool] = []
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.idx = idx

        async def put_config_map(manifest: dict[str, Any], exists: bool = True) -> None:
            self.maps.append(manifest)
            self.existed.append(exists)

        async def patch_status(
            plural: str, ns: str, name: str, patch: dict[str, Any], manager: str
        ) -> str:
            assert manager == k8s.LIBRARY_MANAGER  # the library owns usage, nothing else
            self.patches.append((ns, name, patch))
            return "2"

        async def list_config_maps(ns: str | None, selector: str) -> list[dict[str, Any]]:
            return self.maps[-1:]

        monkeypatch.setattr(k8s, "put_config_map", put_config_map)
        monkeypatch.setattr(k8s, "patch_status", patch_status)
        monkeypatch.setattr(k8s, "list_config_maps", list_config_maps)


def library(idx: Indexes, limit: int = 10) -> SkillLibrary:
    return SkillLibrary(
        OperatorConfig(skill_history_limit=limit), idx, clock=lambda: "2026-12-03T08:00:00Z"
    )


def test_a_run_counts_once_granted_loaded_and_scripts() -> None:
    lib = rec.Library()
    status = run(
        "r1",
        granted=["triage", "style"],
        usage=[
            usage("lead", ["triage"], [("triage", "scripts/c.py", 3, 1)]),
            usage("worker", ["triage"]),
        ],
    )["status"]
    facts = rec.run_facts("uid-1", status)
    assert facts is not None
    assert rec.count_run(lib, facts) == {"triage", "style"}
    assert rec.count_run(lib, facts) == set()  # seen again (a restart): not counted twice
    triage, style = lib.skills["triage"].usage, lib.skills["style"].usage
    assert (triage.runs_granted, triage.runs_loaded, triage.loads) == (1, 1, 2)
    assert (triage.script_runs, triage.script_failures) == (3, 1)
    assert triage.last_loaded == "2026-12-03T08:10:00Z"
    assert (style.runs_granted, style.runs_loaded, style.load_rate) == (1, 0, 0.0)


def test_unfinished_and_awaiting_review_runs_are_not_counted() -> None:
    status = run("r", granted=["triage"], usage=[usage("a", ["triage"])])["status"]
    status["conditions"][0].update(status="Unknown", reason="AwaitingReview")
    assert rec.run_facts("u", status) is None
    status["conditions"] = []
    assert rec.run_facts("u", status) is None


def test_history_keeps_n_versions_and_the_agents_pinned_to_each() -> None:
    record = rec.SkillRecord()
    for i in range(5):
        rec.see_version(record, f"{i}" * 64, f"t{i}", limit=3)
    assert [v.content_hash[0] for v in record.history] == ["4", "3", "2"]
    assert rec.pin_agent(record, "3" * 64, "lead", "t9", limit=3)
    assert not rec.pin_agent(record, "3" * 64, "lead", "t9", limit=3)
    assert record.history[1].agents == ["lead"]
    # Back to an earlier content: it moves to the top, keeping its agents and first time.
    assert rec.see_version(record, "3" * 64, "t10", limit=3)
    assert (record.history[0].content_hash[0], record.history[0].first_seen) == ("3", "t3")


def test_the_config_map_round_trips_and_is_trimmed_to_fit() -> None:
    lib = rec.Library(counted={"u1"})
    record = lib.record("big")
    for i in range(40):
        rec.see_version(record, f"{i:064d}", f"t{i}", limit=40)
        record.history[0].agents = [f"agent-{j:05d}" for j in range(2000)]
    texts = rec.serialise(lib)
    assert list(texts) == [rec.CONFIG_MAP]  # one skill's history: trimmed, not sharded
    assert len(texts[rec.CONFIG_MAP].encode()) <= rec.MAX_CONFIG_MAP_BYTES
    back = rec.from_config_maps([rec.to_config_map("ns", n, t) for n, t in texts.items()])
    assert back.counted == {"u1"}
    assert 1 <= len(back.skills["big"].history) < 40
    assert back.skills["big"].history[0].content_hash == f"{39:064d}"  # the newest is kept


async def test_a_burst_of_runs_costs_one_config_map_write_and_one_patch_per_skill(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx = indexes()
    api = FakeApi(monkeypatch, idx)
    skills = [f"skill-{i}" for i in range(10)]
    for name in skills:
        idx.update("skills", skill(name))
    idx.update("agents", agent("lead", skills))
    lib = library(idx)
    lib.seed()
    await lib.flush()
    api.maps.clear()
    api.patches.clear()
    before = metrics.SKILL_LOADS.labels("ns", "skill-0")._value.get()
    for i in range(100):
        body = run(f"r{i}", granted=skills, usage=[usage("lead", skills[:5])])
        idx.update("runs", body)
        lib.run_seen("ns", body["metadata"]["uid"], body["status"])
    await lib.flush()

    assert len(api.maps) == 1
    assert len(api.patches) == 10  # one per skill, not one per run per skill (1,000)
    by_skill = {name: patch for _, name, patch in api.patches}
    assert by_skill["skill-0"]["usage"] == {
        "runsGranted": 100,
        "runsLoaded": 100,
        "loadRate": 1.0,
        "scriptRuns": 0,
        "scriptFailures": 0,
        "lastLoaded": "2026-12-03T08:10:00Z",
    }
    assert by_skill["skill-9"]["usage"]["loadRate"] == 0.0
    assert metrics.SKILL_LOADS.labels("ns", "skill-0")._value.get() - before == 100
    doc = json.loads(api.maps[0]["data"][rec.DATA_KEY])
    assert len(doc["counted"]) == 100


async def test_restart_reloads_and_does_not_count_a_run_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx = indexes()
    api = FakeApi(monkeypatch, idx)
    triage = skill("triage")
    idx.update("skills", triage)
    body = run("r1", granted=["triage"], usage=[usage("lead", ["triage"])])
    idx.update("runs", body)
    first = library(idx)
    first.seed()
    await first.flush()
    assert first.record("ns", "triage").usage.runs_loaded == 1  # type: ignore[union-attr]

    second = library(idx)  # a new process: the ConfigMap, then every object again
    await second.load()
    second.seed()
    second.run_seen("ns", body["metadata"]["uid"], body["status"])
    assert second.record("ns", "triage").usage.runs_loaded == 1  # type: ignore[union-attr]
    writes = len(api.maps) + len(api.patches)
    triage["status"]["usage"] = second.usage_field("ns", "triage")  # the first's write, seen
    idx.update("skills", triage)
    await second.flush()
    assert len(api.maps) + len(api.patches) == writes  # nothing changed: nothing written


async def test_a_deleted_skill_keeps_its_history(monkeypatch: pytest.MonkeyPatch) -> None:
    idx = indexes()
    api = FakeApi(monkeypatch, idx)
    lib = library(idx)
    lib.skill_seen("ns", "old", "1" * 64)
    lib.agent_seen(
        "ns",
        "lead",
        {"skills": ["old"]},
        {"resolvedSkills": [{"name": "old", "contentHash": "1" * 64}]},
    )
    lib.skill_seen("ns", "old", "2" * 64)
    lib.skill_deleted("ns", "old")
    await lib.flush()
    doc = json.loads(api.maps[-1]["data"][rec.DATA_KEY])
    old = doc["skills"]["old"]
    assert old["deletedAt"] == "2026-12-03T08:00:00Z"
    assert [v["contentHash"][0] for v in old["history"]] == ["2", "1"]
    assert old["history"][1]["agents"] == ["lead"]


def test_granted_by_follows_direct_and_composed_grants() -> None:
    idx = indexes()
    idx.update("skills", skill("part"))
    idx.update("skills", skill("whole", composes=["part"]))
    idx.update("agents", agent("a1", ["part"]))
    idx.update("agents", agent("a2", ["whole"]))
    lib = library(idx)
    assert lib.granting_agents("ns", "part") == {"a1", "a2"}
    assert rec.granted_by_field(lib.granting_agents("ns", "whole")) == {
        "count": 1,
        "agents": ["a2"],
    }
    # A new grant of the composed skill changes the grantedBy of its component too.
    assert lib.agent_seen("ns", "a3", {"skills": ["whole"]}, {}) == {"whole", "part"}
    assert lib.agent_seen("ns", "a3", {"skills": ["whole"]}, {}) == set()
    assert lib.agent_deleted("ns", "a3") == {"whole", "part"}
    many = rec.granted_by_field(f"agent-{i}" for i in range(9))
    assert many == {"count": 9, "agents": [f"agent-{i}" for i in range(5)]}


async def test_a_large_library_is_written_at_the_pace_of_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thousands of Skills make a library ConfigMap of hundreds of KiB: rewritten on every
    2 s flush it would load the apiserver during a bulk apply or a fan-out. It is written
    once per its size at the pace, the changes in between all land in the next write, and
    a graceful stop writes it at once."""
    from swarmkit_operator.library.store import MAP_WRITE_BYTES_PER_SECOND

    idx = indexes()
    api = FakeApi(monkeypatch, idx)
    now = [1000.0]
    lib = SkillLibrary(
        OperatorConfig(), idx, clock=lambda: "2026-12-03T08:00:00Z", monotonic=lambda: now[0]
    )
    for i in range(2000):
        lib.skill_seen("ns", f"skill-{i:04d}", f"{i:064x}")
    await lib.flush()
    assert len(api.maps) == 1
    size = len(api.maps[0]["data"][rec.DATA_KEY])
    pace = size / MAP_WRITE_BYTES_PER_SECOND
    assert pace > 2 * lib.flush_seconds  # large enough to be paced

    lib.skill_seen("ns", "late-1", "a" * 64)
    now[0] += pace / 2
    await lib.flush()
    assert len(api.maps) == 1  # not due yet: kept dirty, not dropped
    lib.skill_seen("ns", "late-2", "b" * 64)
    now[0] += pace / 2
    await lib.flush()
    assert len(api.maps) == 2
    written = json.loads(api.maps[1]["data"][rec.DATA_KEY])["skills"]
    assert {"late-1", "late-2"} <= set(written)

    lib.skill_seen("ns", "late-3", "c" * 64)
    await lib.stop()  # shutdown: written regardless of the pace
    assert len(api.maps) == 3
    assert "late-3" in json.loads(api.maps[2]["data"][rec.DATA_KEY])["skills"]


async def test_a_small_library_is_written_on_every_flush_that_changes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx = indexes()
    api = FakeApi(monkeypatch, idx)
    lib = SkillLibrary(OperatorConfig(), idx, monotonic=lambda: 1000.0)  # no time passes
    lib.skill_seen("ns", "one", "1" * 64)
    await lib.flush()
    lib.skill_seen("ns", "two", "2" * 64)
    await lib.flush()
    assert len(api.maps) == 2


def thousands_of_skills(count: int = 5000, hot_agents: int = 1000) -> rec.Library:
    """A namespace like the scale benchmark's: every skill pinned by a few agents, one
    hot skill pinned by ``hot_agents``, some usage."""
    lib = rec.Library(counted={f"run-{i}" for i in range(300)})
    for i in range(count):
        record = lib.record(f"skill-{i:05d}")
        rec.see_version(record, f"{i:064x}", "2026-12-03T08:00:00Z", limit=10)
        record.history[0].agents = [f"agent-{(i * 7 + j) % 1000:04d}" for j in range(5)]
        record.usage.runs_granted = i % 13
    lib.skills["skill-00000"].history[0].agents = [f"agent-{j:04d}" for j in range(hot_agents)]
    return lib


def test_a_library_past_one_config_map_is_sharded_not_trimmed() -> None:
    """5,000 skills do not fit in one ConfigMap (1 MiB): the records are split over
    shards by a hash of the name, every shard fits, and nothing is trimmed."""
    lib = thousands_of_skills()
    texts = rec.serialise(lib)
    assert lib.shards > 1 and len(texts) == lib.shards + 1
    assert all(len(t.encode()) <= rec.MAX_CONFIG_MAP_BYTES for t in texts.values())
    back = rec.from_config_maps([rec.to_config_map("ns", n, t) for n, t in texts.items()])
    assert back.shards == lib.shards
    assert back.counted == lib.counted
    assert len(back.skills) == 5000
    assert len(back.skills["skill-00000"].history[0].agents) == 1000
    assert back.skills["skill-04321"].usage.runs_granted == 4321 % 13


async def test_a_sharded_library_rewrites_only_the_shard_that_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx = indexes()
    api = FakeApi(monkeypatch, idx)
    now = [1000.0]
    lib = SkillLibrary(OperatorConfig(), idx, monotonic=lambda: now[0])
    lib.libraries["ns"] = thousands_of_skills()
    lib.dirty_maps.add(("ns", rec.CONFIG_MAP))
    await lib.flush()
    shards = lib.library("ns").shards
    assert shards > 1 and len(api.maps) == shards + 1  # sharded once, every part written
    assert api.maps[-1]["metadata"]["name"] == rec.CONFIG_MAP  # says how many shards: last
    api.maps.clear()

    lib.skill_seen("ns", "skill-01234", "f" * 64)  # a new version of one skill
    now[0] += 60
    await lib.flush()
    assert [m["metadata"]["name"] for m in api.maps] == [rec.part_of("skill-01234", shards)]
    doc = json.loads(api.maps[0]["data"][rec.DATA_KEY])
    assert doc["skills"]["skill-01234"]["history"][0]["contentHash"] == "f" * 64

    again = SkillLibrary(OperatorConfig(), idx)  # a restart reads every part back
    monkeypatch.setattr(k8s, "list_config_maps", lambda ns, selector: _listed(api, lib))
    await again.load()
    loaded = again.library("ns")
    assert loaded.shards == shards and len(loaded.skills) == 5000
    assert loaded.skills["skill-01234"].history[0].content_hash == "f" * 64


async def _listed(api: FakeApi, lib: SkillLibrary) -> list[dict[str, Any]]:
    return [rec.to_config_map(ns, name, text) for (ns, name), text in lib._written_maps.items()]


async def test_a_bulk_apply_writes_the_library_once_when_its_namespace_settles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While Skills or Agents of the namespace are not reconciled yet the library keeps
    changing (each status written adds what it records): written before they settle, it
    was written again (23 rewrites of ~900 KiB at 20,000 Skills). A namespace that never
    settles still has its library written, after SETTLE_LIMIT_SECONDS."""
    from swarmkit_operator.library.store import SETTLE_LIMIT_SECONDS

    idx = indexes()
    api = FakeApi(monkeypatch, idx)
    now = [1000.0]
    lib = SkillLibrary(OperatorConfig(), idx, monotonic=lambda: now[0])
    applied = [skill(f"skill-{i}", content_hash=f"{i:064x}") for i in range(3)]
    for body in applied:  # created: no status yet
        idx.update("skills", {**body, "status": {}})
    for i, body in enumerate(applied):  # reconciled one by one, a flush between each
        idx.update("skills", body)
        lib.skill_seen("ns", body["metadata"]["name"], f"{i:064x}")
        now[0] += lib.flush_seconds
        await lib.flush()
        assert len(api.maps) == (1 if i == len(applied) - 1 else 0)
    written = json.loads(api.maps[0]["data"][rec.DATA_KEY])["skills"]
    assert set(written) == {"skill-0", "skill-1", "skill-2"}  # every version, one write

    idx.update("skills", {**skill("stuck"), "status": {}})  # never reconciled
    lib.skill_seen("ns", "skill-0", "f" * 64)
    now[0] += SETTLE_LIMIT_SECONDS - 1
    await lib.flush()
    assert len(api.maps) == 1  # still settling
    now[0] += 1
    await lib.flush()
    assert len(api.maps) == 2  # not held past the bound
    assert idx.unsettled(("skills",), "ns") == 1
    assert api.existed == [False, True]  # created, then replaced: no refused PUT first


def test_a_namespace_gone_before_its_library_was_written_leaves_nothing_behind() -> None:
    idx = indexes()
    lib = SkillLibrary(OperatorConfig(), idx, monotonic=lambda: 1000.0)
    lib.skill_seen("gone", "one", "1" * 64)  # changed, never written
    assert ("gone", rec.CONFIG_MAP) in lib._dirty_since
    lib._forget("gone")
    assert not lib.dirty_maps and not lib._dirty_since
