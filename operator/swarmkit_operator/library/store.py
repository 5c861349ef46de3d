"""The skill library at run time: fed by watch events, flushed in batches.

:class:`SkillLibrary` keeps one :class:`~.records.Library` per namespace in memory. The
kopf glue (:mod:`swarmkit_operator.handlers.library`) feeds it every Skill, Agent and Run
event; it never writes on an event. A flush every ``flush_seconds`` (2 s by default,
``$SWARMKIT_LIBRARY_FLUSH_SECONDS``) writes what changed since the last one: the changed
library ConfigMaps of a namespace (``swarmkit-skill-library``, and its shards past one
ConfigMap: usage counters, version history, the Runs already counted; not while the
namespace's Skills and Agents are settling, and a large one paced by its size, see
``SkillLibrary._map_due``) and one status merge-patch per Skill whose
``usage`` differs from what its status shows. So 100 Runs finishing within a flush
interval, each loading the same 10 skills, cost 1 ConfigMap write (unsharded) and 10
status writes, not 1,000. (``grantedBy`` is not
written here: the Skill's reconcile writes it, and an Agent's change of grants enqueues a
``SkillGrants`` reconcile, so dependents see it settle like any other Skill status write.)

A restart loads the ConfigMaps first (one LIST), then sees every object again: a Run
already counted is skipped, an unchanged status is not rewritten. A Run that finished and
was deleted while no operator ran is not counted (its status is gone with it).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .. import k8s, metrics
from ..config import OperatorConfig
from ..indexes import SETTLING_RESOURCES, Indexes, IndexId
from . import records
from .records import LIBRARY_LABEL, Library, SkillRecord

log = logging.getLogger("swarmkit_operator.library")

#: The pace of library ConfigMap writes, in bytes of ConfigMap per second (see
#: ``SkillLibrary._map_due``).
MAP_WRITE_BYTES_PER_SECOND = 32 * 1024
#: The longest a changed library ConfigMap waits for its namespace to settle (a bulk
#: apply of 20,000 Skills settled in under 3 minutes here; the bound a Skill's held status
#: write has too).
SETTLE_LIMIT_SECONDS = 300.0

#: ``pending(namespace, skill)``: whether the Skill's own reconcile is about to write status
#: (it writes usage itself then, so the flush leaves it alone).
Pending = Callable[[str, str], bool]


def _now() -> str:
    # Asked once per Skill and Agent a start-up lists: time's strftime is a quarter of
    # datetime's cost for the same UTC timestamp.
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _same(desired: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    return all(current.get(k) == v for k, v in desired.items())


class SkillLibrary:
    """Usage roll-ups and version history of every Skill (see the module docstring)."""

    def __init__(
        self,
        config: OperatorConfig,
        indexes: Indexes,
        namespaces: Sequence[str] = (),
        flush_seconds: float = 2.0,
        pending: Pending | None = None,
        clock: Callable[[], str] = _now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.history_limit = config.skill_history_limit
        self.indexes = indexes
        self.namespaces = tuple(namespaces)
        self.flush_seconds = flush_seconds
        self.pending = pending or (lambda _ns, _name: False)
        self.clock = clock
        self.monotonic = monotonic
        self.libraries: dict[str, Library] = {}
        #: (namespace, ConfigMap) of the library parts changed since they were written.
        self.dirty_maps: set[tuple[str, str]] = set()
        self.dirty_skills: set[tuple[str, str]] = set()
        self.agent_grants: dict[tuple[str, str], frozenset[str]] = {}
        self._written_maps: dict[tuple[str, str], str] = {}
        #: (namespace, ConfigMap) → monotonic time of its last write (the pace, see flush).
        self._map_written_at: dict[tuple[str, str], float] = {}
        #: (namespace, ConfigMap) → monotonic time of its first change not written yet.
        self._dirty_since: dict[tuple[str, str], float] = {}
        self._written_status: dict[tuple[str, str], tuple[dict[str, Any], float]] = {}
        #: Writes made so far (what the roll-ups cost the API).
        self.map_writes = 0
        self.status_writes = 0

    # -- reading -----------------------------------------------------------------------------
    def library(self, namespace: str) -> Library:
        return self.libraries.setdefault(namespace, Library())

    def record(self, namespace: str, skill: str) -> SkillRecord | None:
        lib = self.libraries.get(namespace)
        return lib.skills.get(skill) if lib is not None else None

    def granting_agents(self, namespace: str, skill: str) -> set[str]:
        """Agents granting ``skill`` directly or through composed skills that run it."""
        agents: set[str] = set()
        seen: set[str] = set()
        stack = [skill]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            agents.update(self.indexes.values(IndexId.AGENT_BY_GRANT, (namespace, current)))
            stack.extend(self.indexes.values(IndexId.SKILL_BY_COMPONENT, (namespace, current)))
        return agents

    def usage_field(self, namespace: str, skill: str) -> dict[str, Any]:
        """The Skill's ``status.usage`` as of now."""
        return records.usage_field(self.record(namespace, skill))

    # -- start-up ----------------------------------------------------------------------------
    async def load(self) -> None:
        """Read every namespace's library ConfigMap (one LIST per watched namespace)."""
        selector = f"{LIBRARY_LABEL}=true"
        found: list[dict[str, Any]] = []
        if self.namespaces and not any(c in n for n in self.namespaces for c in "*?["):
            for ns in self.namespaces:
                found.extend(await k8s.list_config_maps(ns, selector))
        else:
            found = await k8s.list_config_maps(None, selector)
        by_namespace: dict[str, list[dict[str, Any]]] = {}
        for cm in found:
            meta = cm.get("metadata") or {}
            if not records.is_library_config_map(str(meta.get("name"))):
                continue
            ns = str(meta.get("namespace"))
            by_namespace.setdefault(ns, []).append(cm)
            text = str((cm.get("data") or {}).get(records.DATA_KEY) or "")
            self._written_maps[(ns, str(meta.get("name")))] = text
        for ns, cms in by_namespace.items():
            self.libraries[ns] = records.from_config_maps(cms)
        log.info(
            "skill library loaded: %d namespace(s) from %d ConfigMap(s)",
            len(by_namespace),
            sum(len(c) for c in by_namespace.values()),
        )

    def seed(self) -> None:
        """See every indexed Skill, Agent and Run once (after :meth:`load`)."""
        for ns, name in self.indexes.keys(IndexId.SKILL_VIEWS):
            view = self.indexes.values(IndexId.SKILL_VIEWS, (ns, name))
            if view:
                self.skill_seen(ns, name, view[0]["status"].get("contentHash"))
        for ns, name in self.indexes.keys(IndexId.AGENT_VIEWS):
            view = self.indexes.values(IndexId.AGENT_VIEWS, (ns, name))
            if view:
                self.agent_seen(ns, name, view[0]["spec"], view[0]["status"])
        if IndexId.RUNS_BY_UID in self.indexes.data:
            for uid in self.indexes.keys(IndexId.RUNS_BY_UID):
                for run in self.indexes.values(IndexId.RUNS_BY_UID, uid):
                    self.run_seen(str(run.get("namespace")), str(uid), run.get("status") or {})

    # -- events ------------------------------------------------------------------------------
    def skill_seen(self, namespace: str, name: str, content_hash: str | None) -> None:
        self.dirty_skills.add((namespace, name))
        if not content_hash:
            return
        record = self.library(namespace).record(name)
        if records.see_version(record, content_hash, self.clock(), self.history_limit):
            self._dirty(namespace, name)

    def skill_deleted(self, namespace: str, name: str) -> None:
        self.dirty_skills.discard((namespace, name))
        record = self.record(namespace, name)
        if record is not None and record.deleted_at is None:
            record.deleted_at = self.clock()
            self._dirty(namespace, name)

    def agent_seen(
        self, namespace: str, name: str, spec: Mapping[str, Any], status: Mapping[str, Any]
    ) -> set[str]:
        """Record the skill versions the agent pins; the skills whose ``grantedBy`` this
        agent's grants change (their reconcile writes it)."""
        grants = frozenset(
            g for g in spec.get("skills") or () if isinstance(g, str) and ":" not in g
        )
        before = self.agent_grants.get((namespace, name), frozenset())
        self.agent_grants[(namespace, name)] = grants
        lib = self.library(namespace)
        now = self.clock()
        for resolved in status.get("resolvedSkills") or ():
            skill, content_hash = resolved.get("name"), resolved.get("contentHash")
            if not skill or not content_hash:
                continue
            record = lib.record(str(skill))
            if records.pin_agent(record, str(content_hash), name, now, self.history_limit):
                self._dirty(namespace, str(skill))
        return self._with_components(namespace, grants ^ before)

    def agent_deleted(self, namespace: str, name: str) -> set[str]:
        """Forget the agent; the skills whose ``grantedBy`` changes."""
        before = self.agent_grants.pop((namespace, name), frozenset())
        return self._with_components(namespace, before)

    def _with_components(self, namespace: str, skills: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for skill in skills:
            out |= self._composed_by(namespace, skill)
        return out

    def _composed_by(self, namespace: str, skill: str) -> set[str]:
        """``skill`` and the components it runs (their grantedBy follows its grants)."""
        out: set[str] = set()
        stack = [skill]
        while stack:
            current = stack.pop()
            if current in out:
                continue
            out.add(current)
            for view in self.indexes.values(IndexId.SKILL_VIEWS, (namespace, current)):
                stack.extend(view.get("composes") or ())
        return out

    def run_seen(self, namespace: str, uid: str, status: Mapping[str, Any]) -> None:
        """Count a finished Run once (a no-op for unfinished and already counted Runs)."""
        lib = self.library(namespace)
        if uid in lib.counted:
            return
        facts = records.run_facts(uid, status)
        if facts is None:
            return
        touched = records.count_run(lib, facts)
        for skill, agents in facts.loaded.items():
            metrics.SKILL_LOADS.labels(namespace, skill).inc(agents)
        for skill, (runs, failures) in facts.scripts.items():
            if runs - failures:
                metrics.SKILL_SCRIPT_RUNS.labels(namespace, skill, "ok").inc(runs - failures)
            if failures:
                metrics.SKILL_SCRIPT_RUNS.labels(namespace, skill, "failed").inc(failures)
        self._dirty(namespace, None)
        for skill in touched:
            self._dirty(namespace, skill)
        self.dirty_skills.update((namespace, s) for s in touched)

    # -- writing -----------------------------------------------------------------------------
    def _live_runs(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        if IndexId.RUNS_BY_UID not in self.indexes.data:
            return out
        for uid in self.indexes.keys(IndexId.RUNS_BY_UID):
            for run in self.indexes.values(IndexId.RUNS_BY_UID, uid):
                out.setdefault(str(run.get("namespace")), set()).add(str(uid))
        return out

    def _dirty(self, namespace: str, skill: str | None) -> None:
        """Mark the ConfigMap holding ``skill``'s record (None: the counted Runs) changed."""
        shards = self.library(namespace).shards
        part = records.CONFIG_MAP if skill is None else records.part_of(skill, shards)
        self.dirty_maps.add((namespace, part))
        self._dirty_since.setdefault((namespace, part), self.monotonic())

    def _map_due(self, key: tuple[str, str]) -> bool:
        """Whether library ConfigMap ``key`` (namespace, name) may be written now.

        Not while its namespace is settling (a Skill or Agent there not reconciled yet:
        the kinds whose statuses the library records,
        :meth:`~swarmkit_operator.indexes.Indexes.unsettled`), for up to
        :data:`SETTLE_LIMIT_SECONDS` after its first change: the library records what
        their statuses show (versions seen, versions pinned), so during a bulk apply it
        changes until the last of them is Ready, and every write before that was rewritten
        (10 creates and 23 rewrites of ~900 KiB at 20,000 Skills, issue 43). Written once
        it settled, a bulk apply costs one write per library ConfigMap.

        And every write sends the whole ConfigMap (up to ~900 KiB) to the apiserver and
        etcd, and back to every ConfigMap watcher, this operator included. So a large one is
        written at most once per its size at :data:`MAP_WRITE_BYTES_PER_SECOND` (900 KiB
        every ~28 s, under 64 KiB every flush). What waits is only the kept history;
        status, usage and the web view read memory, and a graceful stop writes everything
        (``final``)."""
        now = self.monotonic()
        waited = now - self._dirty_since.get(key, now)
        if waited < SETTLE_LIMIT_SECONDS and self.indexes.unsettled(SETTLING_RESOURCES, key[0]):
            return False
        last = self._map_written_at.get(key)
        pace = len(self._written_maps.get(key, "")) / MAP_WRITE_BYTES_PER_SECOND
        if last is None or pace <= self.flush_seconds:
            return True  # the flush interval paces it already
        return now - last >= pace

    def _forget(self, namespace: str) -> None:
        """The namespace is gone (or going), and everything in it with it."""
        self.libraries.pop(namespace, None)
        for key in [k for k in self._written_maps if k[0] == namespace]:
            self._written_maps.pop(key, None)
            self._map_written_at.pop(key, None)
        for key in [k for k in self._dirty_since if k[0] == namespace]:
            del self._dirty_since[key]  # also the parts never written
        self.dirty_maps = {k for k in self.dirty_maps if k[0] != namespace}

    async def flush(self, final: bool = False) -> None:
        """Write what changed since the last flush (see the module docstring); ``final``
        writes every changed ConfigMap regardless of its pace (at shutdown)."""
        parts, self.dirty_maps = self.dirty_maps, set()
        if not final:
            due = {key for key in parts if self._map_due(key)}
            self.dirty_maps |= parts - due  # written on a later flush, nothing is dropped
            parts = due
        live = self._live_runs() if parts else {}
        for ns in sorted({ns for ns, _ in parts}):
            await self._write_library(ns, {p for n, p in parts if n == ns}, live)
        skills, self.dirty_skills = self.dirty_skills, set()
        for ns, name in sorted(skills):
            await self._write_skill(ns, name)

    async def _write_library(self, ns: str, parts: set[str], live: dict[str, set[str]]) -> None:
        lib = self.library(ns)
        if records.CONFIG_MAP in parts and IndexId.RUNS_BY_UID in self.indexes.data:
            lib.counted &= live.get(ns, set())  # a deleted Run never comes back
        texts: dict[str, str] = {}
        for part in parts & set(records.part_names(lib.shards)):
            text = records.serialise_part(lib, part)
            if text is None:  # past one ConfigMap: more shards, every part written again
                texts = records.serialise(lib)
                log.info("skill library of %s: %d shards", ns, lib.shards)
                break
            texts[part] = text
        # The shards before the main ConfigMap, which says how many shards there are.
        for part in sorted(texts, key=lambda p: (p == records.CONFIG_MAP, p)):
            key = (ns, part)
            if texts[part] == self._written_maps.get(key):
                self._dirty_since.pop(key, None)
                continue
            log.debug("skill library %s/%s: writing %d bytes", ns, part, len(texts[part]))
            try:
                await k8s.put_config_map(
                    records.to_config_map(ns, part, texts[part]), exists=key in self._written_maps
                )
            except k8s.ApiError as exc:
                if exc.status == 404 or (exc.status == 403 and "terminat" in str(exc)):
                    self._forget(ns)
                    return
                log.warning("writing the skill library %s/%s failed (retrying): %s", ns, part, exc)
                self.dirty_maps.add(key)
                continue
            self._written_maps[key] = texts[part]
            self._map_written_at[key] = self.monotonic()
            self._dirty_since.pop(key, None)
            self.map_writes += 1

    async def _write_skill(self, namespace: str, name: str) -> None:
        views = self.indexes.values(IndexId.SKILL_VIEWS, (namespace, name))
        if not views:
            return
        view = views[0]
        if self.pending(namespace, name) or view.get("observed") != view.get("generation"):
            self.dirty_skills.add((namespace, name))  # its reconcile writes these fields
            return
        desired = {"usage": self.usage_field(namespace, name)}
        if _same(desired, view["status"]):
            return
        last = self._written_status.get((namespace, name))
        if last is not None and last[0] == desired and time.monotonic() - last[1] < 10:
            return  # our identical write is on its way back through the watch
        log.debug(
            "skill %s/%s: writing %s (was %s)",
            namespace,
            name,
            desired,
            {k: view["status"].get(k) for k in desired},
        )
        try:
            rv = await k8s.patch_status("skills", namespace, name, desired, k8s.LIBRARY_MANAGER)
        except k8s.ApiError as exc:
            log.warning("writing skill %s/%s usage failed (retrying): %s", namespace, name, exc)
            self.dirty_skills.add((namespace, name))
            return
        if rv is not None:
            self.status_writes += 1
            self._written_status[(namespace, name)] = (desired, time.monotonic())
            if len(self._written_status) > 10000:
                self._written_status.clear()

    # -- the loop ----------------------------------------------------------------------------
    # :meth:`flush` every ``flush_seconds`` is a Periodic of the leader's (the composition
    # root builds it: the manager runs every periodic loop the same way).

    async def stop(self) -> None:
        """Flush once more, after the manager stopped the loop (graceful shutdown loses
        nothing; a standby's flush is refused by the write gate before anything is sent)."""
        with contextlib.suppress(Exception):
            await self.flush(final=True)
