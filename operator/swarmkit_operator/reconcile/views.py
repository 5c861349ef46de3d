"""Per-object views: the small dict each kind's index keeps of one object.

A view carries what reconcilers and dependents read (identity, generations, our status,
the spec fields the kind needs), so nothing re-reads the API to decide. The kind modules
build theirs on :func:`base_view`; :func:`view_index` names where each kind's live.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from swarmkit_api.conditions import READY

from .. import k8s
from ..indexes import Indexes, IndexId

#: A work queue key of the reconcile controller: (kind, namespace, name).
Key = tuple[str, str, str]


def view_index(kind: str) -> IndexId | None:
    """Where a kind's per-object views live (``skill_views``...), filled by the index
    function its declaration names first (``handlers/<kind>.py``); None for a kind that
    keeps none (``GC``, ``SkillGrants``: only keys others enqueue)."""
    return _VIEWS.get(f"{kind.lower()}_views")


_VIEWS = {str(member): member for member in IndexId if member.endswith("_views")}


#: "No view": the object is gone (distinct from any view, None included).
MISSING: Any = object()


def condition_status(status: Mapping[str, Any] | None, type_: str) -> tuple[str, str]:
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return str(cond.get("status", "Unknown")), str(cond.get("reason", ""))
    return "Unknown", ""


def base_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every view carries: identity, generations and our status."""
    meta = body.get("metadata") or {}
    status = dict(body.get("status") or {})
    ready, reason = condition_status(status, READY)
    return {
        "uid": meta.get("uid", ""),
        "generation": meta.get("generation", 0),
        "observed": status.get("observedGeneration"),
        "ready": ready == "True",
        "reason": reason,
        "status": status,
        # Fields cut when it was decoded (nested too deep): reported, never reconciled.
        "tooDeep": tuple(k8s.too_deep(body)),
    }


def count_objects(indexes: Indexes, kinds: Iterable[str]) -> Iterator[tuple[str, str, str, int]]:
    """(kind, condition type, status, how many) of ``kinds``: the objects-by-condition
    metric, at scrape."""
    for kind in kinds:
        index = view_index(kind)
        if index is None:
            continue
        counts: dict[tuple[str, str], int] = {}
        for key in indexes.keys(index):
            values = indexes.values(index, key)
            if not values:
                continue
            view = values[0]
            for cond in view["status"].get("conditions") or ():
                ident = (str(cond.get("type")), str(cond.get("status")))
                counts[ident] = counts.get(ident, 0) + 1
        for (cond_type, status), count in sorted(counts.items()):
            yield kind, cond_type, status, count
