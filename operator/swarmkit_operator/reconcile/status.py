"""Writing a reconcile's outcome: a status merge-patch, and an Event per transition.

A reconciler computes the status it wants (fields plus condition verdicts);
:func:`write_status` patches only if that differs from what the object shows, so a
restart or a resync that changes nothing writes nothing. It also records the write in the
controller (``awaiting``) until the watch shows it, which is what makes dependents defer
instead of reading a status that is about to change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from swarmkit_api import GROUP, VERSION

from .. import k8s
from ..builders import Verdict
from ..conditions import set_condition, transitions
from ..hashing import canonical_json
from .workqueue import Key

if TYPE_CHECKING:
    from .controller import Controller

log = logging.getLogger("swarmkit_operator.status")

PLURALS = {
    "Workspace": "workspaces",
    "Skill": "skills",
    "Agent": "agents",
    "Topology": "topologies",
}


async def write_status(
    ctl: Controller,
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
        conditions = set_condition(conditions, v.type, v.status, v.reason, v.message, generation)
    desired: dict[str, Any] = {**fields, "observedGeneration": generation}
    desired["conditions"] = conditions
    ctl.reconciled_generation[key] = generation
    if same_status(desired, current):
        return False
    digest = canonical_json(desired)
    last = ctl.written.get(key)
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
    ctl.awaiting[key] = ("", time.monotonic() + 5.0, desired)
    try:
        rv = await k8s.patch_status(PLURALS[kind], namespace, name, desired)
    except BaseException:
        ctl.awaiting.pop(key, None)
        raise
    pending = ctl.awaiting.get(key)
    if rv is None:
        ctl.awaiting.pop(key, None)
        return False
    if pending is not None and pending[2] is desired:  # not seen yet: also match the rv
        ctl.awaiting[key] = (rv, pending[1], desired)
    ctl.written[key] = (digest, time.monotonic())
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
            ctl.post_event(involved, "Warning", cond["reason"], describe(cond))
    normal = [c for c in changed if c["status"] != "False"]
    if normal:
        main = next((c for c in normal if c["type"] == "Ready"), normal[0])
        text = "; ".join(describe(c) for c in [main, *(c for c in normal if c is not main)])
        ctl.post_event(involved, "Normal", main["reason"], text)
    return True


def describe(cond: Mapping[str, Any]) -> str:
    """A condition in one line, as an Event message."""
    text = f"{cond['type']} is {cond['status']} ({cond['reason']})"
    return f"{text}: {cond['message']}" if cond.get("message") else text


def same_status(desired: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether writing ``desired`` would leave ``current`` as it is (None/[]/{} equal absence).

    Only the keys of ``desired`` count: a merge-patch leaves the others alone.
    """
    for key, value in desired.items():
        have = current.get(key)
        if value in (None, [], {}) and have in (None, [], {}):
            continue
        if value != have:
            return False
    return True
