"""The composition root: the one place that builds the operator, in an order written as code.

``__main__`` parses the settings (:class:`~swarmkit_operator.config.Settings`) and hands
them to kopf's memo; kopf runs the operator (entry point, lifecycle, probes, logging) and
calls one start-up handler, :func:`start`, which builds every component in this order and
passes each what it needs in its constructor:

1. kopf's settings (:func:`.common.configure_kopf`) and the API client;
2. the wiring (:func:`wiring`: the marks ``@index``, ``@reconciler``, ``@on_event`` of the
   modules in :data:`MODULES`, collected in that order, so the functions of one watch
   stream run in that order), its indexes from one paged LIST per resource (each page
   indexed while the next is read), the skill library's records read meanwhile, and the
   :class:`~swarmkit_operator.runtime.Manager` (leader election and the write gate);
3. the one :class:`~swarmkit_operator.workload.resolve.Resolver` (Runs, served Topologies
   and gateways resolve through it), the Reviews controller (the one writer of Review
   status) and the Runs controller that asks it;
4. the skill library, seeded from the indexes;
5. the reconcile :class:`~swarmkit_operator.reconcile.controller.Controller` over the
   indexes and reconcilers, its settings parsed once
   (:class:`~swarmkit_operator.reconcile.controller.ControllerSettings`), with its
   :class:`~swarmkit_operator.reconcile.controller.Services` (the leadership, the resolver,
   the Reviews owner and the library's usage);
6. the gateways controller (with the same resolver), and 7. the web view when asked for;
8. the :class:`~.common.App` context holding all of them (every event function gets it as
   ``app``; kopf's memo holds nothing else), every loop as one of the manager's runnables
   (the writers and every :class:`~swarmkit_operator.runtime.Periodic` only in the
   leader; the watch streams, from step 2's LISTs, in every replica);
9. :meth:`Manager.start`: start the streams, elect (or lead at once), start the writers.

:func:`stop` takes them down in the reverse order (:meth:`.common.App.close`). Nothing is
registered when a module is imported: what runs is what this module names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION

from .. import k8s, metrics, serving
from ..config import (
    CONFIG_ENV,
    ConfigError,
    OperatorConfig,
    Settings,
    environment,
    load_config,
    settings_from,
)
from ..delivery import PENDING_DELIVERIES, Delivery
from ..gateways import GatewayController
from ..indexes import (
    CORE_MAINTAINED,
    RESOURCES,
    Indexes,
    IndexId,
    IndexSpec,
    Listing,
    populate,
)
from ..library import SkillLibrary
from ..marks import marked, marks_of
from ..reconcile import gc
from ..reconcile.controller import Controller, ControllerSettings, Kind, Services, Watch
from ..reconcile.views import count_objects
from ..reviews import ReviewsController
from ..runs import Indexes as RunIndexes
from ..runs import RunController, spend
from ..runs.retention import Retention
from ..runs.schedule import Scheduler
from ..runtime import LeaseSettings, Manager, Periodic, Runnable, lease_settings
from ..runtime.allocator import collector_paused, freeze_survivors, limit_malloc_arenas
from ..watching import Reflector, reflectors
from ..webview import Access, Sources, WebView, parse_address
from ..workload.resolve import Resolver
from . import (
    agent,
    common,
    delivery,
    evaluation,
    funnel,
    gateway,
    library,
    promotion,
    review,
    run,
    skill,
    topology,
    workspace,
)
from .common import App
from .events import (
    EventFn,
    EventMark,
    EventRegistry,
    Stream,
    deliverer,
    resource_of,
    selector_of,
    stream_of,
)

log = logging.getLogger("swarmkit_operator")

#: Every reconciled kind, declared once in its module (:class:`Kind`): what a new kind
#: needs is its declaration and its place here, in the order its events are handled.
KINDS: tuple[Kind, ...] = (
    workspace.KIND,
    skill.KIND,
    skill.GRANTS,
    agent.KIND,
    funnel.KIND,
    topology.KIND,
    evaluation.EVAL_SET_KIND,
    evaluation.EVAL_RUN_KIND,
    gc.GC,
)
#: The shared watches, whose functions run first on their streams (the ConfigMaps, the
#: renders' collection, the served Deployments' builders).
SHARED: tuple[ModuleType, ...] = (common, gc, serving)
#: What only reads the kinds' indexes and kicks its own controller, after the kinds.
CONTROLLERS: tuple[ModuleType, ...] = (review, run, gateway, delivery, library, promotion)


def kind_modules(kinds: Sequence[Kind]) -> tuple[ModuleType, ...]:
    """The modules declaring ``kinds``, in order, apart from the shared ones."""
    found = (sys.modules[k.reconcile.__module__] for k in kinds)
    return tuple(m for m in dict.fromkeys(found) if m not in SHARED)


#: Every module whose marks the operator runs, in the order their functions run on one
#: stream: the shared watches, the kinds' modules (each kind's event function first: it
#: keeps the indexes over its plural current), then the controllers that read them.
MODULES: tuple[ModuleType, ...] = (*SHARED, *kind_modules(KINDS), *CONTROLLERS)


@dataclass(frozen=True)
class Wiring:
    """What the kinds' declarations and the marks of :data:`MODULES` add up to."""

    index_specs: tuple[IndexSpec, ...]
    kinds: Mapping[str, Kind]
    events: EventRegistry

    def indexes(self) -> Indexes:
        """New, empty indexes of every declared and marked index function."""
        return Indexes(self.index_specs)

    def controller(
        self,
        config: OperatorConfig,
        settings: ControllerSettings | None = None,
        services: Services | None = None,
        indexes: Indexes | None = None,
    ) -> Controller:
        """A reconcile controller over every declared kind (and, unless ``indexes`` is
        given, new indexes)."""
        return Controller(
            config=config,
            kinds=self.kinds,
            indexes=self.indexes() if indexes is None else indexes,
            settings=settings or ControllerSettings(),
            services=services or Services(),
        )

    @property
    def priority(self) -> Mapping[str, int]:
        """kind → its lane in the reconcile queue."""
        return {k.kind: k.priority for k in self.kinds.values()}


def _declared_specs(kind: Kind) -> list[IndexSpec]:
    """The index specs a kind declares, each over its own plural."""
    specs = [one for fn in kind.indexes for one in marks_of(fn) if isinstance(one, IndexSpec)]
    if len(specs) != len(kind.indexes) or any(s.resource != kind.plural for s in specs):
        raise RuntimeError(f"{kind.kind}: every declared index is an @index over {kind.plural}")
    if kind.view_index and (not specs or specs[0].id != kind.view_index):
        raise RuntimeError(f"{kind.kind}: its first index is {kind.view_index}")
    return specs


def wiring(modules: Sequence[ModuleType] = MODULES, kinds: Sequence[Kind] = KINDS) -> Wiring:
    """The kinds' declarations and the marks of ``modules``, in order, as index specs and
    the watch streams' functions."""
    by_name: dict[str, Kind] = {}
    specs: dict[IndexId, IndexSpec] = {}
    for kind in kinds:
        if kind.kind in by_name:
            raise RuntimeError(f"two declarations of {kind.kind}")
        by_name[kind.kind] = kind
        for spec in _declared_specs(kind):
            _declare(specs, spec)
    watchers = _watchers(by_name)
    functions: list[tuple[EventFn, Stream, bool]] = []
    for module in modules:
        for kind in kinds:  # a kind's own event function first in its module
            if kind.api is not None and kind.reconcile.__module__ == module.__name__:
                stream = stream_of(RESOURCES[kind.plural], "")
                event = common.kind_event(kind, watchers.get(kind.kind, ()))
                functions.append((event, stream, False))
        for fn, one in marked(module):
            if isinstance(one, IndexSpec):
                _declare(specs, one)
            elif isinstance(one, EventMark):
                functions.append((fn, one.stream, one.metadata_only))
    _check_watched_indexes(by_name, specs)
    events = EventRegistry(index_specs=tuple(specs.values()))
    # An index over a resource neither a kind nor a shared module watches gets a function
    # keeping it current, first on its stream: the others read the index updated.
    maintained = CORE_MAINTAINED | {k.plural for k in kinds if k.api is not None}
    for spec in specs.values():
        if spec.resource in maintained:
            continue
        stream = stream_of(spec.listed, selector_of(spec.labels))
        if common.index_event not in events.registered(*stream[0], selector=stream[1]):
            events.add(stream, common.index_event, metadata_only=spec.metadata_only)
    for fn, stream, metadata_only in functions:
        events.add(stream, fn, metadata_only=metadata_only)
    return Wiring(tuple(specs.values()), by_name, events)


def _declare(specs: dict[IndexId, IndexSpec], spec: IndexSpec) -> None:
    """Add ``spec`` to ``specs``: the same spec again is one (a kind's indexes are marks of
    its module too); another function under the same id is a start-up error, never the
    first one silently kept."""
    known = specs.setdefault(spec.id, spec)
    if known is not spec:
        raise RuntimeError(
            f"two functions declare the index {spec.id}: "
            f"{known.fn.__module__}.{known.fn.__qualname__} and "
            f"{spec.fn.__module__}.{spec.fn.__qualname__}"
        )


def _check_watched_indexes(kinds: Mapping[str, Kind], specs: Mapping[IndexId, IndexSpec]) -> None:
    """Every :class:`Watch` maps its events through an index some wired module declares:
    one that none does would fail on the first event of its source, not at start-up."""
    for kind in kinds.values():
        for watch in kind.watches:
            if watch.index not in specs:
                raise RuntimeError(
                    f"{kind.kind} watches {watch.source} through {watch.index}: "
                    "no wired module declares that index"
                )


def _watchers(kinds: Mapping[str, Kind]) -> dict[str, list[tuple[str, Watch]]]:
    """source kind → (the kind watching it, the watch), from every declaration's
    ``watches``; a watch of a kind that is not declared with objects is a start-up error."""
    out: dict[str, list[tuple[str, Watch]]] = {}
    for kind in kinds.values():
        for watch in kind.watches:
            source = kinds.get(watch.source)
            if source is None or source.api is None:
                raise RuntimeError(f"{kind.kind} watches {watch.source}: no such kind")
            out.setdefault(watch.source, []).append((kind.kind, watch))
    return out


#: Seconds kopf waits before it calls a failed start-up again (its default is 60 s).
START_RETRY_SECONDS = 2.0
#: Seconds after the start-up LISTs before the one re-LIST that drops what vanished
#: meanwhile (the streams surely listed everything by then).
PRUNE_AFTER_SECONDS = 30.0


def settings_of(memo: kopf.Memo) -> Settings:
    """The settings ``__main__`` parsed (kopf's memo carries them), or, under a plain
    ``kopf run -m swarmkit_operator.handlers``, the same parsed from the environment once
    (kept in the memo), with the memory settings ``__main__`` applies first thing: the
    arena limit and the imports frozen (runtime/allocator.py). Once only: a start retried
    after a failure would freeze the failed one's traceback, a cycle never collected."""
    found = getattr(memo, "settings", None)
    if isinstance(found, Settings):
        return found
    env = environment()
    parsed = settings_from(env, load_config(env.get(CONFIG_ENV)))
    limit_malloc_arenas(env)  # kopf's threads may exist: only arenas made from now on obey
    freeze_survivors()  # every module is imported by now, as in __main__
    memo.settings = parsed
    return parsed


@kopf.on.startup(backoff=START_RETRY_SECONDS)
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Build and start the operator (module docstring: the order).

    All or nothing: a start that fails half-way (the API server went away during it) takes
    down what it built before kopf calls it again, so a retry never runs two of a loop.
    """
    memo.pop("app", None)
    try:
        ours = settings_of(memo)
        lease = lease_settings(ours)
    except (ConfigError, ValueError) as exc:
        raise kopf.PermanentError(str(exc)) from exc
    closing = contextlib.AsyncExitStack()
    try:
        memo.app = await _build(settings, ours, lease, closing)
    except BaseException:
        await closing.aclose()
        raise


async def _build(
    settings: kopf.OperatorSettings,
    ours: Settings,
    lease: LeaseSettings | None,
    closing: contextlib.AsyncExitStack,
) -> App:
    # 1. kopf's settings, the API client, and an API server that answers.
    await _connect(settings, ours, closing)
    config = ours.config
    # 2. The wiring, its indexes (a LIST per resource) and, meanwhile, the skill library's
    # records (a LIST of its ConfigMaps); the manager: no write before it leads.
    wired = wiring()
    indexes = wired.indexes()

    def skill_pending(namespace: str, name: str) -> bool:
        # Bound late, to the controller built in step 5: the library's flushes start with
        # the writers, long after it (the two need each other: usage and pending).
        return ctl.pending(
            ("Skill", namespace, name), ctl.lookup(IndexId.SKILL_VIEWS, (namespace, name))
        )

    lib = SkillLibrary(
        config,
        indexes,
        ours.namespaces,
        flush_seconds=ours.library_flush_seconds,
        pending=skill_pending,
    )
    listings = await _listed(indexes, ours.namespaces, _slim(wired), meanwhile=lib.load())
    manager = Manager.build(lease)
    # 3. The one resolver, the Reviews controller and the Runs controller that asks it.
    resolver, reviews, runs = _runs(ours, indexes)
    closing.push_async_callback(reviews.stop)
    closing.push_async_callback(runs.stop)
    # 4. The skill library sees every indexed object (after the Runs index: it counts
    # finished Runs).
    lib.seed()
    closing.push_async_callback(lib.stop)
    # 5. The reconcile controller over those indexes, with what its reconcilers call.
    services = Services(
        leadership=manager.leadership,
        resolver=resolver,  # serving a Topology resolves it like a Run
        reviews=reviews,  # a promotion's Review is opened by the Reviews owner
        skill_usage=lib.usage_field,
    )
    ctl = _controller(wired, ours, indexes, services, closing)
    # 6. The gateways controller, and the mailbox webhooks (kicked by their items' events).
    gateways = _gateways(ctl, resolver)
    closing.push_async_callback(gateways.stop)
    view = indexes.view
    mail = Delivery(view(PENDING_DELIVERIES), view(IndexId.RUNS_WORKSPACES), ours.runs)
    closing.push_async_callback(mail.stop)
    # 7. The web view, when asked for.
    web = await _web_view(ours, indexes, lib, closing)
    app = App(
        settings=ours,
        manager=manager,
        controller=ctl,
        runs=runs,
        reviews=reviews,
        gateways=gateways,
        delivery=mail,
        library=lib,
        web_view=web,
        closing=closing,
    )
    # 8. The runnables, in the order they start, and the watch streams from step 2's LISTs.
    _add_runnables(app)
    _open_streams(settings, app, wired.events, listings)
    # 9. Elect (or lead at once) and start the writers. Stopping starts with the manager
    # (the Lease handed over, every loop cancelled), then the components in reverse order.
    closing.push_async_callback(manager.stop)
    await manager.start()
    log.info(
        "swarmkit-operator started: %d workers, script execution %s, %d pinned script(s)",
        ours.workers,
        "allowed" if config.allow_script_execution else "disabled",
        len(config.allowed_scripts),
    )
    return app


async def _connect(
    settings: kopf.OperatorSettings, ours: Settings, closing: contextlib.AsyncExitStack
) -> None:
    """kopf's settings, the API client, and an API server that answers: started while it
    is down or still warming up (a restarted kube-apiserver refuses everything until its
    authorizer's caches fill), every LIST after this would fail."""
    common.configure_kopf(settings, ours)
    k8s.configure(workers=ours.workers + 4, instance=ours.instance)
    closing.push_async_callback(_close_connections)
    waited = await k8s.wait_for_api(f"/apis/{GROUP}/{VERSION}")
    if waited >= 1.0:
        log.info("the API server answered after %.1fs", waited)


def _controller(
    wired: Wiring,
    ours: Settings,
    indexes: Indexes,
    services: Services,
    closing: contextlib.AsyncExitStack,
) -> Controller:
    """The reconcile controller over ``indexes``, its settings parsed from ``ours``, with
    what its reconcilers call, and the object-count metrics read from its indexes."""
    ctl = wired.controller(ours.config, ControllerSettings.of(ours), services, indexes)
    closing.push_async_callback(ctl.stop)
    counted = [kind for kind, _ in ctl.with_views()]
    metrics.set_object_counts(lambda: count_objects(ctl.indexes, counted))
    closing.callback(metrics.set_object_counts, None)
    return ctl


def _slim(wired: Wiring) -> frozenset[str]:
    """The resources whose start-up listing is kept without ``managedFields`` until the
    streams deliver it: the declared kinds' (their functions read views and kept bodies,
    which have none) and the rendered ConfigMaps' (names, labels and owners). The others
    keep them: a Review's decision time is its ``managedFields`` entry."""
    return frozenset({kind.plural for kind in wired.kinds.values()} | {"configmaps"})


async def _listed(
    indexes: Indexes, namespaces: Sequence[str], slim: frozenset[str], meanwhile: Awaitable[None]
) -> list[Listing]:
    """``indexes`` filled by one paged LIST per resource, and ``meanwhile`` awaited while
    they are (the skill library's records: this process decodes them while the apiserver
    encodes the lists); the listings (the watch streams start from them; ``slim``: see
    :func:`_slim`)."""
    listing = asyncio.create_task(_populated(indexes, namespaces, slim))
    try:
        await meanwhile
    except BaseException:
        listing.cancel()
        raise
    return await listing


async def _populated(
    indexes: Indexes, namespaces: Sequence[str], slim: frozenset[str]
) -> list[Listing]:
    listings: list[Listing] = []
    started = time.monotonic()
    # No collection walks the indexes while they fill, and none after (runtime/allocator.py:
    # 0.6 s of a 1.7 s listing of 12,100 objects, 3.0 s of 6.9 s at 48,400).
    with collector_paused():
        took = await populate(indexes, namespaces, listings=listings, slim=slim)
    log.info(
        "indexes pre-populated in %.2fs (%s): %s",
        time.monotonic() - started,
        ", ".join(f"{r} {s:.2f}s" for r, s in sorted(took.items(), key=lambda x: -x[1])),
        ", ".join(f"{k}={len(v)}" for k, v in sorted(indexes.data.items())),
    )
    return listings


def _runs(ours: Settings, indexes: Indexes) -> tuple[Resolver, ReviewsController, RunController]:
    """The operator's one resolver (Runs, served Topologies and gateways resolve through it,
    over one set of indexes), the Reviews controller (the one writer of Review status) and
    the Runs controller built with both (it asks the Reviews controller for transitions)."""
    run_indexes = RunIndexes.of(indexes)
    resolver = Resolver(ours.config, run_indexes.resolver())
    reviews = ReviewsController()
    runs = RunController(
        ours.config, run_indexes, settings=ours.runs, resolver=resolver, reviews=reviews
    )
    return resolver, reviews, runs


async def _access_review(
    user: str, groups: tuple[str, ...], namespace: str, verb: str, resource: str
) -> bool:
    """The web view's SubjectAccessReview (a call written out: the RBAC table test finds
    the grant it needs at call sites)."""
    return await k8s.access_review(user, groups, namespace, verb, resource)


async def _web_view(
    ours: Settings, indexes: Indexes, lib: SkillLibrary, closing: contextlib.AsyncExitStack
) -> WebView | None:
    """The web view, started, when the settings ask for one."""
    if not ours.web_view:
        return None
    host, port = parse_address(ours.web_view)
    access = None if ours.web_view_single_user else Access(_access_review)
    web = WebView(Sources(indexes, lib), access)
    await web.start(host, port)
    closing.push_async_callback(web.stop)
    return web


def _gateways(ctl: Controller, resolver: Resolver) -> GatewayController:
    """The gateways controller over the shared indexes and the one resolver, seeded with
    the Agents that have a gateway."""
    gateways = GatewayController(ctl.config, resolver, ctl.indexes.view(IndexId.AGENT_VIEWS))
    gateways.seed()
    return gateways


async def _close_connections() -> None:
    await k8s.close_connections()


def _add_runnables(app: App) -> None:
    """Every loop of the operator as one of the manager's runnables, in start order: the
    writers (only in the leader) each after the controller it feeds, then the start-up's
    one re-LIST (every replica)."""
    ctl, runs, manager, ours = app.controller, app.runs, app.manager, app.settings

    async def start_reconcile() -> None:
        # The first writer: from now on the pipelines remember what they create (a served
        # Topology's objects are applied by the reconcile, before the Runs start).
        runs.state.resolver.ledger.start()
        await ctl.start()
        count = ctl.enqueue_unsettled()
        if count:
            log.info("%d object(s) changed while no leader ran: reconciling them first", count)

    manager.add(Runnable("reconcile", start_reconcile, drain=ctl.stop))
    if ours.resync_seconds > 0:
        manager.add(
            Periodic("resync", ctl.resync, ours.resync_seconds, first_after=ours.resync_seconds)
        )
    # The Reviews controller before the Runs that ask it (a Run's transition awaits it).
    manager.add(Runnable("reviews", _started(app.reviews.start)))
    manager.add(Runnable("runs", _started(runs.start)))
    retention = Retention(runs)
    sweeps = Periodic("retention", retention.sweep, ours.runs.retention_sweep_seconds, settle=0.5)
    runs.on_finished.append(sweeps.poke)
    manager.add(sweeps)
    manager.add(Periodic("scheduler", Scheduler(runs).tick_now, ours.runs.schedule_interval))
    manager.add(Runnable("mailbox delivery", _started(app.delivery.start)))
    # SpendQuota windows and reservations follow the clock (runs/spend.py).
    manager.add(Periodic("spend quotas", runs.refresh_quotas, spend.REFRESH_SECONDS))
    log.info("runs controller built (max %d Job recreations)", ours.config.max_job_recreations)
    manager.add(Runnable("gateways", _started(app.gateways.start)))
    lib = app.library
    manager.add(
        Periodic(
            "skill library",
            lib.flush,
            lib.flush_seconds,
            first_after=lib.flush_seconds,
            last=lib.stop,
        )
    )

    async def prune_once() -> asyncio.Task[Any]:
        async def later() -> None:
            await asyncio.sleep(PRUNE_AFTER_SECONDS)
            await ctl.prune()

        return asyncio.create_task(later(), name="swarmkit-prune")

    # Objects deleted between the LIST and the streams' start never send DELETED: drop them
    # once the streams surely listed everything (and again at every resync).
    manager.add(Runnable("prune", prune_once, needs_leader=False))


def _started(start: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    """A component's synchronous start as a runnable's."""

    async def run() -> None:
        start()

    return run


def _open_streams(
    settings: kopf.OperatorSettings, app: App, events: EventRegistry, listings: list[Listing]
) -> None:
    """One reflector per stream (and watched namespace), each a runnable of every replica
    (the standbys keep their indexes current too), started from the start-up's LISTs
    (``listings``: emptied once the streams took theirs)."""
    ctl = app.controller
    opened = []
    for key, selector in events.streams():
        dispatch = events.dispatcher(*key, selector=selector)
        assert dispatch is not None
        deliver = deliverer(dispatch, key[-1], app=app, logger=log)
        metadata_only = events.metadata_only(*key, selector=selector)
        for reflector in reflectors(
            resource_of(key),
            ctl.settings.namespaces,
            deliver,
            metadata_only=metadata_only,
            label_selector=selector,
            server_timeout=int(settings.watching.server_timeout or 270),
            read_timeout=float(settings.watching.client_timeout or 300),
            backoff=float(settings.watching.reconnect_backoff or 1.0),
        ):
            reflector.seed_from(listings)  # step 2 LISTed it moments ago (for the indexes)
            app.manager.add(
                Runnable(f"watch {reflector.where}", _watching(reflector), needs_leader=False)
            )
            seeded = " from the start-up listing" if reflector.seed is not None else ""
            opened.append(reflector.where + (" (metadata)" if metadata_only else "") + seeded)
    listings.clear()
    log.info("watching %s", ", ".join(opened))


def _watching(reflector: Reflector) -> Callable[[], Awaitable[asyncio.Task[Any]]]:
    async def start() -> asyncio.Task[Any]:
        return asyncio.create_task(reflector.run(), name=f"swarmkit-watch-{reflector.where}")

    return start


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    """Graceful shutdown, in the reverse order: the manager (while still leading, the
    skill library's last flush and the reconcile controller's in-flight reconciles and
    Events; then the lease handed over, the loops and streams stopped), the web view, the
    gateways workers, the Runs workers, the streams' session, then the client."""
    app = _app_of(memo)
    if app is not None:
        await app.close()
    k8s.shutdown()


def _app_of(memo: kopf.Memo) -> App | None:
    """The context the start-up handler built (None before it succeeded): the one thing
    the root keeps in kopf's memo."""
    found = getattr(memo, "app", None)
    return found if isinstance(found, App) else None


@kopf.on.probe(id="workqueue")
def probe_queue(memo: kopf.Memo, **_: Any) -> dict[str, int]:
    """Liveness detail: queue depth and live workers (the probe fails if all died)."""
    app = _app_of(memo)
    return {"depth": 0, "workers": 0} if app is None else app.controller.health()
