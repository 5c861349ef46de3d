"""What the reconcile loop remembers between events and reconciles, in two typed parts of
the :class:`~.controller.Controller`: per object (its queue key, :class:`Bookkeeping`)
and per rendered ConfigMap (:class:`Renders`).

Its own module so the status write (:mod:`.status`) records into the same typed book as
the controller reads, without importing the controller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..builders import Verdict
from .views import Key


@dataclass(frozen=True)
class Held:
    """A new Skill's render whose first status write is held while a bulk apply arrives
    (:mod:`.parking`): for its uid and generation."""

    uid: str
    generation: int
    #: When its first write was first held (the bound of a hold counts from here).
    since: float
    #: The status fields the render decided (all but ``grantedBy`` and ``usage``).
    fields: Mapping[str, Any]
    verdicts: tuple[Verdict, ...]
    #: What the render changes in the Skill's view (what its dependents read).
    view: Mapping[str, Any]


@dataclass
class Bookkeeping:
    """What the loop remembers per object (its queue key) between events and reconciles;
    :meth:`forget` drops an object's when it is gone."""

    #: The event's body, kept for the reconcile (a kind's ``keep_body``: saves a GET).
    bodies: dict[Key, dict[str, Any]] = field(default_factory=dict)
    #: When a key first deferred (its reconcile runs forced after ``max_defer``).
    deferred_since: dict[Key, float] = field(default_factory=dict)
    #: key → (resourceVersion or "", until when, the status written): a write not yet seen.
    awaiting: dict[Key, tuple[str, float, dict[str, Any]]] = field(default_factory=dict)
    #: key → the keys that deferred on it, re-queued once it settles.
    waiters: dict[Key, set[Key]] = field(default_factory=dict)
    #: key → (sha256 of the status last written, when): an identical write on its way.
    written: dict[Key, tuple[str, float]] = field(default_factory=dict)
    #: key → what its dependents compare, as last seen (a kind's ``dependents_view``).
    seen: dict[Key, Any] = field(default_factory=dict)
    #: key → the generation its last reconcile wrote status for (so its echo is no news).
    reconciled_generation: dict[Key, int] = field(default_factory=dict)
    #: Specs parsed once per object generation (``handlers/agent.workspace_view``).
    parsed: dict[Any, Any] = field(default_factory=dict)
    #: key → a new Skill's render whose first status write is held (:mod:`.parking`).
    held: dict[Key, Held] = field(default_factory=dict)
    #: namespace → the timer releasing its held Skills once its apply pauses (:mod:`.parking`).
    held_release: dict[str, asyncio.TimerHandle] = field(default_factory=dict)

    def forget(self, key: Key) -> None:
        """The object is gone: drop what was remembered of it (``seen`` stays: its
        dependents compare the object's absence with it)."""
        for memory in (
            self.bodies,
            self.reconciled_generation,
            self.written,
            self.awaiting,
            self.deferred_since,
            self.held,
        ):
            memory.pop(key, None)


@dataclass
class Renders:
    """What the loop remembers of rendered ConfigMaps, by (namespace, name)."""

    #: Created by this process, when (not in the index yet: its watch event is on its way).
    created: dict[tuple[str, str], float] = field(default_factory=dict)
    #: The uid of the ConfigMap found to be exactly the render (immutable: that uid cannot
    #: change content), so it is read back once, not per reconcile.
    verified: dict[tuple[str, str], str] = field(default_factory=dict)
    #: The owner whose render name a ConfigMap took: deleting it re-queues the owner (an
    #: unlabelled ConfigMap's deletion would not).
    foreign: dict[tuple[str, str], Key] = field(default_factory=dict)
    #: Since when garbage collection has found a rendered ConfigMap unreferenced.
    unreferenced_since: dict[tuple[str, str], float] = field(default_factory=dict)
    #: namespace → this process's one LIST of its renders, made when the first of many
    #: needed proving: name → (uid, sha256 of data and binaryData) of each immutable one;
    #: an entry goes once a check used it (:mod:`.proofs`).
    listed: dict[str, asyncio.Task[dict[str, tuple[str, str]]]] = field(default_factory=dict)
