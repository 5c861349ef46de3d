"""Shared handler glue: operator settings, the reconcile work queue, status and Events.

How reconciling works
---------------------
kopf watches the resources. The ``@kopf.on.event`` handlers keep in-memory **indexes**
(:class:`Indexes`, filled by one paged LIST at start-up) of what the reconcilers need: per
object a small *view* (spec and status fields), and reverse indexes for fan-out (skill →
agents granting it, agent → topologies using it, secret → workspaces referencing it,
topology → skills calling it, ...). Then they **enqueue keys** ``(kind, namespace, name)``
into the :class:`WorkQueue`: the object itself when its spec changed, and its dependents
(found through the reverse indexes, never by scanning) when what they depend on changed.

A few workers take keys off the queue (workspaces, then skills, then agents, then
topologies, then garbage collection), one key at a time per key, and run the kind's
reconciler: it reads the indexes, calls the pure builders, creates the content-addressed
ConfigMap if it is missing and merge-patches ``status`` if it differs. Everything is level-
triggered and idempotent, so an operator restart recomputes the same statuses (no writes),
errors are retried with exponential backoff, and nothing is kept in a status field as a
hidden state machine.

A reconciler *defers* (and is retried shortly) while an input it would read is itself still
queued or has an unobserved write, so an Agent is versioned once with its skills' final
hashes rather than once per skill landing. kopf itself never writes to our objects: there
are no change-detecting handlers (no diff-base, no progress, no finalizers). Its storages
are nevertheless pointed at ``status.kopf`` so nothing ever lands in annotations.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import heapq
import logging
import os
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf

from .. import k8s, metrics
from ..builders import (
    COMPONENT_LABEL,
    MANAGED_BY,
    PINNED_ANNOTATION,
    RUN_FINISHED_LABEL,
    RUN_LABEL,
    Verdict,
)
from ..conditions import set_condition, transitions
from ..config import OperatorConfig, load_config
from ..hashing import canonical_json

log = logging.getLogger("swarmkit_operator")

Key = tuple[str, str, str]  # (kind, namespace, name)
PRIORITY = {"Workspace": 0, "Skill": 1, "Agent": 2, "Topology": 3, "GC": 4}
GROUP = "swarmkit.dev"
VERSION = "v1alpha1"
PLURALS = {
    "Workspace": "workspaces",
    "Skill": "skills",
    "Agent": "agents",
    "Topology": "topologies",
}
#: kopf's own bookkeeping (only ever used if a change-detecting handler is added).
KOPF_STATUS_FIELD = "kopf"


class Deferred(Exception):
    """Inputs (keys) are still being reconciled: try again once they settle."""

    def __init__(self, keys: Iterable[Key]) -> None:
        self.keys = list(keys)
        super().__init__("waiting for " + ", ".join(f"{k[0].lower()} {k[2]}" for k in self.keys))


# --- the work queue -----------------------------------------------------------------------


class WorkQueue:
    """A deduplicating, delaying, priority work queue with per-key serialization.

    A key is never processed by two workers at once; a key added while it is being
    processed is processed again afterwards. Among due keys, lower :data:`PRIORITY` first.
    """

    def __init__(self) -> None:
        self._ready: list[deque[Key]] = [deque() for _ in range(len(PRIORITY))]
        self._delayed: list[tuple[float, int, Key]] = []
        self._scheduled: dict[Key, float] = {}
        self._processing: set[Key] = set()
        self._again: dict[Key, float] = {}
        self._wakeup = asyncio.Event()
        self._seq = 0
        self.closed = False

    def __len__(self) -> int:
        return len(self._scheduled)

    def add(self, key: Key, delay: float = 0.0) -> None:
        if self.closed:
            return
        when = time.monotonic() + max(delay, 0.0)
        if key in self._processing:
            prev = self._again.get(key)
            self._again[key] = when if prev is None else min(prev, when)
            return
        prev = self._scheduled.get(key)
        if prev is not None and prev <= when:
            return
        self._scheduled[key] = when
        if delay <= 0:
            self._ready[PRIORITY[key[0]]].append(key)
        else:
            self._seq += 1
            heapq.heappush(self._delayed, (when, self._seq, key))
        metrics.QUEUE_DEPTH.set(len(self._scheduled))
        self._wakeup.set()

    def pending(self, key: Key) -> bool:
        return key in self._scheduled or key in self._processing

    async def get(self) -> Key:
        while True:
            now = time.monotonic()
            while self._delayed and self._delayed[0][0] <= now:
                when, _, key = heapq.heappop(self._delayed)
                if self._scheduled.get(key) == when:
                    self._ready[PRIORITY[key[0]]].append(key)
            for ready in self._ready:
                while ready:
                    key = ready.popleft()
                    when_due = self._scheduled.get(key)
                    if when_due is None or when_due > now:
                        continue  # stale entry (re-scheduled later or already taken)
                    del self._scheduled[key]
                    self._processing.add(key)
                    metrics.QUEUE_DEPTH.set(len(self._scheduled))
                    return key
            timeout = self._delayed[0][0] - now if self._delayed else None
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)

    def done(self, key: Key) -> None:
        self._processing.discard(key)
        again = self._again.pop(key, None)
        if again is not None:
            self.add(key, again - time.monotonic())

    @property
    def busy(self) -> int:
        return len(self._processing)


# --- indexes ------------------------------------------------------------------------------

PRESENT = object()  # a label filter value: the label exists, whatever its value


@dataclass(frozen=True)
class Resource:
    """A watched resource kind: how to LIST it."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return (
            f"{prefix}/namespaces/{namespace}/{self.plural}"
            if namespace
            else (f"{prefix}/{self.plural}")
        )


RESOURCES = {
    "workspaces": Resource(GROUP, VERSION, "workspaces"),
    "skills": Resource(GROUP, VERSION, "skills"),
    "agents": Resource(GROUP, VERSION, "agents"),
    "topologies": Resource(GROUP, VERSION, "topologies"),
    "configmaps": Resource("", "v1", "configmaps"),
    "secrets": Resource("", "v1", "secrets"),
}
IndexFn = Callable[..., Mapping[Any, Any]]


@dataclass(frozen=True)
class IndexSpec:
    id: str
    resource: str
    fn: IndexFn
    labels: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, want in self.labels.items():
            if key not in labels or (want is not PRESENT and labels[key] != want):
                return False
        return True

    @property
    def selector(self) -> str:
        return ",".join(k if v is PRESENT else f"{k}={v}" for k, v in self.labels.items())


INDEX_SPECS: list[IndexSpec] = []
#: Resources whose kind module maintains the indexes from its own ``on.event`` handler.
SELF_MAINTAINED = frozenset(RESOURCES)


def index(
    resource: str,
    *,
    id: str,
    labels: Mapping[str, Any] | None = None,
    group: str | None = None,
    version: str | None = None,
) -> Callable[[IndexFn], IndexFn]:
    """Register an index function, like ``@kopf.index`` but without kopf's start-up cost.

    ``fn(body=, meta=, spec=, status=, namespace=, name=, uid=, labels=, annotations=,
    logger=)`` returns ``{key: value}`` for one object. Read it with
    ``Controller.lookup(id, key)`` / ``lookup_all`` or ``Controller.indexes.view(id)`` (a
    mapping key → values, like a kopf index). For a resource other than the six this module
    watches anyway, pass ``group``/``version``: an ``on.event`` handler keeping the index
    current is registered here (before any handler the caller registers later).
    """

    def register(fn: IndexFn) -> IndexFn:
        if resource not in RESOURCES:
            RESOURCES[resource] = Resource(group or "", version or "v1", resource)
        spec = IndexSpec(id, resource, fn, dict(labels or {}))
        INDEX_SPECS.append(spec)
        if resource not in SELF_MAINTAINED:
            _watch_for_index(RESOURCES[resource], spec)
        return fn

    return register


def _watch_for_index(resource: Resource, spec: IndexSpec) -> None:
    kopf_labels = {k: (kopf.PRESENT if v is PRESENT else v) for k, v in spec.labels.items()}
    plural = resource.plural

    async def maintain_index(
        type: str | None, body: kopf.Body, uid: str, memo: kopf.Memo, **_: Any
    ) -> None:
        ctl = controller_of(memo)
        if ctl is None:
            return
        if type == "DELETED":
            ctl.indexes.delete(plural, uid)
        else:
            ctl.indexes.update(plural, body)

    group_version = f"{resource.group}/{resource.version}" if resource.group else resource.version
    kopf.on.event(group_version, plural, id=f"index-{spec.id}", labels=kopf_labels or None)(
        maintain_index
    )


class Indexes:
    """In-memory indexes over watched objects: index id → key → {object uid: value}.

    Like kopf's indexes, but filled by a paged LIST at start-up and then kept current by
    the ``on.event`` handlers. (kopf's own index pre-population wakes every waiting
    per-object worker whenever one object is indexed: quadratic in the number of objects,
    which measured 15-45 s before the first reconcile with ~2,600 objects.)
    """

    def __init__(self, specs: Iterable[IndexSpec]) -> None:
        self.specs: dict[str, list[IndexSpec]] = {}
        for spec in specs:
            self.specs.setdefault(spec.resource, []).append(spec)
        self.data: dict[str, dict[Any, dict[str, Any]]] = {
            spec.id: {} for specs in self.specs.values() for spec in specs
        }
        self._keys: dict[tuple[str, str], dict[str, list[Any]]] = {}
        self._touched: dict[tuple[str, str], float] = {}

    def update(self, resource: str, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        ident = (resource, uid)
        self._drop(ident)
        labels = meta.get("labels") or {}
        kwargs = {
            "body": body,
            "meta": meta,
            "spec": body.get("spec") or {},
            "status": body.get("status") or {},
            "logger": log,
            "namespace": meta.get("namespace"),
            "name": meta.get("name", ""),
            "uid": uid,
            "labels": labels,
            "annotations": meta.get("annotations") or {},
        }
        owned: dict[str, list[Any]] = {}
        for spec in self.specs.get(resource, ()):
            if not spec.matches(labels):
                continue
            try:
                entries = spec.fn(**kwargs)
            except Exception as exc:  # one bad object must not break the others
                log.warning("index %s failed for %s/%s: %s", spec.id, resource, uid, exc)
                continue
            store = self.data[spec.id]
            for key, value in entries.items():
                store.setdefault(key, {})[uid] = value
            if entries:
                owned[spec.id] = list(entries)
        self._keys[ident] = owned
        self._touched[ident] = time.monotonic()

    def delete(self, resource: str, uid: str) -> None:
        self._drop((resource, uid))
        self._touched.pop((resource, uid), None)

    def _drop(self, ident: tuple[str, str]) -> None:
        for index_id, keys in self._keys.pop(ident, {}).items():
            store = self.data[index_id]
            for key in keys:
                values = store.get(key)
                if values is not None:
                    values.pop(ident[1], None)
                    if not values:
                        del store[key]

    def prune(self, resource: str, present: set[str], listed_at: float) -> int:
        """Drop objects a LIST (started at ``listed_at``) no longer returned, unless an
        event refreshed them since; returns how many."""
        stale = [
            ident
            for ident, touched in self._touched.items()
            if ident[0] == resource and ident[1] not in present and touched < listed_at
        ]
        for ident in stale:
            self.delete(*ident)
        return len(stale)

    def view(self, index_id: str) -> Mapping[Any, list[Any]]:
        """A live read-only mapping key → values (the shape of a kopf index)."""
        return _IndexView(self.data[index_id])

    def values(self, index_id: str, key: Any) -> list[Any]:
        return list(self.data[index_id].get(key, {}).values())

    def keys(self, index_id: str) -> list[Any]:
        return list(self.data[index_id])


class _IndexView(Mapping[Any, list[Any]]):
    def __init__(self, store: dict[Any, dict[str, Any]]) -> None:
        self._store = store

    def __getitem__(self, key: Any) -> list[Any]:
        values = self._store.get(key)
        if not values:
            raise KeyError(key)
        return list(values.values())

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._store))

    def __len__(self) -> int:
        return len(self._store)


async def list_all(
    resource: Resource, namespaces: Sequence[str], selector: str = ""
) -> list[dict[str, Any]]:
    """A paged LIST, cluster-wide or per namespace."""
    items: list[dict[str, Any]] = []
    patterns = [n for n in namespaces if any(c in n for c in "*?[")]
    scopes: list[str | None] = [None] if patterns or not namespaces else list(namespaces)
    for namespace in scopes:
        token = ""
        while True:
            query = [("limit", "500")]
            if selector:
                query.append(("labelSelector", selector))
            if token:
                query.append(("continue", token))
            path = resource.path(namespace)
            status, payload = await k8s.request("GET", path, query=query)
            if status >= 300:
                raise k8s.ApiError("GET", path, status, str(payload))
            for item in payload.get("items") or []:
                ns = (item.get("metadata") or {}).get("namespace") or ""
                if not patterns or any(fnmatch.fnmatchcase(ns, p) for p in namespaces):
                    items.append(item)
            token = (payload.get("metadata") or {}).get("continue") or ""
            if not token:
                break
    return items


async def populate(indexes: Indexes, namespaces: Sequence[str], prune: bool = False) -> None:
    """LIST every indexed resource into ``indexes`` (server-side label selectors when every
    index of a resource filters on labels); with ``prune``, drop what is gone."""
    for resource, specs in indexes.specs.items():
        selectors = [s.selector for s in specs]
        if not all(selectors):
            selectors = [""]
        listed_at = time.monotonic()
        present: set[str] = set()
        try:
            for selector in dict.fromkeys(selectors):
                for item in await list_all(RESOURCES[resource], namespaces, selector):
                    indexes.update(resource, item)
                    present.add(str((item.get("metadata") or {}).get("uid", "")))
        except (k8s.ApiError, OSError) as exc:
            log.warning("could not list %s to pre-populate the indexes: %s", resource, exc)
            continue
        if prune:
            dropped = indexes.prune(resource, present, listed_at)
            if dropped:
                log.info("dropped %d vanished %s from the indexes", dropped, resource)


# --- the controller -----------------------------------------------------------------------

Reconciler = Callable[["Controller", str, str, bool], Awaitable[str]]
RECONCILERS: dict[str, Reconciler] = {}


def reconciler(kind: str) -> Callable[[Reconciler], Reconciler]:
    def register(fn: Reconciler) -> Reconciler:
        RECONCILERS[kind] = fn
        return fn

    return register


@dataclass
class Controller:
    """The in-process reconcile machinery shared by the handlers (kept in kopf's memo)."""

    config: OperatorConfig
    indexes: Indexes = field(default_factory=lambda: Indexes(INDEX_SPECS))
    namespaces: tuple[str, ...] = ()
    workers: int = 16
    defer_delay: float = 1.0
    max_defer: float = 15.0
    gc_grace: float = 10.0
    resync_seconds: float = 600.0
    queue: WorkQueue = field(default_factory=WorkQueue)
    bodies: dict[Key, dict[str, Any]] = field(default_factory=dict)
    failures: dict[Key, int] = field(default_factory=dict)
    deferred_since: dict[Key, float] = field(default_factory=dict)
    awaiting: dict[Key, tuple[str, float, dict[str, Any]]] = field(default_factory=dict)
    waiters: dict[Key, set[Key]] = field(default_factory=dict)
    written: dict[Key, tuple[str, float]] = field(default_factory=dict)
    seen: dict[Key, Any] = field(default_factory=dict)
    reconciled_generation: dict[Key, int] = field(default_factory=dict)
    unreferenced_since: dict[tuple[str, str], float] = field(default_factory=dict)
    created_config_maps: dict[tuple[str, str], float] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    events: asyncio.Queue[tuple[dict[str, Any], str, str, str]] = field(
        default_factory=lambda: asyncio.Queue(maxsize=10000)
    )
    caches: dict[Any, Any] = field(default_factory=dict)

    # --- indexes ---

    def lookup(self, index: str, key: Any) -> Any:
        """The single value of ``key`` in ``index`` (None if absent)."""
        values = self.indexes.data[index].get(key)
        if not values:
            return None
        return next(iter(values.values()))

    def lookup_all(self, index: str, key: Any) -> list[Any]:
        return self.indexes.values(index, key)

    # --- queueing ---

    def enqueue(self, kind: str, namespace: str, name: str, delay: float = 0.0) -> None:
        self.queue.add((kind, namespace, name), delay)

    def enqueue_many(self, kind: str, namespace: str, names: Iterable[str]) -> None:
        for name in names:
            self.queue.add((kind, namespace, name))

    def enqueue_gc(self, namespace: str, delay: float | None = None) -> None:
        self.queue.add(("GC", namespace, ""), self.gc_grace if delay is None else delay)

    def pending(self, key: Key, view: Mapping[str, Any] | None) -> bool:
        """Whether ``key``'s status is about to change (so dependents should wait)."""
        if self.queue.pending(key):
            return True
        waiting = self.awaiting.get(key)
        if waiting is not None:
            if time.monotonic() < waiting[1]:
                return True
            self.awaiting.pop(key, None)
        return view is not None and view.get("observed") != view.get("generation")

    def observed(self, key: Key, body: Mapping[str, Any]) -> None:
        """A watch event for ``key`` arrived: our own write is visible once an event carries
        its resourceVersion or its content (kopf may skip straight to a later event)."""
        waiting = self.awaiting.get(key)
        if waiting is None:
            return
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if waiting[0] == rv or _same(waiting[2], body.get("status") or {}):
            self.awaiting.pop(key, None)
            self._wake(key)

    def should_reconcile_self(self, key: Key, body: Mapping[str, Any], event_type: Any) -> bool:
        """Whether an event of ``key``'s own object needs its reconcile (not a status echo)."""
        meta = body.get("metadata") or {}
        generation = meta.get("generation")
        status = body.get("status") or {}
        if event_type is None:  # the initial listing (start-up, re-list)
            return True
        if status.get("observedGeneration") != generation:
            return True
        return self.reconciled_generation.get(key) != generation

    def forget(self, key: Key) -> None:
        """The object is gone: drop what this process remembered of it."""
        for memory in (
            self.bodies,
            self.reconciled_generation,
            self.written,
            self.awaiting,
            self.failures,
            self.deferred_since,
        ):
            memory.pop(key, None)
        self._wake(key)

    def changed(self, key: Key, view: Any, fresh: bool = True) -> bool:
        """Whether ``view`` (what dependents care about) differs from the last one seen.

        A view that is not ``fresh`` (its object's status lags its spec) is not news yet:
        dependents would only wait for it; they hear of it once its status catches up.
        """
        if not fresh:
            return False
        if self.seen.get(key, _MISSING) == view:
            return False
        if view is _MISSING:
            self.seen.pop(key, None)
        else:
            self.seen[key] = view
        return True

    # --- the loop ---

    async def start(self) -> None:
        for i in range(self.workers):
            self.tasks.append(asyncio.create_task(self._worker(), name=f"swarmkit-worker-{i}"))
        self.tasks.append(asyncio.create_task(self._event_poster(), name="swarmkit-events"))
        if self.resync_seconds > 0:
            self.tasks.append(asyncio.create_task(self._resync(), name="swarmkit-resync"))

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop taking work, let in-flight reconciles finish (up to ``timeout``), cancel."""
        self.queue.closed = True
        deadline = time.monotonic() + timeout
        while self.queue.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        flush_deadline = time.monotonic() + min(2.0, max(0.0, deadline - time.monotonic()))
        while not self.events.empty() and time.monotonic() < flush_deadline:
            await asyncio.sleep(0.05)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if self.queue.closed:
                self.queue.done(key)
                continue
            try:
                await self._process(key)
            finally:
                self.queue.done(key)
                self._wake(key)

    def _wake(self, key: Key) -> None:
        """``key`` may have settled: re-run what deferred on it (if it really did)."""
        if key not in self.waiters or self.queue.pending(key) or key in self.awaiting:
            return
        for waiter in self.waiters.pop(key):
            self.queue.add(waiter)

    async def _process(self, key: Key) -> None:
        kind, namespace, name = key
        fn = RECONCILERS.get(kind)
        if fn is None:
            return
        started = time.monotonic()
        since = self.deferred_since.get(key)
        force = since is not None and started - since > self.max_defer
        try:
            outcome = await fn(self, namespace, name, force)
        except Deferred as exc:
            self.deferred_since.setdefault(key, started)
            metrics.RECONCILES.labels(kind, "deferred").inc()
            log.debug("deferring %s %s/%s: %s", kind, namespace, name, exc)
            for waited in exc.keys:  # woken as soon as each settles; the delay is a backstop
                self.waiters.setdefault(waited, set()).add(key)
            self.queue.add(key, self.defer_delay)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures = self.failures.get(key, 0) + 1
            self.failures[key] = failures
            delay = min(0.5 * 2 ** (failures - 1), 60.0) * random.uniform(0.8, 1.2)
            metrics.RECONCILES.labels(kind, "error").inc()
            metrics.RETRIES.labels(kind).inc()
            log.warning(
                "reconciling %s %s/%s failed (attempt %d, retrying in %.1fs): %s",
                kind,
                namespace,
                name,
                failures,
                delay,
                exc,
                exc_info=failures == 1 and not isinstance(exc, k8s.ApiError),
            )
            self.queue.add(key, delay)
            return
        finally:
            metrics.RECONCILE_SECONDS.labels(kind).observe(time.monotonic() - started)
        self.failures.pop(key, None)
        self.deferred_since.pop(key, None)
        metrics.RECONCILES.labels(kind, outcome).inc()

    async def _event_poster(self) -> None:
        while True:
            involved, type_, reason, message = await self.events.get()
            try:
                await k8s.post_event(involved, type_, reason, message)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Events are best effort
                log.warning("posting an Event failed: %s", exc)

    async def _resync(self) -> None:
        """A safety net: now and then, enqueue every object (no-ops cost no writes)."""
        while True:
            await asyncio.sleep(self.resync_seconds)
            await populate(self.indexes, self.namespaces, prune=True)
            for kind, index in VIEW_INDEXES.items():
                for ns, name in self.indexes.keys(index):
                    self.enqueue(kind, ns, name)

    # --- writing ---

    def post_event(self, involved: dict[str, Any], type_: str, reason: str, message: str) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self.events.put_nowait((involved, type_, reason, message))

    async def ensure_config_map(self, manifest: Mapping[str, Any]) -> bool:
        """Create a rendered ConfigMap unless it exists; True if created."""
        meta = manifest["metadata"]
        ident = (meta["namespace"], meta["name"])
        if self.lookup("rendered_config_map_names", ident) is not None:
            return False
        recent = self.created_config_maps.get(ident)
        if recent is not None and time.monotonic() - recent < 30:
            return False
        created = await k8s.create_config_map(manifest)
        self.created_config_maps[ident] = time.monotonic()
        if len(self.created_config_maps) > 10000:
            cutoff = time.monotonic() - 30
            for k in [k for k, t in self.created_config_maps.items() if t < cutoff]:
                del self.created_config_maps[k]
        return created

    async def write_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        uid: str,
        generation: int,
        current: Mapping[str, Any] | None,
        fields: Mapping[str, Any],
        verdicts: Iterable[Verdict],
    ) -> bool:
        """Merge-patch status if it differs; post an Event per condition transition."""
        key: Key = (kind, namespace, name)
        current = dict(current or {})
        before = list(current.get("conditions") or [])
        conditions = before
        for v in verdicts:
            conditions = set_condition(
                conditions, v.type, v.status, v.reason, v.message, generation
            )
        desired: dict[str, Any] = {**fields, "observedGeneration": generation}
        desired["conditions"] = conditions
        self.reconciled_generation[key] = generation
        if _same(desired, current):
            return False
        digest = canonical_json(desired)
        last = self.written.get(key)
        if last is not None and last[0] == digest and time.monotonic() - last[1] < 10:
            return False  # our identical write is still on its way back through the watch
        # Dependents wait until the watch shows this write. Its event may be processed
        # before the PATCH response is, so expect it (by content) before sending.
        self.awaiting[key] = ("", time.monotonic() + 5.0, desired)
        try:
            rv = await k8s.patch_status(PLURALS[kind], namespace, name, desired)
        except BaseException:
            self.awaiting.pop(key, None)
            raise
        pending = self.awaiting.get(key)
        if rv is None:
            self.awaiting.pop(key, None)
            return False
        if pending is not None and pending[2] is desired:  # not seen yet: also match the rv
            self.awaiting[key] = (rv, pending[1], desired)
        self.written[key] = (digest, time.monotonic())
        involved = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "name": name,
            "namespace": namespace,
            "uid": uid,
        }
        changed = transitions(before, conditions)
        # Every transition to False is its own Warning; the other transitions of one
        # reconcile share one Normal Event (reason of Ready if it is among them).
        for cond in changed:
            if cond["status"] == "False":
                self.post_event(involved, "Warning", cond["reason"], _describe(cond))
        normal = [c for c in changed if c["status"] != "False"]
        if normal:
            main = next((c for c in normal if c["type"] == "Ready"), normal[0])
            text = "; ".join(_describe(c) for c in [main, *(c for c in normal if c is not main)])
            self.post_event(involved, "Normal", main["reason"], text)
        return True


def _describe(cond: Mapping[str, Any]) -> str:
    text = f"{cond['type']} is {cond['status']} ({cond['reason']})"
    return f"{text}: {cond['message']}" if cond.get("message") else text


_MISSING: Any = object()


def _same(desired: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether writing ``desired`` would change ``current`` (None/[]/{} equal absence)."""
    for key, value in desired.items():
        have = current.get(key)
        if value in (None, [], {}) and have in (None, [], {}):
            continue
        if value != have:
            return False
    return True


#: kind → the index of per-object views (populated by the kind's module).
VIEW_INDEXES = {
    "Workspace": "workspace_views",
    "Skill": "skill_views",
    "Agent": "agent_views",
    "Topology": "topology_views",
}


def condition_status(status: Mapping[str, Any] | None, type_: str) -> tuple[str, str]:
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return str(cond.get("status", "Unknown")), str(cond.get("reason", ""))
    return "Unknown", ""


def base_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every view carries: identity, generations and our status."""
    meta = body.get("metadata") or {}
    status = {k: v for k, v in (body.get("status") or {}).items() if k != KOPF_STATUS_FIELD}
    ready, reason = condition_status(status, "Ready")
    return {
        "uid": meta.get("uid", ""),
        "generation": meta.get("generation", 0),
        "observed": status.get("observedGeneration"),
        "ready": ready == "True",
        "reason": reason,
        "status": status,
    }


def controller_of(memo: Any) -> Controller | None:
    ctl = getattr(memo, "swarmkit", None)
    return ctl if isinstance(ctl, Controller) else None


# --- operator settings and lifecycle --------------------------------------------------------


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class _QuietSuccess(logging.Filter):
    """Drop kopf's per-event "Handler 'x' succeeded." lines (one per watch event)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno <= logging.INFO and str(record.msg).endswith("succeeded."))


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    """Settings, the API client, the work queue and its workers."""
    # Never write annotations on user objects (Argo CD would see drift): kopf keeps any
    # bookkeeping in status.kopf. No handler here uses it, but a future one might.
    settings.persistence.progress_storage = kopf.StatusProgressStorage(
        field=f"status.{KOPF_STATUS_FIELD}.progress"
    )
    settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage(
        field=f"status.{KOPF_STATUS_FIELD}.lastHandledConfiguration"
    )
    settings.persistence.finalizer = "swarmkit.dev/operator"
    # Watches: the server ends each watch after ~4.5 minutes, the client gives up after 5
    # without bytes; a dead connection is noticed and re-established quickly.
    settings.watching.server_timeout = int(_env_float("SWARMKIT_WATCH_SERVER_TIMEOUT", 270))
    settings.watching.client_timeout = _env_float("SWARMKIT_WATCH_CLIENT_TIMEOUT", 300)
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 1.0
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 10
    settings.networking.error_backoffs = [1, 2, 4, 8, 16, 30]
    # We post our own Events (one per condition transition); kopf's per-log-line Events off.
    settings.posting.enabled = False
    if not os.environ.get("SWARMKIT_LOG_HANDLER_SUCCESS"):
        logging.getLogger("kopf.objects").addFilter(_QuietSuccess())
    settings.process.ultimate_exiting_timeout = 30

    config = load_config()
    workers = int(os.environ.get("SWARMKIT_WORKERS", "16"))
    k8s.configure(workers=workers + 4)
    namespaces = tuple(
        n for n in os.environ.get("SWARMKIT_WATCH_NAMESPACES", "").split(",") if n.strip()
    ) or tuple(config.watch_namespaces)
    ctl = Controller(
        config=config,
        namespaces=namespaces,
        workers=workers,
        gc_grace=_env_float("SWARMKIT_GC_GRACE_SECONDS", 10.0),
        resync_seconds=_env_float("SWARMKIT_RESYNC_SECONDS", 600.0),
    )
    started = time.monotonic()
    await populate(ctl.indexes, namespaces)
    log.info(
        "indexes pre-populated in %.2fs: %s",
        time.monotonic() - started,
        ", ".join(f"{k}={len(v)}" for k, v in sorted(ctl.indexes.data.items())),
    )
    memo.swarmkit = ctl
    metrics.set_object_counts(lambda: count_objects(ctl))
    await ctl.start()
    # Objects deleted between this LIST and kopf's first LIST never send DELETED: drop them
    # once kopf has surely listed everything (and again at every resync).
    ctl.tasks.append(asyncio.create_task(_prune_later(ctl, 30.0), name="swarmkit-prune"))
    log.info(
        "swarmkit-operator started: %d workers, script execution %s, %d pinned script(s)",
        workers,
        "allowed" if config.allow_script_execution else "disabled",
        len(config.allowed_scripts),
    )


async def _prune_later(ctl: Controller, delay: float) -> None:
    await asyncio.sleep(delay)
    await populate(ctl.indexes, ctl.namespaces, prune=True)


@kopf.on.cleanup()
async def shutdown(memo: kopf.Memo, **_: Any) -> None:
    """Graceful shutdown: finish in-flight reconciles, flush Events, close the client."""
    ctl = controller_of(memo)
    if ctl is not None:
        await ctl.stop()
    metrics.set_object_counts(None)
    k8s.shutdown()


@kopf.on.probe(id="workqueue")
def probe_queue(memo: kopf.Memo, **_: Any) -> dict[str, int]:
    """Liveness detail: queue depth and live workers (the probe fails if all died)."""
    ctl = controller_of(memo)
    if ctl is None:
        return {"depth": 0, "workers": 0}
    alive = sum(1 for t in ctl.tasks if not t.done())
    if ctl.tasks and alive == 0:
        raise RuntimeError("every reconcile worker has stopped")
    return {"depth": len(ctl.queue), "busy": ctl.queue.busy, "workers": alive}


def count_objects(ctl: Controller) -> Iterator[tuple[str, str, str, int]]:
    for kind, index in VIEW_INDEXES.items():
        counts: dict[tuple[str, str], int] = {}
        for key in ctl.indexes.keys(index):
            view = ctl.lookup(index, key)
            if view is None:
                continue
            for cond in view["status"].get("conditions") or ():
                ident = (str(cond.get("type")), str(cond.get("status")))
                counts[ident] = counts.get(ident, 0) + 1
        for (cond_type, status), count in sorted(counts.items()):
            yield kind, cond_type, status, count


# --- ConfigMaps: rendered ones, run bundles' pins, and users' (skill files, flow data) -----

_RENDERED: dict[str, Any] = {COMPONENT_LABEL: PRESENT, **MANAGED_BY}
_COMPONENT_KINDS = {"skill": "Skill", "agent": "Agent", "workspace": "Workspace"}


@index("configmaps", id="rendered_config_maps", labels=_RENDERED)
def rendered_config_maps(
    namespace: str | None, name: str, uid: str, labels: Mapping[str, str], **_: Any
) -> dict[Any, Any]:
    """namespace → the rendered skill/agent/workspace ConfigMaps in it."""
    component = labels.get(COMPONENT_LABEL, "")
    return {
        namespace: {
            "name": name,
            "uid": uid,
            "kind": _COMPONENT_KINDS.get(component, ""),
            "owner": labels.get(f"swarmkit.dev/{component}", ""),
        }
    }


@index("configmaps", id="rendered_config_map_names", labels=_RENDERED)
def rendered_config_map_names(
    namespace: str | None, name: str, uid: str, **_: Any
) -> dict[Any, Any]:
    return {(namespace, name): uid}


@index("configmaps", id="pinned_config_maps", labels={RUN_LABEL: PRESENT})
def pinned_config_maps(
    namespace: str | None,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    **_: Any,
) -> dict[Any, Any]:
    """namespace → each Run bundle's pinned ConfigMaps and whether its Run finished."""
    pins = tuple(p.strip() for p in annotations.get(PINNED_ANNOTATION, "").split(",") if p.strip())
    finished = labels.get(RUN_FINISHED_LABEL) == "true"
    return {namespace: {"bundle": name, "pins": pins, "finished": finished}}


@kopf.on.event("v1", "configmaps")
async def config_map_event(
    type: str | None,
    body: kopf.Body,
    namespace: str | None,
    name: str,
    uid: str,
    labels: Mapping[str, str],
    memo: kopf.Memo,
    **_: Any,
) -> None:
    ctl = controller_of(memo)
    if ctl is None or namespace is None:
        return
    if type == "DELETED":
        ctl.indexes.delete("configmaps", uid)
    else:
        ctl.indexes.update("configmaps", body)
    if (
        COMPONENT_LABEL in labels
        and labels.get("app.kubernetes.io/managed-by") == MANAGED_BY["app.kubernetes.io/managed-by"]
    ):
        if type == "DELETED":  # deleted under us: let its owner re-create it if still used
            ctl.created_config_maps.pop((namespace, name), None)
            owner_kind = _COMPONENT_KINDS.get(labels.get(COMPONENT_LABEL, ""))
            owner = labels.get(f"swarmkit.dev/{labels.get(COMPONENT_LABEL)}")
            if owner_kind and owner:
                ctl.enqueue(owner_kind, namespace, owner)
        return
    if RUN_LABEL in labels:
        ctl.enqueue_gc(namespace, delay=1.0)
        return
    ctl.enqueue_many("Skill", namespace, ctl.lookup_all("skill_by_config_map", (namespace, name)))
    ctl.enqueue_many(
        "Workspace", namespace, ctl.lookup_all("workspace_by_config_map", (namespace, name))
    )


@reconciler("GC")
async def collect_garbage(ctl: Controller, namespace: str, _name: str, force: bool) -> str:
    """Delete rendered ConfigMaps nothing refers to any more, after a grace period.

    Kept: every object's current render, every skill ConfigMap an Agent's render resolves,
    everything a Run bundle pins while its Run is unfinished, and anything this process
    just created for an owner whose status write is still on its way.
    """
    keep: set[str] = set()
    for index in VIEW_INDEXES.values():
        for key in ctl.indexes.keys(index):
            if key[0] != namespace:
                continue
            view = ctl.lookup(index, key)
            if view is None:
                continue
            status = view["status"]
            keep.add(str(status.get("renderedConfigMap") or ""))
            for resolved in status.get("resolvedSkills") or ():
                keep.add(str(resolved.get("renderedConfigMap") or ""))
    for pin in ctl.lookup_all("pinned_config_maps", namespace):
        if not pin["finished"]:
            keep.update(pin["pins"])
    now = time.monotonic()
    next_check: float | None = None
    deleted = 0
    for cm in ctl.lookup_all("rendered_config_maps", namespace):
        ident = (namespace, cm["name"])
        created = ctl.created_config_maps.get(ident)
        owner: Key = (cm["kind"], namespace, cm["owner"])
        in_flight = created is not None and now - created < 60 and ctl.pending(owner, None)
        if cm["name"] in keep or in_flight:
            ctl.unreferenced_since.pop(ident, None)
            if in_flight:
                next_check = ctl.gc_grace if next_check is None else min(next_check, ctl.gc_grace)
            continue
        since = ctl.unreferenced_since.setdefault(ident, now)
        if now - since >= ctl.gc_grace:
            if await k8s.delete_config_map(namespace, cm["name"], cm["uid"]):
                deleted += 1
                log.info("deleted unreferenced ConfigMap %s/%s", namespace, cm["name"])
            ctl.unreferenced_since.pop(ident, None)
        else:
            wait = ctl.gc_grace - (now - since)
            next_check = wait if next_check is None else min(next_check, wait)
    if next_check is not None:
        ctl.enqueue_gc(namespace, delay=next_check + 0.1)
    return "changed" if deleted else "unchanged"
