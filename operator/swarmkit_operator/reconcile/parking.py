"""A Skill's first status write, held while a bulk apply into its namespace is arriving.

A Skill's status carries ``grantedBy``: the Agents granting it. Applied as a library is
(``kubectl apply -f dir/``: every Skill, then the Agents), a Skill reconciled at once
writes ``grantedBy`` before its Agents exist, and again when they arrive: 1.6 status writes
per Skill at 20,000 (issue 43). So a Skill never written yet renders at once (its
ConfigMap is created while the apply goes on) but holds its status write while objects
new to the operator, never reconciled, keep arriving in its namespace
(:data:`BURST_OBJECTS` Skills and Agents within :data:`BURST_SECONDS`: no one creates
those by hand; a restart's LIST of reconciled objects is not counted), at most
:data:`MAX_HELD_SECONDS`; then it writes once, with the Agents the indexes show.

A new Skill reconciled while a few other new objects arrive (2 to 19 within
:data:`BURST_SECONDS`) first waits :data:`FIRST_LOOK_SECONDS` to see whether an apply is
starting (``_may_be_starting``); one created alone is written at once.

A Skill written before the apply could be told from objects created by hand (the head of
an apply: its first write made before :data:`BURST_OBJECTS` arrived) is not written again
for each of its Agents as they arrive: its ``grantedBy`` follows once the apply pauses
(:func:`pause_in`), in one write (bench-scale's hot Skill, granted by every Agent, took 7
status writes at N = 500 before).

Meanwhile what it rendered is what its dependents read (:func:`as_rendered`): an Agent
granting it resolves the render and need not wait for the status write. The garbage
collection keeps held renders (:func:`held_renders`). What is held lives in the
controller's :class:`~.book.Bookkeeping` (``held``, ``held_release``); a Skill deleted
while held is dropped from it with the rest of its bookkeeping (``Bookkeeping.forget``).
docs/design/scale.md says why this and not the alternatives.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from ..indexes import IndexId
from .book import Held
from .controller import Controller
from .views import Key

#: A bulk apply is arriving while at least BURST_OBJECTS Skills and Agents new to the
#: operator were indexed in the namespace within the last BURST_SECONDS.
BURST_KINDS = ("skills", "agents")
BURST_SECONDS = 2.0
BURST_OBJECTS = 20
#: The longest a Skill's first status write is held (an apply that never pauses).
MAX_HELD_SECONDS = 300.0
#: The soonest a namespace's release looks again while its apply is still arriving.
RELEASE_LOOK_SECONDS = 0.1
#: How long a new Skill waits, when other new objects arrived with it, to see whether a
#: bulk apply is starting (see ``_may_be_starting``).
FIRST_LOOK_SECONDS = 0.25


def current(ctl: Controller, key: Key, view: Mapping[str, Any] | None) -> Held | None:
    """``key``'s held render if it is of the object and generation ``view`` shows."""
    found = ctl.book.held.get(key)
    if found is None or view is None:
        return None
    if (found.uid, found.generation) != (view["uid"], view["generation"]):
        return None
    # Its ConfigMap deleted meanwhile (neither indexed nor just created): render again.
    ident = (key[1], str(found.fields.get("renderedConfigMap") or ""))
    indexed = ctl.lookup(IndexId.RENDERED_CONFIG_MAP_NAMES, ident) is not None
    if not indexed and ident not in ctl.renders.created:
        return None
    return found


def bulk_arriving(ctl: Controller, namespace: str) -> bool:
    return ctl.indexes.arrived(BURST_KINDS, namespace, BURST_SECONDS) >= BURST_OBJECTS


def pause_in(ctl: Controller, namespace: str) -> float | None:
    """Seconds until the bulk apply arriving in ``namespace`` would pause if nothing more
    came (:meth:`~swarmkit_operator.indexes.Indexes.burst_ends`, at least
    :data:`RELEASE_LOOK_SECONDS`); None: none is arriving."""
    if not bulk_arriving(ctl, namespace):
        return None
    ends = ctl.indexes.burst_ends(BURST_KINDS, namespace, BURST_SECONDS, BURST_OBJECTS)
    return max(ends - time.monotonic(), RELEASE_LOOK_SECONDS)


def hold(ctl: Controller, key: Key, render: Held) -> bool:
    """Whether the first status write of ``render``'s Skill waits (then it is held until
    the apply pauses, see :func:`_release`); False: write it now."""
    book = ctl.book
    earlier = book.held.get(key)
    if earlier is not None and earlier.uid == render.uid and earlier.since < render.since:
        # Rendered again (edited, or its ConfigMap deleted) while held: the bound counts
        # from its first hold, not from each render.
        render = dataclasses.replace(render, since=earlier.since)
    if _may_be_starting(ctl, key, render):
        return True
    if not bulk_arriving(ctl, key[1]) or time.monotonic() - render.since > MAX_HELD_SECONDS:
        book.held.pop(key, None)
        return False
    book.held[key] = render
    # Queued still (what waits for it sees it pending), at the latest when a hold ends.
    ctl.enqueue(*key, delay=MAX_HELD_SECONDS - (time.monotonic() - render.since) + 0.1)
    timers = book.held_release
    if key[1] not in timers:
        timers[key[1]] = asyncio.get_running_loop().call_later(BURST_SECONDS, _release, ctl, key[1])
    return True


def _may_be_starting(ctl: Controller, key: Key, render: Held) -> bool:
    """Whether the Skill waits a moment (:data:`FIRST_LOOK_SECONDS` after its render) to
    see whether a bulk apply is starting: other objects new to the operator arrived in its
    namespace meanwhile, not yet the :data:`BURST_OBJECTS` of one. The first Skills of an
    apply were written at once and again once their Agents arrived (one Skill at 5,000,
    the first of the apply); one created by hand alone is written at once."""
    if time.monotonic() - render.since >= FIRST_LOOK_SECONDS:
        return False
    arrived = ctl.indexes.arrived(BURST_KINDS, key[1], BURST_SECONDS)
    if arrived < 2 or arrived >= BURST_OBJECTS:
        return False
    ctl.book.held[key] = render
    ctl.enqueue(*key, delay=FIRST_LOOK_SECONDS - (time.monotonic() - render.since))
    return True


def _release(ctl: Controller, namespace: str) -> None:
    """Once the apply into ``namespace`` pauses, its held Skills are reconciled now. One
    timer per namespace, not a look per held Skill: 20,000 held Skills looking every
    BURST_SECONDS would cost the process more than their writes. While the apply arrives,
    the timer is set for the moment it would be over if nothing more came
    (:meth:`~swarmkit_operator.indexes.Indexes.burst_ends`), not a whole BURST_SECONDS
    later: looking at a fixed pace released the held writes up to that long after the
    pause, idle time on every bulk apply's way to Ready."""
    timers = ctl.book.held_release
    wait = pause_in(ctl, namespace)
    if wait is not None:
        timers[namespace] = asyncio.get_running_loop().call_later(wait, _release, ctl, namespace)
        return
    timers.pop(namespace, None)
    for key in [k for k in ctl.book.held if k[1] == namespace]:
        ctl.enqueue(*key)


def as_rendered(ctl: Controller, key: Key, view: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Skill's view as a dependent reads it: with its held render, when it has one."""
    found = current(ctl, key, view)
    return view if found is None else {**view, **found.view}


def is_held(ctl: Controller, key: Key, view: Mapping[str, Any]) -> bool:
    return current(ctl, key, view) is not None


def held_renders(ctl: Controller, namespace: str) -> set[str]:
    """The rendered ConfigMaps of the namespace's held Skills (kept by the collection)."""
    return {
        str(h.fields.get("renderedConfigMap") or "")
        for key, h in ctl.book.held.items()
        if key[1] == namespace
    }
