"""A reconcile that fails because of what the object holds is that object's problem.

Two kinds of fault end in the object's own condition (``Accepted=False``, ``Ready=False``,
with a Warning Event from the status write) instead of a retry loop (issue 47 items 1, 2):

* an object whose value was nested too deep to decode (:mod:`swarmkit_api.decoding` cut it and
  marked the fields): never reconciled, reported at once (``DepthExceeded``);
* a reconcile that raises ``RecursionError`` or ``ValueError`` (a builder's "Maximum
  serialization depth exceeded", a value no model accepts): reported (``Invalid``) after
  the first attempt, then retried at the longest backoff only (a fix is a new generation,
  whose event enqueues it at once).

Everything else (the API unreachable, a conflict) stays a retried failure: it is not the
object's fault. Nothing here touches another object, the queue or the watches.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from swarmkit_api.conditions import ACCEPTED, READY, REASON_DEPTH_EXCEEDED, REASON_INVALID

from ..builders import Verdict
from ..indexes import IndexId
from .status import StatusOf
from .views import view_index

log = logging.getLogger("swarmkit_operator")

#: How much of a field path a message shows (a cut path can be a thousand characters).
PATH_CHARS = 160


class FaultBook(Protocol):
    """What reporting needs of the controller (the :class:`~.controller.Controller`)."""

    def lookup(self, index: IndexId, key: Any) -> Any: ...

    async def write_status(self, target: StatusOf, fields: Any, verdicts: Any) -> bool: ...


def _short(path: str) -> str:
    return path if len(path) <= PATH_CHARS else path[:PATH_CHARS] + "…"


def decoded_fault(view: Any) -> Verdict | None:
    """The verdict of an object whose fields were cut when decoded (None: it was whole)."""
    cut = list(view.get("tooDeep") or ()) if isinstance(view, dict) else []
    if not cut:
        return None
    return Verdict(
        ACCEPTED,
        "False",
        REASON_DEPTH_EXCEEDED,
        f"{_short(cut[0])} is nested too deep to be read; nest it less deeply",
    )


def raised_fault(exc: BaseException) -> Verdict | None:
    """The verdict of a reconcile that raised ``exc`` because of the object (None: not)."""
    deep = isinstance(exc, ValueError) and "depth" in str(exc).lower()
    if isinstance(exc, RecursionError) or deep:
        reason = REASON_DEPTH_EXCEEDED
    elif isinstance(exc, ValueError):
        reason = REASON_INVALID
    else:
        return None
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return Verdict(ACCEPTED, "False", reason, f"the spec cannot be processed: {text}")


async def report(ctl: FaultBook, kind: str, namespace: str, name: str, verdict: Verdict) -> bool:
    """Write ``verdict`` (and Ready=False with its reason) on the object; whether the
    object still exists (a kind without a view cannot carry a condition: False)."""
    index = view_index(kind)
    if index is None:
        return False
    try:
        view = ctl.lookup(index, (namespace, name))
    except KeyError:  # no such index (a controller without the kind's handlers)
        return False
    if not isinstance(view, dict):
        return False
    current = dict(view.get("status") or {})
    # Kept as they are: what the object showed before stays until it is fixed.
    fields = {k: v for k, v in current.items() if k not in ("conditions", "observedGeneration")}
    ready = Verdict(READY, "False", verdict.reason, verdict.message)
    await ctl.write_status(StatusOf.of_view(kind, namespace, name, view), fields, [verdict, ready])
    log.warning("%s %s/%s: %s: %s", kind, namespace, name, verdict.reason, verdict.message)
    return True
