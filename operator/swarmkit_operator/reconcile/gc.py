"""Garbage collection of rendered ConfigMaps, and the ConfigMap indexes it reads.

Renders are content-addressed (``<prefix>-<name>-<hash8>``), so a changed object gets a
new ConfigMap and its previous one is left behind. The ``GC`` reconciler (one key per
namespace, queued whenever a render may have lost its last reference) deletes those
nothing refers to any more, once they stayed unreferenced for ``gc_grace`` seconds
(``SWARMKIT_GC_GRACE_SECONDS``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from swarmkit_api.resources import KINDS

from .. import k8s
from ..builders import (
    COMPONENT_LABEL,
    MANAGED_BY,
    PINNED_ANNOTATION,
    RUN_FINISHED_LABEL,
    RUN_LABEL,
)
from ..builders.promotion import kept_renders
from ..builders.skill import PART_OF
from ..indexes import PRESENT, IndexId, index
from . import parking
from .controller import Controller, Kind
from .views import Key

log = logging.getLogger("swarmkit_operator")

_RENDERED: dict[str, Any] = {COMPONENT_LABEL: PRESENT, **MANAGED_BY}


#: A render's ``swarmkit.dev/component`` label value → its kind (read for every ConfigMap
#: a start-up lists: a scan of the table took 1.5 us here, a lookup 36 ns).
_KIND_OF_COMPONENT = {k.singular: k.kind for k in KINDS}


def component_kind(component: str) -> str:
    """The kind whose render carries the ``swarmkit.dev/component`` label value (its
    singular: ``skill`` → ``Skill``, from the API's table of kinds), "" if none."""
    return _KIND_OF_COMPONENT.get(component, "")


@index("configmaps", id=IndexId.RENDERED_CONFIG_MAPS, labels=_RENDERED, metadata_only=True)
def rendered_config_maps(
    namespace: str | None,
    name: str,
    uid: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    **_: Any,
) -> dict[Any, Any]:
    """namespace → the rendered skill/agent/workspace ConfigMaps in it (a large skill's
    part names the revision it belongs to: it lives as long as that revision)."""
    component = labels.get(COMPONENT_LABEL, "")
    return {
        namespace: {
            "name": name,
            "uid": uid,
            "kind": component_kind(component),
            "owner": labels.get(f"swarmkit.dev/{component}", ""),
            "partOf": annotations.get(PART_OF, ""),
        }
    }


@index("configmaps", id=IndexId.RENDERED_CONFIG_MAP_NAMES, labels=_RENDERED, metadata_only=True)
def rendered_config_map_names(
    namespace: str | None, name: str, uid: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, name) → uid: whether a render exists (see ``ensure_config_map``)."""
    return {(namespace, name): uid}


@index("configmaps", id=IndexId.PINNED_CONFIG_MAPS, labels={RUN_LABEL: PRESENT}, metadata_only=True)
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


async def collect_garbage(ctl: Controller, namespace: str, _name: str, force: bool) -> str:
    """Delete rendered ConfigMaps nothing refers to any more, after a grace period.

    Kept: every object's current render, every skill ConfigMap an Agent's render resolves,
    the active and candidate versions of a promotion with what they pin,
    everything a Run bundle pins while its Run is unfinished, and anything this process
    just created for an owner whose status write is still on its way.
    """
    keep: set[str] = set()
    for _, index_id in ctl.with_views():
        for key in ctl.indexes.keys(index_id):
            if key[0] != namespace:
                continue
            view = ctl.lookup(index_id, key)
            if view is None:
                continue
            status = view["status"]
            keep.add(str(status.get("renderedConfigMap") or ""))
            for resolved in status.get("resolvedSkills") or ():
                keep.add(str(resolved.get("renderedConfigMap") or ""))
            # spec.promotion: the active and candidate versions' renders and their pins.
            keep |= kept_renders(status)
    keep |= parking.held_renders(ctl, namespace)  # rendered, the status write held
    for pin in ctl.lookup_all(IndexId.PINNED_CONFIG_MAPS, namespace):
        if not pin["finished"]:
            keep.update(pin["pins"])
    now = time.monotonic()
    grace = ctl.settings.gc_grace
    next_check: float | None = None
    deleted = 0
    for cm in ctl.lookup_all(IndexId.RENDERED_CONFIG_MAPS, namespace):
        ident = (namespace, cm["name"])
        created = ctl.renders.created.get(ident)
        owner: Key = (cm["kind"], namespace, cm["owner"])
        in_flight = created is not None and now - created < 60 and ctl.pending(owner, None)
        part_of = cm.get("partOf")
        if cm["name"] in keep or (part_of and part_of in keep) or in_flight:
            ctl.renders.unreferenced_since.pop(ident, None)
            if in_flight:
                next_check = grace if next_check is None else min(next_check, grace)
            continue
        # Unreferenced: start its grace period, delete once it ran out (uid-guarded, so a
        # re-created ConfigMap of the same name is never deleted by mistake).
        since = ctl.renders.unreferenced_since.setdefault(ident, now)
        if now - since >= grace:
            if await k8s.delete_config_map(namespace, cm["name"], cm["uid"]):
                deleted += 1
                log.info("deleted unreferenced ConfigMap %s/%s", namespace, cm["name"])
            ctl.renders.unreferenced_since.pop(ident, None)
        else:
            wait = grace - (now - since)
            next_check = wait if next_check is None else min(next_check, wait)
    if next_check is not None:
        ctl.enqueue_gc(namespace, delay=next_check + 0.1)
    return "changed" if deleted else "unchanged"


#: Garbage collection as a kind: one key per namespace, after every other kind's (its lane
#: last: it must know the renders the others keep).
GC = Kind("GC", priority=4, reconcile=collect_garbage)
