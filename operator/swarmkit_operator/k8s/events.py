"""Event correlation: the same reason about the same object within a window is one Event.

As client-go's event recorder does (``tools/record/events_cache.go``: its ``EventLogger``
turns a repeat into a PATCH of the Event's ``count`` and ``lastTimestamp``, in an LRU of
4,096 keys), :func:`~.objects.post_event` keeps one :class:`Correlated` entry per
(involved object, type, reason): the first occurrence POSTs an Event, a repeat within
:data:`WINDOW` of the previous one PATCHes that Event (``count``, ``lastTimestamp`` and
the latest message), so a condition that fails on every retry, a Run whose effects fail
in a loop or a burst of the same Event shows as one line of ``kubectl describe`` with a
count, not hundreds of Events. The key leaves the message out (client-go's aggregator
does the same for "similar" events): the latest message is the one shown.

Repeats that arrive while the entry's write is on its way are folded into the next write
(each write sends the count so far), so a burst of N costs one POST and at most one PATCH
per write that was in flight, never N writes. The window runs from the last occurrence,
client-go's aggregate interval (10 minutes); an entry past it, or evicted from the LRU,
starts a new Event (so does a PATCH answered 404: the apiserver's Event TTL removed it).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Seconds after an occurrence within which a repeat is folded into its Event (client-go's
#: ``defaultAggregateIntervalInSeconds``).
WINDOW = 600.0
#: Keys remembered at most (client-go's ``maxLruCacheEntries``): the oldest is forgotten.
MAX_ENTRIES = 4096

Key = tuple[str, str, str, str, str, str]


def correlation_key(involved: Mapping[str, Any], type_: str, reason: str) -> Key:
    """The object (kind, namespace, name, uid), the Event's type and reason."""
    return (
        str(involved.get("kind", "")),
        str(involved.get("namespace", "")),
        str(involved.get("name", "")),
        str(involved.get("uid", "")),
        type_,
        reason,
    )


@dataclass
class Correlated:
    """One (object, type, reason): the Event written for it and the occurrences so far."""

    #: The Event's name once POSTed (None: not written yet, or to be written anew).
    name: str | None = None
    #: Occurrences counted, and how many of them the Event shows (written).
    count: int = 0
    written: int = 0
    #: The newest occurrence's message (what the next write sends).
    message: str = ""
    #: Monotonic time of the latest occurrence.
    last_seen: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class EventCorrelator:
    """The LRU of :class:`Correlated` entries (pure bookkeeping: the writes are the
    caller's, :func:`~.objects.post_event`)."""

    def __init__(self, window: float = WINDOW, max_entries: int = MAX_ENTRIES) -> None:
        self.window = window
        self.max_entries = max_entries
        self._entries: OrderedDict[Key, Correlated] = OrderedDict()

    def occurred(self, key: Key, message: str, now: float, count: int = 1) -> Correlated:
        """Count ``count`` occurrences of ``key`` at ``now``; the entry to write (a fresh
        one when the previous occurrence is older than the window)."""
        entry = self._entries.get(key)
        if entry is None or now - entry.last_seen > self.window:
            entry = Correlated()
            self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        entry.count += count
        entry.message = message
        entry.last_seen = now
        return entry

    def __len__(self) -> int:
        return len(self._entries)


Pending = tuple[Mapping[str, Any], str, str, str]


def coalesce(batch: Sequence[Pending]) -> list[tuple[Mapping[str, Any], str, str, str, int]]:
    """Queued Events (involved, type, reason, message) → one per (object, type, reason),
    in first-queued order, with the newest message and how many were queued."""
    merged: dict[Key, tuple[Mapping[str, Any], str, str, str, int]] = {}
    for involved, type_, reason, message in batch:
        key = correlation_key(involved, type_, reason[:128])
        count = merged[key][4] + 1 if key in merged else 1
        merged[key] = (involved, type_, reason, message, count)
    return list(merged.values())
