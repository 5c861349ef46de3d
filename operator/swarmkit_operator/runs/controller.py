"""The Runs controller: when each Run is reconciled, one at a time per Run.

Every watch event only *kicks* the Run it concerns: its uid goes into the controller's
:class:`~swarmkit_operator.runtime.workqueue.WorkQueue` (the operator's one work-queue
type), and :data:`~.model.MAX_CONCURRENCY` workers per lane run each Run's reconcile
(:func:`.observe.reconcile`): kicks that arrive while a reconcile runs make one more pass,
not one per kick, and one Run is never reconciled twice at once. Runs not started yet have
a lane (and a budget) of their own, so starting never waits behind updates. A failed
reconcile is retried with backoff, and a reconcile may ask to be run again after some
seconds (a delayed key, replaced by any earlier kick). The workers start with
:meth:`RunController.start`, which the manager calls once this replica leads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from swarmkit_api.run import RunSpec

from .. import metrics
from ..config import OperatorConfig
from ..reviews import ReviewsController
from ..runtime.workqueue import Workers, WorkQueue
from . import observe, spend
from .model import MAX_CONCURRENCY, TRACE, Indexes, RunView
from .resolve import Resolved, Waiting
from .state import RunState

log = logging.getLogger("swarmkit_operator.runs")


class RunController:
    """Reconciles Runs; see the module docstring and :mod:`swarmkit_operator.runs`."""

    def __init__(
        self, config: OperatorConfig, indexes: Indexes, reviews: ReviewsController | None = None
    ) -> None:
        self.state = RunState(config, indexes, reviews)
        self.config = config
        self.idx = indexes
        #: Set by :meth:`start` (this replica leads): the scheduler and retention loops wait
        #: for it too.
        self.ready = asyncio.Event()
        #: Lane 0: Runs not started yet; lane 1: the others. Each has its own budget.
        self.queue: WorkQueue[str] = WorkQueue(
            lane=lambda uid: 0 if self._unstarted(uid) else 1,
            lanes=2,
            limits=(MAX_CONCURRENCY, MAX_CONCURRENCY),
        )
        self._failures: dict[str, int] = {}
        self._workers = Workers(self.queue, self._work, "swarmkit-runs")
        # A Run that ended may have freed a SpendQuota: Runs waiting on one look again.
        self.state.on_finished.append(lambda namespace, _topology: self.kick_waiting(namespace))

    @property
    def on_finished(self) -> list[Callable[[str, str | None], None]]:
        """Called with (namespace, topology) when a Run of that topology finishes."""
        return self.state.on_finished

    @property
    def milestones(self) -> dict[str, dict[str, float]]:
        """Test/bench hooks: monotonic times of milestones per run uid."""
        return self.state.milestones

    # -- scheduling ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the Reviews controller the Runs ask, then the workers (the manager calls it
        once this replica leads)."""
        self.state.reviews.start()
        self._workers.start(2 * MAX_CONCURRENCY)
        self.ready.set()

    async def stop(self) -> None:
        await self._workers.stop()
        await self.state.reviews.stop()

    def kick(self, uid: str, delay: float = 0.0) -> None:
        """Reconcile Run ``uid`` soon (coalesced: one pass per Run at a time)."""
        if not uid:
            return
        if TRACE:
            self.state.mark(uid, "kicked")
        self.queue.add(uid, delay)

    def kick_waiting(self, namespace: str | None) -> None:
        """Re-check every Run of ``namespace`` waiting for its target."""
        for uid in list(self.state.waiting.get(namespace or "", ())):
            self.kick(uid)

    async def _work(self, uid: str) -> None:
        started = time.monotonic()
        self.state.changed.discard(uid)
        try:
            again = await self.reconcile(uid)
            self._failures.pop(uid, None)
            outcome = "changed" if uid in self.state.changed else "unchanged"
        except Exception as exc:  # retried with backoff; never lost
            failures = self._failures.get(uid, 0) + 1
            self._failures[uid] = failures
            again = min(0.5 * 2**failures, 60.0)
            outcome = "error"
            metrics.RETRIES.labels("Run").inc()
            log.warning("run %s: reconcile failed (retry in %.1fs): %s", uid, again, exc)
        metrics.RECONCILES.labels("Run", outcome).inc()
        metrics.RECONCILE_SECONDS.labels("Run").observe(time.monotonic() - started)
        if again is not None:
            self.queue.add(uid, again)

    def _unstarted(self, uid: str) -> bool:
        view = self.run_view(uid)
        return view is not None and not view.status.get("jobName") and not self.state.jobs_of(uid)

    async def spend_loop(self) -> None:
        """The leader's SpendQuota loop (:func:`.spend.refresh_loop`)."""

        def kick() -> None:
            for namespace in list(self.state.waiting):
                self.kick_waiting(namespace)

        await spend.refresh_loop(
            self.config.watch_namespaces, lambda uid: self.run_view(uid) is not None, kick
        )

    # -- views and single steps ------------------------------------------------------------
    def run_view(self, uid: str) -> RunView | None:
        return self.state.run_view(uid)

    def all_runs(self) -> list[RunView]:
        return self.state.all_runs()

    async def reconcile(self, uid: str) -> float | None:
        """One reconcile of Run ``uid`` (:func:`.observe.reconcile`)."""
        return await observe.reconcile(self.state, uid)

    async def resolve(self, run: RunView, spec: RunSpec) -> Waiting | Resolved:
        """The Run's target (:meth:`.resolve.Resolver.resolve`)."""
        return await self.state.resolver.resolve(run, spec)
