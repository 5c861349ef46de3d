"""The skill library's records, and the pure functions that roll Runs up into them.

Per namespace a :class:`Library`: per skill name a :class:`SkillRecord` (usage counters and
the version history, newest first), plus the uids of the finished Runs already counted (so
a Run seen again after a restart is not counted twice). It is serialised into
operator-owned ConfigMaps per namespace (:func:`serialise` / :func:`from_config_maps`): the
Run that produced a count may be deleted long before the count is, and a Skill's history
must outlive the Skill. One ConfigMap (``swarmkit-skill-library``) while the library fits
in one; past that the records are split by a hash of the skill name into 2, 4, ... 64
shards (``swarmkit-skill-library-<i>``), the main one keeping the counted Runs and the
shard count, so a change rewrites only its shard.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from swarmkit_api.conditions import SUCCEEDED

from ..builders import MANAGED_BY

CONFIG_MAP = "swarmkit-skill-library"
DATA_KEY = "library.json"
LIBRARY_LABEL = "swarmkit.dev/skill-library"
#: Names kept in a Skill's status.grantedBy.agents (the count is exact).
GRANTED_BY_NAMES = 5
#: A ConfigMap holds at most 1 MiB: past this a library is split into more ConfigMaps
#: (shards, by a hash of the skill name), and at MAX_SHARDS a shard's history is trimmed.
MAX_CONFIG_MAP_BYTES = 900 * 1024
MAX_SHARDS = 64


@dataclass
class Usage:
    runs_granted: int = 0
    runs_loaded: int = 0
    loads: int = 0
    script_runs: int = 0
    script_failures: int = 0
    last_loaded: str | None = None

    @property
    def load_rate(self) -> float | None:
        if not self.runs_granted:
            return None
        return round(self.runs_loaded / self.runs_granted, 4)


@dataclass
class Version:
    """One content hash a skill had: when it was first seen and which agents pinned it."""

    content_hash: str
    first_seen: str
    agents: list[str] = field(default_factory=list)


@dataclass
class SkillRecord:
    usage: Usage = field(default_factory=Usage)
    #: Newest first.
    history: list[Version] = field(default_factory=list)
    #: When the Skill was deleted (its record and history stay).
    deleted_at: str | None = None


@dataclass
class Library:
    skills: dict[str, SkillRecord] = field(default_factory=dict)
    counted: set[str] = field(default_factory=set)
    #: How many ConfigMaps hold the records (1: all in the main one; see :func:`serialise`).
    shards: int = 1

    def record(self, skill: str) -> SkillRecord:
        return self.skills.setdefault(skill, SkillRecord())


@dataclass(frozen=True)
class RunFacts:
    """What one finished Run contributes to the library."""

    uid: str
    granted: frozenset[str]
    #: skill → agents that loaded it (load_skill) in this Run.
    loaded: Mapping[str, int]
    #: skill → (script runs, failures).
    scripts: Mapping[str, tuple[int, int]]
    completed: str | None


def _finished(status: Mapping[str, Any]) -> bool:
    for cond in status.get("conditions") or ():
        if cond.get("type") == SUCCEEDED:
            return cond.get("status") in ("True", "False")
    return False


def run_facts(uid: str, status: Mapping[str, Any]) -> RunFacts | None:
    """The facts of a Run that has finished (Succeeded True or False) and pinned its skills;
    None otherwise (a Run awaiting review is not finished: it may resume)."""
    if not _finished(status):
        return None
    pinned = status.get("pinned") or {}
    granted = frozenset(str(s) for s in (pinned.get("skills") or {}))
    loaded: dict[str, int] = {}
    scripts: dict[str, tuple[int, int]] = {}
    for agent in status.get("skills") or ():
        for skill in agent.get("loaded") or ():
            loaded[str(skill)] = loaded.get(str(skill), 0) + 1
        for script in agent.get("scripts") or ():
            runs, failures = scripts.get(str(script.get("skill")), (0, 0))
            scripts[str(script.get("skill"))] = (
                runs + int(script.get("runs") or 0),
                failures + int(script.get("failures") or 0),
            )
    if not granted and not loaded and not scripts:
        return None
    return RunFacts(uid, granted, loaded, scripts, status.get("completionTime"))


def count_run(library: Library, facts: RunFacts) -> set[str]:
    """Add ``facts`` to ``library`` once (by uid); the skills whose usage changed."""
    if facts.uid in library.counted:
        return set()
    library.counted.add(facts.uid)
    touched = set(facts.granted) | set(facts.loaded) | set(facts.scripts)
    for skill in touched:
        usage = library.record(skill).usage
        if skill in facts.granted:
            usage.runs_granted += 1
        if skill in facts.loaded:
            usage.runs_loaded += 1
            usage.loads += facts.loaded[skill]
            if facts.completed and (usage.last_loaded or "") < facts.completed:
                usage.last_loaded = facts.completed
        runs, failures = facts.scripts.get(skill, (0, 0))
        usage.script_runs += runs
        usage.script_failures += failures
    return touched


def see_version(record: SkillRecord, content_hash: str, now: str, limit: int) -> bool:
    """Record that the skill has ``content_hash`` now; True if the history changed."""
    changed = record.deleted_at is not None
    record.deleted_at = None
    if record.history and record.history[0].content_hash == content_hash:
        return changed
    for i, version in enumerate(record.history):
        if version.content_hash == content_hash:  # back to an earlier content: move it up
            record.history.insert(0, record.history.pop(i))
            return True
    record.history.insert(0, Version(content_hash, now))
    del record.history[limit:]
    return True


def pin_agent(record: SkillRecord, content_hash: str, agent: str, now: str, limit: int) -> bool:
    """Record that ``agent``'s version pins the skill at ``content_hash``."""
    version = next((v for v in record.history if v.content_hash == content_hash), None)
    if version is None:  # the agent's status arrived before the skill's
        record.history.append(Version(content_hash, now))
        record.history.sort(key=lambda v: v.first_seen, reverse=True)
        del record.history[limit:]
        version = next((v for v in record.history if v.content_hash == content_hash), None)
        if version is None:
            return False
    if agent in version.agents:
        return False
    version.agents.append(agent)
    version.agents.sort()
    return True


def granted_by_field(granting: Iterable[str]) -> dict[str, Any]:
    """The Skill's ``status.grantedBy``: how many agents grant it, and the first few."""
    agents = sorted(set(granting))
    return {"count": len(agents), "agents": agents[:GRANTED_BY_NAMES]}


def usage_field(record: SkillRecord | None) -> dict[str, Any]:
    """The Skill's ``status.usage`` (absent values left out: the API drops nulls, and the
    status must compare equal to what was written)."""
    usage = record.usage if record is not None else Usage()
    rolled: dict[str, Any] = {
        "runsGranted": usage.runs_granted,
        "runsLoaded": usage.runs_loaded,
        "loadRate": usage.load_rate,
        "scriptRuns": usage.script_runs,
        "scriptFailures": usage.script_failures,
        "lastLoaded": usage.last_loaded,
    }
    return {k: v for k, v in rolled.items() if v is not None}


# --- the ConfigMap ------------------------------------------------------------------------


def dump(library: Library) -> dict[str, Any]:
    return {
        "skills": {
            name: {
                "usage": {
                    "runsGranted": r.usage.runs_granted,
                    "runsLoaded": r.usage.runs_loaded,
                    "loads": r.usage.loads,
                    "scriptRuns": r.usage.script_runs,
                    "scriptFailures": r.usage.script_failures,
                    "lastLoaded": r.usage.last_loaded,
                },
                "history": [
                    {"contentHash": v.content_hash, "firstSeen": v.first_seen, "agents": v.agents}
                    for v in r.history
                ],
                "deletedAt": r.deleted_at,
            }
            for name, r in sorted(library.skills.items())
        },
        "counted": sorted(library.counted),
    }


def load(doc: Mapping[str, Any]) -> Library:
    library = Library(counted={str(u) for u in doc.get("counted") or ()})
    for name, raw in (doc.get("skills") or {}).items():
        u = raw.get("usage") or {}
        library.skills[str(name)] = SkillRecord(
            usage=Usage(
                runs_granted=int(u.get("runsGranted") or 0),
                runs_loaded=int(u.get("runsLoaded") or 0),
                loads=int(u.get("loads") or 0),
                script_runs=int(u.get("scriptRuns") or 0),
                script_failures=int(u.get("scriptFailures") or 0),
                last_loaded=u.get("lastLoaded"),
            ),
            history=[
                Version(
                    str(v["contentHash"]), str(v.get("firstSeen", "")), list(v.get("agents") or [])
                )
                for v in raw.get("history") or ()
                if v.get("contentHash")
            ],
            deleted_at=raw.get("deletedAt"),
        )
    return library


def part_of(skill: str, shards: int) -> str:
    """The ConfigMap holding ``skill``'s record when the library has ``shards`` shards."""
    if shards <= 1:
        return CONFIG_MAP
    return f"{CONFIG_MAP}-{_shard_index(skill) % shards}"


@functools.lru_cache(maxsize=65536)
def _shard_index(skill: str) -> int:
    return int.from_bytes(hashlib.sha256(skill.encode()).digest()[:4], "big")


def part_names(shards: int) -> list[str]:
    """Every ConfigMap of a library with ``shards`` shards (the main one first)."""
    if shards <= 1:
        return [CONFIG_MAP]
    return [CONFIG_MAP, *(f"{CONFIG_MAP}-{i}" for i in range(shards))]


def _part_text(library: Library, part: str, names: list[str]) -> str:
    """ConfigMap ``part``'s data: the records of ``names`` (those still in the library)."""
    skills = {n: library.skills[n] for n in names if n in library.skills}
    doc: dict[str, Any] = {"skills": dump(Library(skills=skills))["skills"]}
    if part == CONFIG_MAP:  # the main ConfigMap: the counted Runs (and the shard count)
        doc["counted"] = sorted(library.counted)
        if library.shards > 1:
            doc["shards"] = library.shards
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def serialise_part(library: Library, part: str) -> str | None:
    """The data of ConfigMap ``part``, at most :data:`MAX_CONFIG_MAP_BYTES`.

    None when it does not fit and more shards would split it (the caller doubles
    ``library.shards`` and writes every part again). A part that does not fit otherwise
    (at :data:`MAX_SHARDS`, or one skill's history alone too long) is trimmed: oldest
    versions first, then deleted skills."""
    names = [n for n in library.skills if part_of(n, library.shards) == part]
    text = _part_text(library, part, names)
    if len(text.encode()) <= MAX_CONFIG_MAP_BYTES:
        return text
    if library.shards < MAX_SHARDS and len(names) > 1:
        return None
    longest = max((len(library.skills[n].history) for n in names), default=0)
    for keep in range(longest - 1, 0, -1):
        for n in names:
            del library.skills[n].history[keep:]
        text = _part_text(library, part, names)
        if len(text.encode()) <= MAX_CONFIG_MAP_BYTES:
            return text
    deleted = sorted(
        (library.skills[n].deleted_at or "", n)
        for n in names
        if library.skills[n].deleted_at is not None
    )
    for _, name in deleted:
        del library.skills[name]
        text = _part_text(library, part, names)
        if len(text.encode()) <= MAX_CONFIG_MAP_BYTES:
            break
    return text


def serialise(library: Library) -> dict[str, str]:
    """Every ConfigMap's data (name → text), sharding the library as far as it needs."""
    while True:
        texts = {part: serialise_part(library, part) for part in part_names(library.shards)}
        if all(t is not None for t in texts.values()):
            return {k: str(v) for k, v in texts.items()}
        library.shards *= 2


def to_config_map(namespace: str, name: str, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LIBRARY_LABEL: "true", **MANAGED_BY},
        },
        "data": {DATA_KEY: text},
    }


def is_library_config_map(name: str) -> bool:
    return name == CONFIG_MAP or name.startswith(CONFIG_MAP + "-")


def from_config_maps(bodies: Iterable[Mapping[str, Any]]) -> Library:
    """The library of one namespace from its ConfigMaps (the main one and any shards; a
    shard left from an interrupted re-sharding only adds records)."""
    library = Library()
    for body in bodies:
        text = (body.get("data") or {}).get(DATA_KEY) or "{}"
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        part = load(doc)
        library.skills.update(part.skills)
        if ((body.get("metadata") or {}).get("name")) == CONFIG_MAP:
            library.counted = part.counted
            library.shards = max(1, int(doc.get("shards") or 1))
    return library
