"""Shared kopf glue: kopf's settings and the ConfigMap watch.

The reconcile machinery itself lives outside the handlers, without kopf: the indexes
(:mod:`swarmkit_operator.indexes`), the work queue, the controller, status writes and
garbage collection (:mod:`swarmkit_operator.reconcile`, whose docstring tells how
reconciling works). The composition root (:mod:`.root`) builds and starts it; this module
gives it kopf's settings (:func:`configure_kopf`) and the ConfigMap events' function.

Every name the handler modules used to import from here is still importable from here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION

from ..builders import COMPONENT_LABEL, MANAGED_BY, RUN_LABEL
from ..gateways import GatewayController
from ..indexes import (
    PRESENT,
    RESOURCES,
    SELF_MAINTAINED,
    Indexes,
    IndexFn,
    IndexSpec,
    Resource,
    index,
    list_all,
    populate,
)
from ..library import SkillLibrary
from ..reconcile.controller import (
    Controller,
    Deferred,
    Reconciler,
    controller_of,
    reconciler,
)
from ..reconcile.gc import (
    COMPONENT_KINDS,
    collect_garbage,
    pinned_config_maps,
    rendered_config_map_names,
    rendered_config_maps,
)
from ..reconcile.status import PLURALS, describe, same_status
from ..reconcile.views import (
    KOPF_STATUS_FIELD,
    MISSING,
    VIEW_INDEXES,
    base_view,
    condition_status,
    count_objects,
)
from ..reconcile.workqueue import PRIORITY, Key, WorkQueue
from ..reviews import ReviewsController
from ..runs import RunController
from .events import on_event

log = logging.getLogger("swarmkit_operator")

# The names' old spellings, for modules and tests that import them from here.
_MISSING = MISSING
_same = same_status

__all__ = [
    "COMPONENT_KINDS",
    "GROUP",
    "KOPF_STATUS_FIELD",
    "MISSING",
    "PLURALS",
    "PRESENT",
    "PRIORITY",
    "RESOURCES",
    "SELF_MAINTAINED",
    "VERSION",
    "VIEW_INDEXES",
    "_MISSING",
    "Components",
    "Controller",
    "Deferred",
    "IndexFn",
    "IndexSpec",
    "Indexes",
    "Key",
    "Reconciler",
    "Resource",
    "WorkQueue",
    "_same",
    "base_view",
    "collect_garbage",
    "components_of",
    "condition_status",
    "config_map_event",
    "configure_kopf",
    "controller_of",
    "count_objects",
    "describe",
    "index",
    "list_all",
    "pinned_config_maps",
    "populate",
    "reconciler",
    "rendered_config_map_names",
    "rendered_config_maps",
    "same_status",
]


# --- the components the composition root built ---------------------------------------------


@dataclass(frozen=True)
class Components:
    """What the composition root (:mod:`.root`) built, kept in kopf's memo: how an event
    function reaches the controller it kicks (no module-level globals)."""

    runs: RunController
    gateways: GatewayController
    library: SkillLibrary
    reviews: ReviewsController


def components_of(memo: Any) -> Components | None:
    """The components in kopf's memo (None before the root built them)."""
    found = getattr(memo, "components", None)
    return found if isinstance(found, Components) else None


# --- operator settings and lifecycle --------------------------------------------------------


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class EventOnlyDiffBase(kopf.StatusDiffBaseStorage):
    """kopf's diff base for an operator whose handlers all react to watch events.

    Every handler here is ``kopf.on.event`` (or an index fed by it); none reacts to changes
    (``on.create/update/resume``), so nothing reads the "essence" kopf builds for each
    event, and building it deep-copies the whole object, pods and Jobs included: about 7% of
    the operator's CPU under ``make bench-runs`` (py-spy). The essence is left empty.
    A change handler would need kopf's own storage back
    (``tests/unit/operator/test_kopf_settings.py`` fails until it is switched).
    """

    def build(self, *, body: Any, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()


class _QuietSuccess(logging.Filter):
    """Drop kopf's per-event "Handler 'x' succeeded." lines (one per watch event)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno <= logging.INFO and str(record.msg).endswith("succeeded."))


def configure_kopf(settings: kopf.OperatorSettings) -> None:
    """kopf's settings for an operator whose events come through its own streams."""
    # Never write annotations on user objects (Argo CD would see drift): kopf keeps any
    # bookkeeping in status.kopf. No handler here uses it, but a future one might.
    settings.persistence.progress_storage = kopf.StatusProgressStorage(
        field=f"status.{KOPF_STATUS_FIELD}.progress"
    )
    settings.persistence.diffbase_storage = EventOnlyDiffBase(
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
            owner_kind = COMPONENT_KINDS.get(labels.get(COMPONENT_LABEL, ""))
            owner = labels.get(f"swarmkit.dev/{labels.get(COMPONENT_LABEL)}")
            if owner_kind and owner:
                ctl.enqueue(owner_kind, namespace, owner)
        return
    if RUN_LABEL in labels:  # a Run bundle: its pins changed or its Run finished
        ctl.enqueue_gc(namespace, delay=1.0)
        return
    # A user's ConfigMap: re-check exactly the skills and workspaces reading it.
    ctl.enqueue_many("Skill", namespace, ctl.lookup_all("skill_by_config_map", (namespace, name)))
    ctl.enqueue_many(
        "Workspace", namespace, ctl.lookup_all("workspace_by_config_map", (namespace, name))
    )
