"""The composition root: the one place that builds the operator, in an order written as code.

kopf runs the operator (entry point, lifecycle, probes, logging) and calls one start-up
handler, :func:`start`, which builds every component in this order:

1. kopf's settings (:func:`.common.configure_kopf`), the operator configuration and the
   API client;
2. the wiring (:func:`wiring`): the marks (``@index``, ``@reconciler``, ``@on_event``) of
   the modules in :data:`MODULES`, collected in that order, so the functions of one
   watch stream run in that order (the kind modules, which keep the indexes current,
   before the controllers they kick);
3. the reconcile :class:`~swarmkit_operator.reconcile.controller.Controller` over those
   indexes and reconcilers, and one paged LIST of every indexed resource;
4. the :class:`~swarmkit_operator.runtime.Manager` (leader election and the write gate),
   which holds every writer built next;
5. the Runs controller over the shared indexes, and its scheduler, retention, mailbox
   delivery and SpendQuota loops;
6. the gateways controller;
7. the skill library and, when asked for, the web view;
8. the watch streams, starting from the LISTs of step 3;
9. :meth:`Manager.start`: elect (or lead at once), then start the writers.

:func:`stop` takes them down in the reverse order. Nothing is registered when a module is
imported: what runs is what this module names.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION

from .. import k8s, metrics, serving
from ..config import OperatorConfig, load_config
from ..gateways import GatewayController
from ..indexes import SELF_MAINTAINED, Indexes, IndexSpec, Resource, populate
from ..library import SkillLibrary
from ..marks import marked
from ..reconcile import gc
from ..reconcile.controller import Controller, Reconciler, ReconcilerMark, controller_of
from ..reconcile.views import count_objects
from ..reviews import ReviewsController
from ..runs import Indexes as RunIndexes
from ..runs import RunController
from ..runs.delivery import Delivery
from ..runs.retention import Retention
from ..runs.schedule import Scheduler
from ..runtime import Manager, lease_settings_from_env, manager_of
from ..watching import reflectors
from ..webview import Sources, WebView, parse_address
from . import (
    agent,
    common,
    funnel,
    gateway,
    library,
    review,
    run,
    skill,
    topology,
    workspace,
)
from .common import Components, components_of
from .events import EventMark, EventRegistry, Stream, selector_of

log = logging.getLogger("swarmkit_operator")

#: Every module whose marks the operator runs, in the order their functions run on one
#: stream: the shared ConfigMap watch, the reconcile kinds (each keeps its indexes current
#: from its own events), then what only reads those indexes and kicks its controller.
MODULES: tuple[ModuleType, ...] = (
    common,
    gc,
    serving,
    workspace,
    skill,
    agent,
    funnel,
    topology,
    review,
    run,
    gateway,
    library,
)

WEB_VIEW_ENV = "SWARMKIT_WEB_VIEW"
FLUSH_ENV = "SWARMKIT_LIBRARY_FLUSH_SECONDS"


@dataclass(frozen=True)
class Wiring:
    """What the marks of :data:`MODULES` add up to."""

    index_specs: tuple[IndexSpec, ...]
    reconcilers: Mapping[str, Reconciler]
    events: EventRegistry

    def indexes(self) -> Indexes:
        """New, empty indexes of every marked index function."""
        return Indexes(self.index_specs)

    def controller(self, config: OperatorConfig, **kwargs: Any) -> Controller:
        """A reconcile controller over new indexes and every marked reconciler."""
        return Controller(
            config=config, indexes=self.indexes(), reconcilers=self.reconcilers, **kwargs
        )


def stream_of(resource: Resource, selector: str) -> Stream:
    """The event registry's key of a resource (``("v1", plural)`` for the core group)."""
    if resource.group:
        return ((resource.group, resource.version, resource.plural), selector)
    return ((resource.version, resource.plural), selector)


def wiring(modules: Sequence[ModuleType] = MODULES) -> Wiring:
    """Collect the marks of ``modules``, in order, into index specs, reconcilers and the
    watch streams' functions."""
    specs: list[IndexSpec] = []
    reconcilers: dict[str, Reconciler] = {}
    marks: list[tuple[Any, EventMark]] = []
    for module in modules:
        for fn, one in marked(module):
            if isinstance(one, IndexSpec):
                specs.append(one)
            elif isinstance(one, ReconcilerMark):
                if one.kind in reconcilers:
                    raise RuntimeError(f"two reconcilers of {one.kind}: {module.__name__}")
                reconcilers[one.kind] = fn
            elif isinstance(one, EventMark):
                marks.append((fn, one))
    events = EventRegistry(index_specs=tuple(specs))
    # An index over a resource no kind module watches gets a function keeping it current,
    # first on its stream: every other function of that stream reads the index updated.
    for spec in specs:
        if spec.resource in SELF_MAINTAINED:
            continue
        stream = stream_of(spec.listed, selector_of(spec.labels))
        if _maintain_index not in events.registered(*stream[0], selector=stream[1]):
            events.add(stream, _maintain_index, metadata_only=spec.metadata_only)
    for fn, event in marks:
        events.add(event.stream, fn, metadata_only=event.metadata_only)
    return Wiring(tuple(specs), reconcilers, events)


async def _maintain_index(
    type: str | None,
    body: Mapping[str, Any],
    uid: str,
    memo: Any,
    resource_plural: str = "",
    **_: Any,
) -> None:
    """Keep the indexes over a resource no kind module watches current (its stream's
    plural comes with every event, :func:`_open_streams`)."""
    ctl = controller_of(memo)
    if ctl is None or not resource_plural:
        return
    if type == "DELETED":
        ctl.indexes.delete(resource_plural, uid)
    else:
        ctl.indexes.update(resource_plural, body)


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


#: Seconds kopf waits before it calls a failed start-up again (its default is 60 s).
START_RETRY_SECONDS = 2.0


@kopf.on.startup(backoff=START_RETRY_SECONDS)
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Build and start the operator (module docstring: the order).

    All or nothing: a start that fails half-way (the API server went away during it) takes
    down what it built before kopf calls it again, so a retry never runs two of a loop.
    """
    try:
        await _build(settings, memo)
    except BaseException:
        await _take_down(memo, close_client=False)
        for built in ("manager", "components", "swarmkit", "web_view", "wiring"):
            memo.pop(built, None)
        raise


async def _build(settings: kopf.OperatorSettings, memo: kopf.Memo) -> None:
    # 1. kopf's settings, the configuration, the API client, and an API server that answers:
    # started while it is down or still warming up (a restarted kube-apiserver refuses
    # everything until its authorizer's caches fill), every LIST below would fail.
    common.configure_kopf(settings)
    config = load_config()
    workers = int(os.environ.get("SWARMKIT_WORKERS", "16"))
    k8s.configure(workers=workers + 4)
    waited = await k8s.wait_for_api(f"/apis/{GROUP}/{VERSION}")
    if waited >= 1.0:
        log.info("the API server answered after %.1fs", waited)
    namespaces = tuple(
        n for n in os.environ.get("SWARMKIT_WATCH_NAMESPACES", "").split(",") if n.strip()
    ) or tuple(config.watch_namespaces)
    # 2. The wiring.
    wired = wiring()
    memo.wiring = wired
    # 3. The reconcile controller and its indexes, from one LIST per resource.
    ctl = wired.controller(
        config,
        namespaces=namespaces,
        workers=workers,
        gc_grace=_env_float("SWARMKIT_GC_GRACE_SECONDS", 10.0),
        resync_seconds=_env_float("SWARMKIT_RESYNC_SECONDS", 600.0),
    )
    started = time.monotonic()
    took = await populate(ctl.indexes, namespaces, listings=ctl.listings)
    log.info(
        "indexes pre-populated in %.2fs (%s): %s",
        time.monotonic() - started,
        ", ".join(f"{r} {s:.2f}s" for r, s in sorted(took.items(), key=lambda x: -x[1])),
        ", ".join(f"{k}={len(v)}" for k, v in sorted(ctl.indexes.data.items())),
    )
    memo.swarmkit = ctl
    metrics.set_object_counts(lambda: count_objects(ctl.indexes))
    # Objects deleted between the LIST and the streams' start never send DELETED: drop them
    # once the streams surely listed everything (and again at every resync).
    ctl.tasks.append(asyncio.create_task(ctl.prune_later(30.0), name="swarmkit-prune"))
    # 4. The manager: nothing below writes before it says this replica leads.
    try:
        lease = lease_settings_from_env(os.environ)
    except ValueError as exc:
        raise kopf.PermanentError(str(exc)) from exc
    manager = Manager.build(lease)
    ctl.leadership = manager.leadership
    memo.manager = manager

    async def start_reconcile() -> None:
        await ctl.start()
        count = ctl.enqueue_unsettled()
        if count:
            log.info("%d object(s) changed while no leader ran: reconciling them first", count)

    manager.add_writer("reconcile", start_reconcile)
    # 5. The Runs controller (with the Reviews controller it asks), its loops (they wait for it).
    runs = RunController(config, _run_indexes(ctl.indexes, reviews=True), ReviewsController())
    ctl.resolver = runs.state.resolver  # serving a Topology resolves it like a Run
    manager.add_writer("runs", _started(runs.start))
    retention = Retention(runs)
    runs.on_finished.append(retention.poke)
    manager.tasks.append(asyncio.create_task(retention.loop(), name="swarmkit-retention"))
    manager.tasks.append(asyncio.create_task(Scheduler(runs).loop(), name="swarmkit-scheduler"))
    # Mailbox webhooks (runs/delivery.py): they too wait for the Runs controller (the leader).
    manager.tasks.append(asyncio.create_task(Delivery(runs).loop(), name="swarmkit-delivery"))

    async def spend_quotas() -> None:
        # SpendQuota windows and reservations follow the clock (runs/spend.py); the leader's.
        await runs.ready.wait()
        await runs.spend_loop()

    manager.tasks.append(asyncio.create_task(spend_quotas(), name="swarmkit-spend"))
    log.info("runs controller built (max %d Job recreations)", config.max_job_recreations)
    # 6. The gateways controller, seeded with the Agents that have a gateway.
    view = ctl.indexes.view
    gateways = GatewayController(
        config, _run_indexes(ctl.indexes), view("agent_views"), view("secret_keys")
    )
    manager.add_writer("gateways", _started(gateways.start))
    for namespace, name in ctl.indexes.keys("agent_views"):
        agent_view = ctl.lookup("agent_views", (namespace, name))
        if agent_view is not None:
            gateways.agent_changed(namespace, name, agent_view["spec"])
    # 7. The skill library (after the Runs index: it counts finished Runs) and web view.
    lib = SkillLibrary(
        config,
        ctl.indexes,
        namespaces,
        flush_seconds=float(os.environ.get(FLUSH_ENV, "2.0")),
        pending=lambda ns, name: ctl.pending(
            ("Skill", ns, name), ctl.lookup("skill_views", (ns, name))
        ),
    )
    await lib.load()
    lib.seed()
    manager.add_writer("skill library", _started(lib.start))
    ctl.skill_usage = lib.usage_field
    memo.components = Components(runs, gateways, lib, runs.state.reviews)
    address = os.environ.get(WEB_VIEW_ENV, "")
    if address:
        host, port = parse_address(address)
        web = WebView(Sources(ctl.indexes, lib))
        await web.start(host, port)
        memo.web_view = web
    # 8. The watch streams, from step 3's LISTs.
    _open_streams(settings, memo, ctl, wired.events)
    # 9. Elect (or lead at once) and start the writers.
    await manager.start()
    log.info(
        "swarmkit-operator started: %d workers, script execution %s, %d pinned script(s)",
        workers,
        "allowed" if config.allow_script_execution else "disabled",
        len(config.allowed_scripts),
    )


def _started(start: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    """A writer's start for the manager (which awaits each in turn)."""

    async def run() -> None:
        start()

    return run


def _run_indexes(indexes: Indexes, reviews: bool = False) -> RunIndexes:
    """The shared indexes as the Runs controller reads them (with ``reviews``, also the
    ones only it needs: Run bundles and Reviews)."""
    view = indexes.view
    # Every resolver pins the Funnels a topology names (a gateway's too: without them it
    # waited forever on "Funnel not found" instead of refusing a gated node).
    extra: dict[str, Any] = {"funnels": view("funnel_views")}
    if reviews:
        extra |= {
            "bundles": view("pinned_config_maps"),
            "reviews": view("runs_reviews_by_run"),
            "skill_reviews": view("skill_reviews"),
            "spend_quotas": view("spend_quotas"),
        }
    return RunIndexes(
        runs=view("runs_by_uid"),
        jobs=view("runs_jobs_by_run"),
        pods=view("runs_pods_by_run"),
        topologies=view("runs_topologies"),
        agents=view("runs_agents"),
        skills=view("runs_skills"),
        workspaces=view("runs_workspaces"),
        **extra,
    )


def _resource(key: tuple[str, ...]) -> Resource:
    if len(key) == 2:  # ("v1", plural): the core group
        return Resource("", key[0], key[1])
    return Resource(key[0], key[1], key[2])


def _open_streams(
    settings: kopf.OperatorSettings, memo: Any, ctl: Controller, events: EventRegistry
) -> None:
    """One reflector per stream (and watched namespace), the controller's tasks."""
    opened = []
    for key, selector in events.streams():
        dispatch = events.dispatcher(*key, selector=selector)
        assert dispatch is not None
        plural = key[-1]

        async def deliver(
            type_: str | None,
            body: dict[str, Any],
            dispatch: Any = dispatch,
            plural: str = plural,
        ) -> None:
            meta = body.get("metadata") or {}
            await dispatch(
                type=type_,
                body=body,
                meta=meta,
                spec=body.get("spec") or {},
                status=body.get("status") or {},
                namespace=meta.get("namespace"),
                name=meta.get("name", ""),
                uid=meta.get("uid", ""),
                labels=meta.get("labels") or {},
                annotations=meta.get("annotations") or {},
                memo=memo,
                logger=log,
                resource_plural=plural,
            )

        metadata_only = events.metadata_only(*key, selector=selector)
        for reflector in reflectors(
            _resource(key),
            ctl.namespaces,
            deliver,
            metadata_only=metadata_only,
            label_selector=selector,
            server_timeout=int(settings.watching.server_timeout or 270),
            read_timeout=float(settings.watching.client_timeout or 300),
            backoff=float(settings.watching.reconnect_backoff or 1.0),
        ):
            # Step 3 LISTed it moments ago (for the indexes): start from that.
            reflector.seed = next(
                (
                    listing
                    for listing in ctl.listings
                    if listing.resource == reflector.resource.plural
                    and listing.namespace == reflector.namespace
                    and listing.selector == selector
                ),
                None,
            )
            ctl.tasks.append(
                asyncio.create_task(reflector.run(), name=f"swarmkit-watch-{reflector.where}")
            )
            seeded = " from the start-up listing" if reflector.seed is not None else ""
            opened.append(reflector.where + (" (metadata)" if metadata_only else "") + seeded)
    ctl.listings.clear()
    log.info("watching %s", ", ".join(opened))


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    """Graceful shutdown, in the reverse order: hand the lease over (and stop the loops),
    the web view, the skill library, the gateways and Runs workers, the reconcile
    controller (finishing in-flight reconciles, flushing Events), the streams, the client."""
    await _take_down(memo, close_client=True)


async def _take_down(memo: kopf.Memo, close_client: bool) -> None:
    manager = manager_of(memo)
    if manager is not None:
        await manager.stop()
    web = getattr(memo, "web_view", None)
    if isinstance(web, WebView):
        await web.stop()
    built = components_of(memo)
    if built is not None:
        await built.library.stop()
        await built.gateways.stop()
        await built.runs.stop()
    ctl = controller_of(memo)
    if ctl is not None:
        await ctl.stop()
    await k8s.close_streams()
    metrics.set_object_counts(None)
    if close_client:
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
