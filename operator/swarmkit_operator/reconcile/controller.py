"""The reconcile controller: workers running each kind's reconciler off the work queue.

:class:`Controller` owns the shared in-process state (indexes, queue, what was written
and is not yet observed, who defers on whom) and the loop: workers and the Event poster
(the resync is a Periodic of the manager's). Each reconciled kind is declared once, as a
:class:`Kind` in its module (its API kind and so its plural, its lane, its indexes, what
its dependents compare and who they are, its reconcile function); the composition root
(``handlers/root.py``) collects the declarations and builds one controller at start-up,
with everything it needs in its constructor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from swarmkit_api.resources import KindInfo

from .. import k8s, metrics
from ..builders import Verdict, content_digest, trust
from ..config import OperatorConfig, Settings
from ..indexes import Indexes, IndexFn, IndexId, populate, without_managed_fields
from ..runtime.leader import Leadership
from ..runtime.workqueue import Result, Workers, WorkQueue
from . import faults, proofs
from .book import Bookkeeping, Renders
from .status import StatusOf, same_status
from .status import write_status as _write_status
from .views import MISSING, Key, view_index

log = logging.getLogger("swarmkit_operator")


def reconcile_queue(priority: Mapping[str, int]) -> WorkQueue[Key]:
    """The reconcile work queue: a lane per kind priority (a kind not declared: lane 0),
    its depth a metric."""
    return WorkQueue(
        lane=lambda key: priority.get(key[0], 0),
        lanes=max(priority.values(), default=0) + 1,
        depth=metrics.QUEUE_DEPTH.set,
    )


class Deferred(Exception):
    """Inputs (keys) are still being reconciled: try again once they settle."""

    def __init__(self, keys: Iterable[Key]) -> None:
        self.keys = list(keys)
        super().__init__("waiting for " + ", ".join(f"{k[0].lower()} {k[2]}" for k in self.keys))


#: ``fn(ctl, namespace, name, force)`` → outcome label; ``force`` once deferring took too long.
Reconciler = Callable[["Controller", str, str, bool], Awaitable[str]]


@dataclass(frozen=True)
class Observation:
    """What a watch event changed for an object's dependents."""

    changed: bool
    previous: Any
    view: Any


#: ``fn(ctl, namespace, name, observation, body)``: after the bookkeeping of an event of
#: the kind's own object, enqueue what depends on it (``observation.changed``: what the
#: dependents compare changed).
Dependents = Callable[["Controller", str, str, Observation, Mapping[str, Any]], None]


def existence_changed(seen: Observation) -> bool:
    """The event created or deleted the object (a :class:`Watch`'s ``when``)."""
    return (seen.view is MISSING) != (seen.previous is None or seen.previous is MISSING)


@dataclass(frozen=True)
class Watch:
    """controller-runtime's ``Watches(source, EnqueueRequestsFromMapFunc)``: an event of
    another kind's object enqueues objects of the declaring kind, those ``index`` maps it
    to (``(namespace, source name)`` → their names), when ``when`` holds of the event's
    :class:`Observation`. Declared on the kind that is enqueued, so a kind says in one place
    what wakes it; the source kind's event function runs it after its own ``dependents``."""

    source: str
    index: IndexId
    when: Callable[[Observation], bool] = lambda seen: seen.changed


@dataclass(frozen=True)
class Kind:
    """One reconciled kind, declared once (controller-runtime's ``For``/``Watches`` and
    ``Reconciler`` in one value). What a new kind needs is one of these in its module and
    its name in the composition root's ``KINDS``; nothing else lists kinds.

    A kind with an ``api`` has objects: their watch stream gets one event function
    (:meth:`Controller.observe_event`, then ``dependents``), which keeps the indexes over
    its plural current, enqueues the object when its spec changed (never for its own
    status echo) and wakes its dependents when ``dependents_view`` changed. A kind without
    one (``GC``, ``SkillGrants``) is only a key others enqueue.
    """

    kind: str
    #: Its lane in the work queue: inputs before their dependents, so a burst settles
    #: bottom-up (a Workspace before the Agents using it, garbage collection last).
    priority: int
    reconcile: Reconciler
    #: The API kind (its plural is where status goes and what is watched).
    api: KindInfo | None = None
    #: The index functions (``@index``) over its objects, the views index first.
    indexes: tuple[IndexFn, ...] = ()
    #: A view (its entry in the views index, None when gone) → what dependents compare,
    #: its last element whether the status is fresh.
    dependents_view: Callable[[Any], Any] | None = None
    dependents: Dependents | None = None
    #: Other kinds' events that enqueue objects of this one (:class:`Watch`).
    watches: tuple[Watch, ...] = ()
    #: Keep the event's body for the reconcile (saves it a GET; the Skill's sources).
    keep_body: bool = False

    @property
    def plural(self) -> str:
        return self.api.plural if self.api is not None else ""

    @property
    def view_index(self) -> IndexId | None:
        """The index of its per-object views (None for a kind without objects)."""
        return view_index(self.kind) if self.api is not None else None


@dataclass(frozen=True)
class ControllerSettings:
    """How the reconcile loop runs: parsed once from the operator's
    :class:`~swarmkit_operator.config.Settings` (:meth:`of`), never changed after."""

    #: Watched namespaces (empty: every namespace): what a prune re-LISTs.
    namespaces: tuple[str, ...] = ()
    workers: int = 16
    #: Seconds before a deferred reconcile runs again (a backstop: a settled input wakes it).
    defer_delay: float = 1.0
    #: Seconds of deferring after which a reconcile runs with ``force``.
    max_defer: float = 15.0
    #: Seconds a rendered ConfigMap nothing refers to is kept before it is collected.
    gc_grace: float = 10.0
    #: Seconds between full resyncs (0: none; the composition root schedules them).
    resync_seconds: float = 600.0

    @classmethod
    def of(cls, settings: Settings) -> ControllerSettings:
        return cls(
            namespaces=settings.namespaces,
            workers=settings.workers,
            gc_grace=settings.gc_grace_seconds,
            resync_seconds=settings.resync_seconds,
        )


@dataclass(frozen=True)
class Services:
    """What the reconcilers call besides the API and the indexes, built by the composition
    root before the controller and given to its constructor (none is set afterwards)."""

    #: Whether this replica leads (a standby posts no Events: its workers do not run).
    leadership: Leadership = field(default_factory=Leadership.always)
    #: How a served Topology resolves its target, as a Run would: the Runs controller's
    #: ``Resolver`` (typed loosely: the Runs controller sits above this layer;
    #: ``handlers/topology.py`` narrows it).
    resolver: object | None = None
    #: The Reviews owner (a promotion's Review is opened through it; typed loosely like
    #: ``resolver``: it sits above this layer; ``swarmkit_operator.promotion`` narrows it).
    reviews: object | None = None
    #: A Skill's ``status.usage`` (the skill library's).
    skill_usage: Callable[[str, str], Any] | None = None


@dataclass
class Controller:
    """The in-process reconcile machinery shared by the handlers (in the application
    context, :class:`~swarmkit_operator.handlers.common.App`), in typed parts: the
    declarations it runs (``kinds``, ``reconcilers``), how it runs (``settings``), what its
    reconcilers call (``services``), the shared ``indexes``, its work ``queue``, and what it
    remembers per object (``book``) and per rendered ConfigMap (``renders``)."""

    config: OperatorConfig
    indexes: Indexes = field(default_factory=lambda: Indexes(()))
    #: kind → its declaration (the composition root's ``KINDS``).
    kinds: Mapping[str, Kind] = field(default_factory=dict)
    #: kind → its reconciler (by default each declaration's).
    reconcilers: Mapping[str, Reconciler] = field(default_factory=dict)
    settings: ControllerSettings = field(default_factory=ControllerSettings)
    services: Services = field(default_factory=Services)
    queue: WorkQueue[Key] = field(default_factory=lambda: reconcile_queue({}))
    book: Bookkeeping = field(default_factory=Bookkeeping)
    renders: Renders = field(default_factory=Renders)
    #: The workers' and the Event poster's tasks (:meth:`start`).
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    #: Events queued for the poster (``post_event``).
    events: asyncio.Queue[tuple[dict[str, Any], str, str, str]] = field(
        default_factory=lambda: asyncio.Queue(maxsize=10000)
    )

    def __post_init__(self) -> None:
        if self.kinds:
            self.queue = reconcile_queue({k.kind: k.priority for k in self.kinds.values()})
            if not self.reconcilers:
                self.reconcilers = {k.kind: k.reconcile for k in self.kinds.values()}

    def with_views(self) -> list[tuple[str, IndexId]]:
        """(kind, views index) of every declared kind with objects."""
        return [(k.kind, k.view_index) for k in self.kinds.values() if k.view_index is not None]

    # --- indexes ---

    def lookup(self, index: IndexId, key: Any) -> Any:
        """The single value of ``key`` in ``index`` (None if absent; an index these
        indexes were not built with is :class:`~swarmkit_operator.indexes.UnknownIndex`)."""
        return self.indexes.first(index, key)

    def lookup_all(self, index: IndexId, key: Any) -> list[Any]:
        return self.indexes.values(index, key)

    # --- queueing ---

    def enqueue(
        self, kind: str, namespace: str, name: str, delay: float = 0.0, background: bool = False
    ) -> None:
        self.queue.add((kind, namespace, name), delay, background)

    def enqueue_many(self, kind: str, namespace: str, names: Iterable[str]) -> None:
        for name in names:
            self.queue.add((kind, namespace, name))

    def enqueue_gc(self, namespace: str, delay: float | None = None) -> None:
        self.queue.add(("GC", namespace, ""), self.settings.gc_grace if delay is None else delay)

    def pending(self, key: Key, view: Mapping[str, Any] | None) -> bool:
        """Whether ``key``'s status is about to change (so dependents should wait)."""
        if self.queue.pending(key):
            return True
        waiting = self.book.awaiting.get(key)
        if waiting is not None:
            if time.monotonic() < waiting[1]:
                return True
            self.book.awaiting.pop(key, None)
        return view is not None and view.get("observed") != view.get("generation")

    def observed(self, key: Key, body: Mapping[str, Any]) -> None:
        """A watch event for ``key`` arrived: our own write is visible once an event carries
        its resourceVersion or its content (a re-list may skip straight to a later event)."""
        waiting = self.book.awaiting.get(key)
        if waiting is None:
            return
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if waiting[0] == rv or same_status(waiting[2], body.get("status") or {}):
            self.book.awaiting.pop(key, None)
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
        return self.book.reconciled_generation.get(key) != generation

    def forget(self, key: Key) -> None:
        """The object is gone: drop what this process remembered of it."""
        self.book.forget(key)
        self.queue.forget(key)
        self._wake(key)

    def changed(self, key: Key, view: Any, fresh: bool = True) -> bool:
        """Whether ``view`` (what dependents care about) differs from the last one seen.

        A view that is not ``fresh`` (its object's status lags its spec) is not news yet:
        dependents would only wait for it; they hear of it once its status catches up.
        """
        if not fresh:
            return False
        seen = self.book.seen
        if seen.get(key, MISSING) == view:
            return False
        if view is MISSING:
            seen.pop(key, None)
        else:
            seen[key] = view
        return True

    def observe_event(
        self,
        kind: str,
        plural: str,
        event_type: Any,
        body: Mapping[str, Any],
        namespace: str,
        name: str,
        view_of: Callable[[Any], Any],
        keep_body: bool = False,
    ) -> Observation:
        """The bookkeeping every reconciled kind does on a watch event of its own objects:
        indexes, self-reconcile, and whether what its dependents care about changed.

        ``view_of`` turns the object's entry in ``<singular>_views`` into the tuple its
        dependents compare (its last element says whether the status is fresh).
        """
        key = (kind, namespace, name)
        self.observed(key, body)
        previous = self.book.seen.get(key)
        if event_type == "DELETED":
            self.indexes.delete(plural, str((body.get("metadata") or {}).get("uid", "")))
            self.forget(key)
            view = MISSING
        else:
            self.indexes.update(plural, body, listed=event_type is None)
            if self.should_reconcile_self(key, body, event_type):
                if keep_body:
                    self.book.bodies[key] = without_managed_fields(body)
                # A listed object whose status is current only needs checking: in the
                # background, behind every new or edited object (see WorkQueue).
                generation = (body.get("metadata") or {}).get("generation")
                settled = (body.get("status") or {}).get("observedGeneration") == generation
                self.enqueue(kind, namespace, name, background=event_type is None and settled)
            views = view_index(kind)
            view = view_of(None if views is None else self.lookup(views, (namespace, name)))
        fresh = view is MISSING or view[-1]
        return Observation(self.changed(key, view, fresh=fresh), previous, view)

    # --- the loop ---

    async def start(self) -> None:
        workers = Workers(
            self.queue,
            self._process,
            "swarmkit-worker",
            kind=lambda key: key[0],
            after=self._wake,
            on_error=self._retry_delay,
            describe=lambda key: f"{key[1]}/{key[2]}",
        )
        self.tasks += workers.start(self.settings.workers)
        self.tasks.append(asyncio.create_task(self._event_poster(), name="swarmkit-events"))

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

    def health(self) -> dict[str, int]:
        """The liveness probe's detail: queue depth, busy and live workers; raises when
        every worker it started has stopped (the process is no use any more)."""
        alive = sum(1 for t in self.tasks if not t.done())
        if self.tasks and alive == 0:
            raise RuntimeError("every reconcile worker has stopped")
        return {"depth": len(self.queue), "busy": self.queue.busy, "workers": alive}

    def _wake(self, key: Key) -> None:
        """``key`` may have settled: re-run what deferred on it (if it really did)."""
        book = self.book
        if key not in book.waiters or self.queue.pending(key) or key in book.awaiting:
            return
        for waiter in book.waiters.pop(key):
            self.queue.add(waiter)

    async def _process(self, key: Key) -> Result:
        kind, namespace, name = key
        fn = self.reconcilers.get(kind)
        if fn is None:
            return Result("unknown")
        started = time.monotonic()
        since = self.book.deferred_since.get(key)
        force = since is not None and started - since > self.settings.max_defer
        try:
            index = view_index(kind)
            view = None
            if index is not None and index in self.indexes.data:
                view = self.lookup(index, (namespace, name))
            fault = faults.decoded_fault(view)
            if fault is not None:  # cut when decoded: reported, never reconciled
                await faults.report(self, kind, namespace, name, fault)
                outcome = "invalid"
            else:
                outcome = await fn(self, namespace, name, force)
        except Deferred as exc:
            self.book.deferred_since.setdefault(key, started)
            log.debug("deferring %s %s/%s: %s", kind, namespace, name, exc)
            for waited in exc.keys:  # woken as soon as each settles; the delay is a backstop
                self.book.waiters.setdefault(waited, set()).add(key)
                self.queue.promote(waited)  # a background check someone waits for
            return Result("deferred", self.settings.defer_delay, forget=False)
        self.book.deferred_since.pop(key, None)
        return Result(outcome)

    async def _retry_delay(self, key: Key, exc: Exception) -> float | None:
        """A failed reconcile's retry: the queue's backoff, unless the failure is the
        object's own fault, now its condition (then a minute: a fix re-enqueues it)."""
        return 60.0 if await self._report_fault(key, exc) else None

    async def _report_fault(self, key: Key, exc: Exception) -> bool:
        """Whether ``exc`` is the object's fault and now its condition (:mod:`.faults`)."""
        verdict = faults.raised_fault(exc)
        if verdict is None:
            return False
        try:
            return await faults.report(self, *key, verdict)
        except asyncio.CancelledError:
            raise
        except Exception as failed:  # the retry below reports it again
            log.warning("reporting %s %s/%s's fault failed: %s", *key, failed)
            return False

    async def _event_poster(self) -> None:
        while True:
            # What queued up meanwhile goes together: the same reason about the same
            # object is one write with a count (k8s.post_event correlates across batches).
            batch = [await self.events.get()]
            while not self.events.empty():
                batch.append(self.events.get_nowait())
            for involved, type_, reason, message, count in k8s.coalesce_events(batch):
                try:
                    await k8s.post_event(involved, type_, reason, message, count)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # Events are best effort
                    log.warning("posting an Event failed: %s", exc)

    async def resync(self) -> None:
        """A safety net, every ``resync_seconds`` (a Periodic of the leader's): re-LIST,
        drop what vanished, and enqueue every object (no-ops cost no writes)."""
        await self.prune()
        for kind, index in self.with_views():
            for ns, name in self.indexes.keys(index):
                self.enqueue(kind, ns, name, background=True)

    def enqueue_unsettled(self) -> int:
        """Enqueue every indexed object whose status lags its spec (created or edited while
        no operator ran), without waiting for the watches' own listing: the indexes are
        complete already. How many were enqueued."""
        count = 0
        for kind, index in self.with_views():
            for ns, name in self.indexes.keys(index):
                view = self.lookup(index, (ns, name))
                if view is not None and view.get("observed") != view.get("generation"):
                    self.enqueue(kind, ns, name)
                    count += 1
        return count

    async def prune(self) -> None:
        """Re-LIST and drop from the indexes what vanished since they were filled (an
        object deleted between a LIST and its watch's start never sends DELETED)."""
        await populate(self.indexes, self.settings.namespaces, prune=True)

    # --- writing ---

    def post_event(self, involved: dict[str, Any], type_: str, reason: str, message: str) -> None:
        # Queued, posted by one task: a reconcile never waits on an Event (dropped if full).
        leadership = self.services.leadership
        if not leadership.leading and leadership.elected:
            return
        with contextlib.suppress(asyncio.QueueFull):
            self.events.put_nowait((involved, type_, reason, message))

    async def ensure_config_map(self, manifest: Mapping[str, Any]) -> bool:
        """Create a rendered ConfigMap unless it exists; True if created."""
        meta = manifest["metadata"]
        ident = (meta["namespace"], meta["name"])
        if self.lookup(IndexId.RENDERED_CONFIG_MAP_NAMES, ident) is not None:
            return False
        # Created moments ago, not in the index yet (its watch event is on its way).
        made = self.renders.created
        recent = made.get(ident)
        if recent is not None and time.monotonic() - recent < 30:
            return False
        uid = await k8s.create_config_map(manifest)
        if uid is None:  # a 409 is someone's ConfigMap of that name, not ours on its way
            return False
        made[ident] = time.monotonic()
        # Its creation answered is the proof it is the render: no read-back or LIST later.
        self.renders.verified[ident] = uid
        if len(made) > 10000:
            cutoff = time.monotonic() - 30
            for k in [k for k, t in made.items() if t < cutoff]:
                del made[k]
        return True

    async def foreign_render(self, manifest: Mapping[str, Any], owner: Key) -> str | None:
        """Why the ConfigMap bearing a render's name (one :meth:`ensure_config_map` did not
        create) is not that render, e.g. created under the name first by a namespace editor;
        None when it is exactly the render, or was gone and is now the render written.
        Names are content-addressed, so comparing with ``manifest`` is the proof."""
        ident = (manifest["metadata"]["namespace"], manifest["metadata"]["name"])
        uid = self.lookup(IndexId.RENDERED_CONFIG_MAP_NAMES, ident)
        renders = self.renders
        if uid is not None and renders.verified.get(ident) == uid:
            return None
        if uid is not None and await self._listed_as(manifest, ident, uid):
            renders.verified[ident] = uid
            renders.foreign.pop(ident, None)
            return None
        found = await k8s.read_config_map(*ident)
        if found is None:  # deleted since: write the render now
            made = await k8s.create_config_map(manifest)
            if made is not None:
                renders.created[ident] = time.monotonic()
                renders.verified[ident] = made
                return None
            found = await k8s.read_config_map(*ident)
            if found is None:
                return "it was deleted and re-created while being read back"
        why = trust.render_mismatch(manifest, found)
        if why is None:
            renders.verified[ident] = str((found.get("metadata") or {}).get("uid", ""))
            renders.foreign.pop(ident, None)
        else:
            renders.verified.pop(ident, None)
            renders.foreign[ident] = owner
        return why

    async def _listed_as(
        self, manifest: Mapping[str, Any], ident: tuple[str, str], uid: str
    ) -> bool:
        """Whether this process's one LIST of the namespace's renders found ``uid`` under
        the name, immutable, with exactly the render's content (:mod:`.proofs`)."""
        record = await proofs.listed_proof(self.renders, self.indexes, *ident)
        if record is None or record[0] != uid:
            return False
        return record[1] == content_digest(
            manifest.get("data") or {}, manifest.get("binaryData") or {}
        )

    async def write_status(
        self,
        target: StatusOf,
        fields: Mapping[str, Any],
        verdicts: Iterable[Verdict],
        manager: str = k8s.RECONCILE_MANAGER,
    ) -> bool:
        """Apply status if it differs; post an Event per condition transition
        (:func:`.status.write_status`)."""
        return await _write_status(self.book, self.post_event, target, fields, verdicts, manager)
