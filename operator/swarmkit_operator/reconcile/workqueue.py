"""The reconcile work queue: keys ``(kind, namespace, name)``, deduplicated and delayed.

Watch handlers add keys; the :class:`~swarmkit_operator.reconcile.controller.Controller`'s
workers take them off. A key stands for "look at this object again", never for an event,
so adding one that is already queued is free and a burst of events costs one reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import deque

from .. import metrics

Key = tuple[str, str, str]  # (kind, namespace, name)
# Inputs before their dependents (a workspace before the agents using it, ...), so a burst
# settles bottom-up; garbage collection last, once the renders it must keep are known.
# A Skill's grantedBy (SkillGrants) ranks with the Skills.
PRIORITY = {
    "Workspace": 0,
    "Skill": 1,
    "SkillGrants": 1,
    "Agent": 2,
    "Funnel": 2,  # before the Topologies that name it
    "Topology": 3,
    "GC": 4,
}


class WorkQueue:
    """A deduplicating, delaying, priority work queue with per-key serialization.

    A key is never processed by two workers at once; a key added while it is being
    processed is processed again afterwards. Among due keys, lower :data:`PRIORITY` first.

    A key added with ``background=True`` (a check that nothing suggests will change
    anything: every object of a start-up listing or a resync whose status is current) waits
    until no other key is due, so that after a restart with 5,000 objects a new or edited
    one is not queued behind 5,000 checks. Adding it normally, or :meth:`promote`, moves it
    to the front lanes.
    """

    def __init__(self) -> None:
        self._ready: list[deque[Key]] = [deque() for _ in range(len(PRIORITY))]
        # Background keys (see above), by the same priorities.
        self._background: list[deque[Key]] = [deque() for _ in range(len(PRIORITY))]
        self._in_background: set[Key] = set()
        # (when due, tie-breaker, key); superseded entries stay and are skipped when popped.
        self._delayed: list[tuple[float, int, Key]] = []
        self._scheduled: dict[Key, float] = {}  # key → when due: the one live entry per key
        self._processing: set[Key] = set()
        self._again: dict[Key, float] = {}  # added while processing: re-add when done
        self._wakeup = asyncio.Event()
        self._seq = 0
        self.closed = False

    def __len__(self) -> int:
        return len(self._scheduled)

    def add(self, key: Key, delay: float = 0.0, background: bool = False) -> None:
        if self.closed:
            return
        when = time.monotonic() + max(delay, 0.0)
        if key in self._processing:
            prev = self._again.get(key)
            self._again[key] = when if prev is None else min(prev, when)
            return
        prev = self._scheduled.get(key)
        if prev is not None and prev <= when:
            if not background and delay <= 0:
                self.promote(key)
            return
        if background and delay <= 0:
            self._scheduled[key] = when
            self._in_background.add(key)
            self._background[PRIORITY[key[0]]].append(key)
            metrics.QUEUE_DEPTH.set(len(self._scheduled))
            self._wakeup.set()
            return
        self._in_background.discard(key)
        self._scheduled[key] = when
        if delay <= 0:
            self._ready[PRIORITY[key[0]]].append(key)
        else:
            self._seq += 1
            heapq.heappush(self._delayed, (when, self._seq, key))
        metrics.QUEUE_DEPTH.set(len(self._scheduled))
        self._wakeup.set()

    def promote(self, key: Key) -> None:
        """Move a background key to its kind's lane (something waits for it now)."""
        if key in self._in_background:
            self._in_background.discard(key)
            self._ready[PRIORITY[key[0]]].append(key)
            self._wakeup.set()

    def pending(self, key: Key) -> bool:
        return key in self._scheduled or key in self._processing

    async def get(self) -> Key:
        while True:
            now = time.monotonic()
            while self._delayed and self._delayed[0][0] <= now:
                when, _, key = heapq.heappop(self._delayed)
                if self._scheduled.get(key) == when:
                    self._ready[PRIORITY[key[0]]].append(key)
            for ready in self._ready:
                while ready:
                    key = ready.popleft()
                    when_due = self._scheduled.get(key)
                    if when_due is None or when_due > now or key in self._in_background:
                        continue  # stale entry (re-scheduled later or already taken)
                    return self._take(key)
            for background in self._background:
                while background:
                    key = background.popleft()
                    if key in self._in_background:  # else promoted or taken since
                        self._in_background.discard(key)
                        return self._take(key)
            timeout = self._delayed[0][0] - now if self._delayed else None
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)

    def _take(self, key: Key) -> Key:
        del self._scheduled[key]
        self._processing.add(key)
        metrics.QUEUE_DEPTH.set(len(self._scheduled))
        return key

    def done(self, key: Key) -> None:
        self._processing.discard(key)
        again = self._again.pop(key, None)
        if again is not None:
            self.add(key, again - time.monotonic())

    @property
    def busy(self) -> int:
        return len(self._processing)
