"""The operator's one work queue: keys deduplicated, delayed, rate-limited, in priority lanes.

Every controller of the operator works off one (client-go's rate-limiting workqueue in
spirit): the reconcile :class:`~swarmkit_operator.reconcile.controller.Controller` (keys
``(kind, namespace, name)``, a lane per kind), the Runs controller (a Run's uid; a lane for
Runs not started yet) and the gateways controller (an Agent's namespace and name). Watch
functions add keys; a controller's :class:`Workers` take them off. A key stands for "look
at this object again", never for an event, so adding one that is already queued is free
and a burst of events costs one reconcile.

Retries are the queue's, one rule for every controller (controller-runtime's
``AddRateLimited``/``Forget`` with ``Result{RequeueAfter}``): a process function returns a
:class:`Result` (its outcome for the metrics, and when to look again); one that raises is
re-added after :func:`backoff` of its failures so far, and a success forgets them. The
workers count every reconcile the same way (``swarmkit_reconcile_total{kind, outcome}``,
its duration, ``swarmkit_workqueue_retries_total{kind}``), whatever the controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from .. import k8s, metrics

K = TypeVar("K", bound=Hashable)

log = logging.getLogger("swarmkit_operator")

#: The first retry's delay and the longest one (seconds).
BASE_DELAY = 0.5
MAX_DELAY = 60.0


def backoff(failures: int) -> float:
    """Seconds before retrying a key that failed ``failures`` times in a row: doubled per
    failure from :data:`BASE_DELAY` up to :data:`MAX_DELAY`, with ±20% jitter so keys that
    failed together (an apiserver restart) do not retry in lockstep."""
    return float(min(BASE_DELAY * 2 ** max(failures - 1, 0), MAX_DELAY) * random.uniform(0.8, 1.2))


@dataclass(frozen=True)
class Result:
    """What one process call of a key came to: ``outcome`` (a label of
    ``swarmkit_reconcile_total``) and, when set, seconds after which to look again."""

    outcome: str
    requeue_after: float | None = None
    #: Whether the key's failures are forgotten (a reconcile that only waited for its
    #: inputs neither failed nor succeeded: its backoff stays).
    forget: bool = True


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, priority work queue with per-key serialization.

    A key is never processed by two workers at once; a key added while it is being
    processed is processed again afterwards. Among due keys, the lower lane first
    (``lane(key)``, from 0 to ``lanes - 1``, asked when the key is added); a lane with a
    ``limit`` hands out no more keys while that many of its keys are being processed, so
    the other lanes' keys still get a worker (Runs to start never wait behind updates).

    A key added with ``background=True`` (a check that nothing suggests will change
    anything: every object of a start-up listing or a resync whose status is current) waits
    until no other key is due, so that after a restart with 5,000 objects a new or edited
    one is not queued behind 5,000 checks. Adding it normally, or :meth:`promote`, moves it
    to the front lanes.
    """

    def __init__(
        self,
        lane: Callable[[K], int] = lambda _: 0,
        lanes: int = 1,
        limits: Sequence[int | None] = (),
        depth: Callable[[int], None] | None = None,
    ) -> None:
        self._lane = lane
        self._limits = list(limits) + [None] * (lanes - len(limits))
        #: Called with the number of queued keys whenever it changes (a gauge).
        self._depth = depth or (lambda _: None)
        self._ready: list[deque[K]] = [deque() for _ in range(lanes)]
        # Background keys (see above), by the same lanes.
        self._background: list[deque[K]] = [deque() for _ in range(lanes)]
        self._in_background: set[K] = set()
        # (when due, tie-breaker, key); superseded entries stay and are skipped when popped.
        self._delayed: list[tuple[float, int, K]] = []
        self._scheduled: dict[K, float] = {}  # key → when due: the one live entry per key
        self._processing: dict[K, int] = {}  # key → its lane, while a worker has it
        self._busy = [0] * lanes  # keys being processed, per lane
        self._again: dict[K, float] = {}  # added while processing: re-add when done
        self._failures: dict[K, int] = {}  # key → failures in a row (add_rate_limited)
        self._wakeup = asyncio.Event()
        self._seq = 0
        self.closed = False

    def __len__(self) -> int:
        return len(self._scheduled)

    def add(self, key: K, delay: float = 0.0, background: bool = False) -> None:
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
            self._background[self._lane(key)].append(key)
            self._depth(len(self._scheduled))
            self._wakeup.set()
            return
        self._in_background.discard(key)
        self._scheduled[key] = when
        if delay <= 0:
            self._ready[self._lane(key)].append(key)
        else:
            self._seq += 1
            heapq.heappush(self._delayed, (when, self._seq, key))
        self._depth(len(self._scheduled))
        self._wakeup.set()

    def add_rate_limited(self, key: K, delay: float | None = None) -> tuple[int, float]:
        """Re-add ``key`` after a failure: after :func:`backoff` of its failures in a row
        (or ``delay``). Returns (failures so far, the delay)."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        wait = backoff(failures) if delay is None else delay
        self.add(key, wait)
        return failures, wait

    def forget(self, key: K) -> None:
        """``key`` succeeded: its next failure starts from the first delay again."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        """How many times in a row ``key`` failed (0 after :meth:`forget`)."""
        return self._failures.get(key, 0)

    def promote(self, key: K) -> None:
        """Move a background key to its lane (something waits for it now)."""
        if key in self._in_background:
            self._in_background.discard(key)
            self._ready[self._lane(key)].append(key)
            self._wakeup.set()

    def pending(self, key: K) -> bool:
        return key in self._scheduled or key in self._processing

    def _open(self, lane: int) -> bool:
        limit = self._limits[lane]
        return limit is None or self._busy[lane] < limit

    async def get(self) -> K:
        while True:
            now = time.monotonic()
            while self._delayed and self._delayed[0][0] <= now:
                when, _, key = heapq.heappop(self._delayed)
                if self._scheduled.get(key) == when:
                    self._ready[self._lane(key)].append(key)
            for lane, ready in enumerate(self._ready):
                while ready and self._open(lane):
                    key = ready.popleft()
                    when_due = self._scheduled.get(key)
                    if when_due is None or when_due > now or key in self._in_background:
                        continue  # stale entry (re-scheduled later or already taken)
                    return self._take(key, lane)
            for lane, background in enumerate(self._background):
                while background and self._open(lane):
                    key = background.popleft()
                    if key in self._in_background:  # else promoted or taken since
                        self._in_background.discard(key)
                        return self._take(key, lane)
            timeout = self._delayed[0][0] - now if self._delayed else None
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)

    def _take(self, key: K, lane: int) -> K:
        del self._scheduled[key]
        self._processing[key] = lane
        self._busy[lane] += 1
        self._depth(len(self._scheduled))
        return key

    def done(self, key: K) -> None:
        lane = self._processing.pop(key, None)
        if lane is not None:
            self._busy[lane] -= 1
            if self._limits[lane] is not None:
                self._wakeup.set()  # a worker may take that lane's next key now
        again = self._again.pop(key, None)
        if again is not None:
            self.add(key, again - time.monotonic())

    @property
    def busy(self) -> int:
        return len(self._processing)


#: What a failed key is retried after instead of its backoff (None: the backoff).
OnError = Callable[[Hashable, Exception], Awaitable[float | None]]


class Workers(Generic[K]):
    """``count`` tasks taking keys off a :class:`WorkQueue` and processing each (one key
    at a time per key: the queue sees to that), started once this replica leads.

    ``process`` returns a :class:`Result`; the workers record it under ``kind(key)``,
    forget the key's failures and re-add it after ``requeue_after``. A ``process`` that
    raises is counted as an ``error`` and re-added rate-limited (``on_error`` may choose
    the delay: an object's own fault, reported as its condition, waits longer)."""

    def __init__(
        self,
        queue: WorkQueue[K],
        process: Callable[[K], Awaitable[Result]],
        name: str,
        kind: Callable[[K], str],
        after: Callable[[K], None] | None = None,
        on_error: Callable[[K, Exception], Awaitable[float | None]] | None = None,
        describe: Callable[[K], str] = str,
    ) -> None:
        self.queue = queue
        self._process = process
        self._name = name
        self._kind = kind
        #: Called with each key once the queue has it back (``done``).
        self._after = after
        self._on_error = on_error
        self._describe = describe
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def started(self) -> bool:
        return bool(self._tasks)

    def start(self, count: int) -> list[asyncio.Task[None]]:
        """Start ``count`` workers (once); returns their tasks."""
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._run(), name=f"{self._name}-{i}") for i in range(count)
            ]
        return list(self._tasks)

    async def stop(self) -> None:
        """Take no more keys and cancel the workers."""
        self.queue.closed = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def process(self, key: K) -> None:
        """Process ``key`` once: record it, then requeue it as its result (or error) says."""
        kind = self._kind(key)
        started = time.monotonic()
        try:
            result = await self._process(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            delay = await self._on_error(key, exc) if self._on_error is not None else None
            failures, wait = self.queue.add_rate_limited(key, delay)
            metrics.RECONCILES.labels(kind, "error").inc()
            metrics.RETRIES.labels(kind).inc()
            log.warning(
                "reconciling %s %s failed (attempt %d, retrying in %.1fs): %s",
                kind,
                self._describe(key),
                failures,
                wait,
                exc,
                exc_info=failures == 1 and not isinstance(exc, k8s.ApiError),
            )
            return
        finally:
            metrics.RECONCILE_SECONDS.labels(kind).observe(time.monotonic() - started)
        if result.forget:
            self.queue.forget(key)
        metrics.RECONCILES.labels(kind, result.outcome).inc()
        if result.requeue_after is not None:
            self.queue.add(key, result.requeue_after)

    async def _run(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                if not self.queue.closed:
                    await self.process(key)
            finally:
                self.queue.done(key)
                if self._after is not None:
                    self._after(key)
            # Neither a ready queue nor a key whose processing finds nothing to write awaits
            # anything real: without this, one worker would run a backlog (every object
            # after a restart) to its end, starving the watch streams and the probes.
            await asyncio.sleep(0)
