"""Shared glue: the application context, kopf's settings and the ConfigMap watch.

The reconcile machinery itself lives outside the handlers, without kopf: the indexes
(:mod:`swarmkit_operator.indexes`), the work queue, the controller, status writes and
garbage collection (:mod:`swarmkit_operator.reconcile`, whose docstring tells how
reconciling works). The composition root (:mod:`.root`) builds and starts it, and hands
every event function the one :class:`App` it built (the ``app`` keyword argument); this
module defines that context, kopf's settings (:func:`configure_kopf`) and the ConfigMap
events' function.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf

from ..builders import COMPONENT_LABEL, MANAGED_BY, RUN_LABEL
from ..config import Settings
from ..delivery import Delivery
from ..gateways import GatewayController
from ..indexes import PRESENT, Indexes, IndexId, IndexSpec, index
from ..library import SkillLibrary
from ..reconcile.controller import Controller, Kind, Watch
from ..reconcile.gc import component_kind
from ..reconcile.status import same_status
from ..reconcile.views import MISSING
from ..reviews import ReviewsController
from ..runs import RunController
from ..runtime import Leadership, Manager
from ..webview import WebView
from .events import EventFn, on_event

log = logging.getLogger("swarmkit_operator")

# The old spelling, for the test that imports it from here.
_same = same_status

__all__ = [
    "PRESENT",
    "App",
    "Controller",
    "IndexSpec",
    "Indexes",
    "_same",
    "config_map_event",
    "configure_kopf",
    "index",
    "index_event",
    "kind_event",
]


# --- the application context ---------------------------------------------------------------


@dataclass(frozen=True)
class App:
    """The application context (cert-manager's ``controller.Context``): everything the
    composition root built, whole before any event arrives. Every event function gets it
    as its ``app`` argument; kopf's memo holds it and nothing else the root built, so no
    component is looked up by name and none gets an attribute after it was constructed."""

    settings: Settings
    manager: Manager
    controller: Controller
    runs: RunController
    #: The one writer of Review status (the Runs ask it, the Review watch hands it events).
    reviews: ReviewsController
    gateways: GatewayController
    delivery: Delivery
    library: SkillLibrary
    web_view: WebView | None
    #: The component stops, in the order :meth:`close` awaits them (the build's reverse).
    closing: contextlib.AsyncExitStack

    @property
    def leadership(self) -> Leadership:
        return self.manager.leadership

    async def close(self) -> None:
        """Stop every component, in the reverse order of the build."""
        await self.closing.aclose()


# --- the kinds' own events ---------------------------------------------------------------------


def kind_event(kind: Kind, watchers: Sequence[tuple[str, Watch]] = ()) -> EventFn:
    """The one function on a declared kind's stream, the same for every kind: the
    controller's bookkeeping (indexes, a reconcile unless the event is our own status
    echo, whether what dependents compare changed), then the kind's ``dependents``, then
    the other kinds' :class:`~swarmkit_operator.reconcile.controller.Watch` of it
    (``watchers``: (the watching kind, its watch))."""
    view_of = kind.dependents_view or (lambda view: MISSING if view is None else (True,))
    dependents = kind.dependents

    async def event(
        type: str | None,
        body: Mapping[str, Any],
        namespace: str | None,
        name: str,
        app: App,
        **_: Any,
    ) -> None:
        if namespace is None:
            return
        ctl = app.controller
        seen = ctl.observe_event(
            kind.kind, kind.plural, type, body, namespace, name, view_of, kind.keep_body
        )
        if dependents is not None:
            dependents(ctl, namespace, name, seen, body)
        for watcher, watch in watchers:
            if watch.when(seen):
                names = set(ctl.lookup_all(watch.index, (namespace, name)))
                ctl.enqueue_many(watcher, namespace, names)

    # Named after the kind, in its module (logs, and the order tests read).
    event.__name__ = event.__qualname__ = f"{kind.kind.lower()}_event"
    event.__module__ = kind.reconcile.__module__
    return event


async def index_event(
    type: str | None, body: Mapping[str, Any], app: App, resource_plural: str = "", **_: Any
) -> None:
    """The function keeping the indexes over a resource no kind nor shared module watches
    current (the Runs, their Jobs and Pods, Reviews, mailbox items...): the composition
    root's wiring puts it first on such a stream, so every other function of the stream
    reads the index updated. The stream's plural comes with every event
    (:func:`.events.deliverer`)."""
    if resource_plural:
        app.controller.indexes.apply(resource_plural, type, body)


# --- kopf's settings ---------------------------------------------------------------------------


class _QuietSuccess(logging.Filter):
    """Drop kopf's per-event "Handler 'x' succeeded." lines (one per watch event)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno <= logging.INFO and str(record.msg).endswith("succeeded."))


def configure_kopf(settings: kopf.OperatorSettings, ours: Settings) -> None:
    """kopf's settings for an operator whose events come through its own streams.

    kopf has no handler of any resource (only start-up, clean-up and the probes:
    ``tests/unit/operator/test_kopf_settings.py``), so it never reads, annotates, finalizes
    or patches an object: no persistence settings. The watch settings below are the
    operator's own reflectors' (the composition root reads them)."""
    # Watches: the server ends each watch after ~4.5 minutes, the client gives up after 5
    # without bytes; a dead connection is noticed and re-established quickly.
    settings.watching.server_timeout = ours.watch_server_timeout
    settings.watching.client_timeout = ours.watch_client_timeout
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 1.0
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 10
    settings.networking.error_backoffs = [1, 2, 4, 8, 16, 30]
    # We post our own Events (one per condition transition); kopf's per-log-line Events off.
    settings.posting.enabled = False
    # kopf would follow every CRD and (with watchNamespaces) every Namespace to start and
    # stop its watches; it has none (our streams serve the namespaces we are given), so
    # that costs two cluster-wide grants for nothing (issue 41): off.
    settings.scanning.disabled = True
    if not ours.log_handler_success:
        objects = logging.getLogger("kopf.objects")
        objects.addFilter(_QuietSuccess())
        if not objects.isEnabledFor(logging.DEBUG):
            # kopf builds a log record of its "succeeded." line for every watch event
            # before any filter drops it (~3% of the event loop at 6,000 objects); per-object
            # warnings and errors still log. --verbose keeps the filter only.
            objects.setLevel(logging.WARNING)
    settings.process.ultimate_exiting_timeout = 30


# --- ConfigMaps: rendered ones, run bundles' pins, and users' (skill files, flow data) -----


# Names and labels only: watched as metadata (a rendered ConfigMap carries a whole skill).
@on_event("v1", "configmaps", metadata_only=True)
async def config_map_event(
    type: str | None,
    body: kopf.Body,
    namespace: str | None,
    name: str,
    labels: Mapping[str, str],
    app: App,
    **_: Any,
) -> None:
    ctl = app.controller
    if namespace is None:
        return
    ctl.indexes.apply("configmaps", type, body)
    if type == "DELETED":
        ctl.renders.verified.pop((namespace, name), None)
        # a ConfigMap that took a render's name is gone: its owner can render its own now
        took = ctl.renders.foreign.pop((namespace, name), None)
        if took is not None:
            ctl.enqueue(*took)
    if (
        COMPONENT_LABEL in labels
        and labels.get("app.kubernetes.io/managed-by") == MANAGED_BY["app.kubernetes.io/managed-by"]
    ):
        if type == "DELETED":  # deleted under us: let its owner re-create it if still used
            ctl.renders.created.pop((namespace, name), None)
            owner_kind = component_kind(labels.get(COMPONENT_LABEL, ""))
            owner = labels.get(f"swarmkit.dev/{labels.get(COMPONENT_LABEL)}")
            if owner_kind and owner:
                ctl.enqueue(owner_kind, namespace, owner)
        return
    if RUN_LABEL in labels:  # a Run bundle: its pins changed or its Run finished
        ctl.enqueue_gc(namespace, delay=1.0)
        return
    # A user's ConfigMap: re-check exactly the skills and workspaces reading it.
    ctl.enqueue_many(
        "Skill", namespace, ctl.lookup_all(IndexId.SKILL_BY_CONFIG_MAP, (namespace, name))
    )
    ctl.enqueue_many(
        "Workspace", namespace, ctl.lookup_all(IndexId.WORKSPACE_BY_CONFIG_MAP, (namespace, name))
    )
