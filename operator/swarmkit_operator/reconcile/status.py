"""Writing a reconcile's outcome: a server-side apply of status, and an Event per transition
(an object's first status: its Warnings only).

A reconciler computes the status it wants (fields plus condition verdicts);
:func:`write_status` applies it only if that differs from what the object shows, so a
restart or a resync that changes nothing writes nothing. It applies as the reconcile
controller's own field manager (``swarmkit-reconcile``) exactly the fields and the
condition types it computes: the gateways controller's ``Serving`` on an Agent, say, is
another manager's entry of the same ``conditions`` list (a list keyed by ``type``), which
this write neither sends nor can put back stale. It also records the write in the
controller's book (``awaiting``, :mod:`.book`) until the watch shows it, which is what
makes dependents defer instead of reading a status that is about to change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from swarmkit_api import GROUP, VERSION
from swarmkit_api.conditions import READY
from swarmkit_api.resources import KINDS_BY_NAME

from .. import k8s
from ..builders import Verdict
from ..conditions import set_condition, transitions
from ..hashing import hash_of
from .book import Bookkeeping
from .views import Key

#: ``post_event(involved, type, reason, message)``: the controller's queued Event poster.
PostEvent = Callable[[dict[str, Any], str, str, str], None]


log = logging.getLogger("swarmkit_operator.status")


@dataclass(frozen=True)
class StatusOf:
    """The object a status write is for, as the reconcile saw it: its kind and name, its
    uid (the Events' involved object), the generation the status observes, and the status
    the object showed (the write is skipped when it would change nothing)."""

    kind: str
    namespace: str
    name: str
    uid: str
    generation: int
    current: Mapping[str, Any] | None

    @classmethod
    def of_view(cls, kind: str, namespace: str, name: str, view: Mapping[str, Any]) -> StatusOf:
        """From a kind's index view (``uid``, ``generation``, ``status``): what most
        reconciles write against."""
        generation = int(view.get("generation") or 0)
        return cls(kind, namespace, name, str(view.get("uid", "")), generation, view.get("status"))


def _by_type(cond: Mapping[str, Any]) -> str:
    return str(cond.get("type", ""))


async def write_status(
    book: Bookkeeping,
    post_event: PostEvent,
    target: StatusOf,
    fields: Mapping[str, Any],
    verdicts: Iterable[Verdict],
    manager: str = k8s.RECONCILE_MANAGER,
) -> bool:
    """Apply status if it differs (as ``manager``); post an Event per condition transition.
    The write is recorded in ``book`` (awaited until the watch shows it).

    ``fields`` and the verdicts' condition types are everything ``manager`` owns of this
    object's status: what it applied before and leaves out now is removed (None: removed).
    """
    kind, namespace, name = target.kind, target.namespace, target.name
    generation = target.generation
    key: Key = (kind, namespace, name)
    current = dict(target.current or {})
    before = list(current.get("conditions") or [])
    verdicts = list(verdicts)
    conditions = before
    for v in verdicts:
        conditions = set_condition(conditions, v.type, v.status, v.reason, v.message, generation)
    mine = own_conditions(conditions, [v.type for v in verdicts])
    desired: dict[str, Any] = {**fields, "observedGeneration": generation}
    if verdicts:
        desired["conditions"] = mine
    book.reconciled_generation[key] = generation
    if same_status(desired, current):
        return False
    # A hash, not the JSON itself: kept per object for as long as it lives (issue 43:
    # 20,000 Skills' status JSON was ~15 MB of the operator's memory).
    digest = hash_of(desired)
    last = book.written.get(key)
    if last is not None and last[0] == digest and time.monotonic() - last[1] < 10:
        return False  # our identical write is still on its way back through the watch
    # Dependents wait until the watch shows this write. Its event may be processed
    # before the PATCH response is, so expect it (by content) before sending.
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "%s %s/%s: status %s",
            kind,
            namespace,
            name,
            {
                k: (current.get(k), v)
                for k, v in desired.items()
                if not same_status({k: v}, current)
            },
        )
    book.awaiting[key] = ("", time.monotonic() + 5.0, desired)
    try:
        rv = await apply_status(kind, namespace, name, desired, manager)
    except BaseException:
        book.awaiting.pop(key, None)
        raise
    pending = book.awaiting.get(key)
    if rv is None:
        book.awaiting.pop(key, None)
        return False
    if pending is not None and pending[2] is desired:  # not seen yet: also match the rv
        book.awaiting[key] = (rv, pending[1], desired)
    book.written[key] = (digest, time.monotonic())
    involved = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "name": name,
        "namespace": namespace,
        "uid": target.uid,
    }
    first = not own_conditions(before, [v.type for v in verdicts])
    post_transitions(post_event, involved, transitions(before, mine), first)
    return True


def post_transitions(
    post_event: PostEvent, involved: dict[str, Any], changed: list[dict[str, Any]], first: bool
) -> None:
    """The Events of one status write's condition transitions (``first``: the object's
    first status).

    Every transition to False is its own Warning; the other transitions of one reconcile
    share one Normal Event (reason of Ready if it is among them), except on the object's
    first status: that a new object is Ready is what its Ready condition says, and an
    Event per created object is a burst trailing every bulk apply (one per object: 24,000
    at 20,000 Skills). A Normal Event marks a change from a state the object showed
    (recovered, re-rendered)."""
    for cond in changed:
        if cond["status"] == "False":
            post_event(involved, "Warning", cond["reason"], describe(cond))
    normal = [c for c in changed if c["status"] != "False"]
    if normal and not first:
        main = next((c for c in normal if c["type"] == READY), normal[0])
        text = "; ".join(describe(c) for c in [main, *(c for c in normal if c is not main)])
        post_event(involved, "Normal", main["reason"], text)


async def apply_status(
    kind: str, namespace: str, name: str, desired: Mapping[str, Any], manager: str
) -> str | None:
    """Apply ``desired``; the new resourceVersion (None: the object is gone).

    None and ``{}`` are left out (absent, as :func:`same_status` reads them: an applied
    empty map is stored as null, which a field typed ``object`` refuses); an empty list
    is applied as such (``missingSkills: []`` says "none", as before). A field to clear
    that the object still shows (written by another manager, e.g. the merge patches of an
    operator older than server-side apply) is then cleared with a merge patch.
    """
    plural = KINDS_BY_NAME[kind].plural  # the API's kinds: one table of plurals
    applied = {k: v for k, v in desired.items() if v is not None and v != {}}
    written = await k8s.apply_status(kind, plural, namespace, name, applied, manager)
    if written is None:
        return None
    status = written.get("status") or {}
    leftover = {k: None for k, v in desired.items() if v is None and status.get(k) is not None}
    if leftover:
        return await k8s.patch_status(plural, namespace, name, leftover, manager)
    return str((written.get("metadata") or {}).get("resourceVersion", ""))


def own_conditions(
    conditions: Iterable[Mapping[str, Any]], types: Iterable[str]
) -> list[dict[str, Any]]:
    """The entries of ``conditions`` whose type is one of ``types`` (a manager's own)."""
    wanted = set(types)
    return [dict(c) for c in conditions if c.get("type") in wanted]


def describe(cond: Mapping[str, Any]) -> str:
    """A condition in one line, as an Event message."""
    text = f"{cond['type']} is {cond['status']} ({cond['reason']})"
    return f"{text}: {cond['message']}" if cond.get("message") else text


def same_status(desired: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether writing ``desired`` would leave ``current`` as it is (None/[]/{} equal absence).

    Only the keys of ``desired`` count: a write leaves the others alone. ``conditions`` is
    a list keyed by ``type``: only the desired types are compared (another controller's
    condition on the same object is not this write's business).
    """
    for key, value in desired.items():
        have = current.get(key)
        if key == "conditions" and isinstance(value, list):
            wanted = {c.get("type") for c in value}
            have = [c for c in have or () if c.get("type") in wanted]
            if sorted(value, key=_by_type) != sorted(have, key=_by_type):
                return False
            continue
        if value in (None, [], {}) and have in (None, [], {}):
            continue
        if value != have:
            return False
    return True
