"""The Runs controller: when each Run is reconciled, one at a time per Run.

Every watch event only *kicks* the Run it concerns: its uid goes into the controller's
:class:`~swarmkit_operator.runtime.workqueue.WorkQueue` (the operator's one work-queue
type), and :data:`~.model.MAX_CONCURRENCY` workers per lane run each Run's reconcile
(:func:`.observe.reconcile`): kicks that arrive while a reconcile runs make one more pass,
not one per kick, and one Run is never reconciled twice at once. Runs not started yet have
a lane (and a budget) of their own, so starting never waits behind updates. A failed
reconcile is retried by the queue (rate-limited, the same rule as every controller's), and
a reconcile may ask to be run again after some seconds (a delayed key, replaced by any
earlier kick). The workers start with
:meth:`RunController.start`, which the manager calls once this replica leads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..config import OperatorConfig, RunsSettings
from ..reviews import ReviewsController
from ..runtime.workqueue import Result, Workers, WorkQueue
from ..workload.resolve import Resolver
from . import observe, spend
from .model import MAX_CONCURRENCY, Indexes, RunView
from .state import RunState

log = logging.getLogger("swarmkit_operator.runs")


def _run_key(uid: str) -> str:
    return f"run {uid}"


class RunController:
    """Reconciles Runs; see the module docstring and :mod:`swarmkit_operator.runs`."""

    def __init__(
        self,
        config: OperatorConfig,
        indexes: Indexes,
        settings: RunsSettings | None = None,
        resolver: Resolver | None = None,
        reviews: ReviewsController | None = None,
    ) -> None:
        self.state = RunState(config, indexes, settings, resolver, reviews)
        #: A controller built alone (tests, benches) starts and stops its own Reviews
        #: controller; the root's is a runnable of its own, started before the Runs.
        self._own_reviews = reviews is None
        self.settings = self.state.settings
        self.config = config
        self.idx = indexes
        #: Set by :meth:`start` (this replica leads and its workers run).
        self.ready = asyncio.Event()
        #: Lane 0: Runs not started yet; lane 1: the others. Each has its own budget.
        self.queue: WorkQueue[str] = WorkQueue(
            lane=lambda uid: 0 if self._unstarted(uid) else 1,
            lanes=2,
            limits=(MAX_CONCURRENCY, MAX_CONCURRENCY),
        )
        self._workers = Workers(
            self.queue, self._work, "swarmkit-runs", kind=lambda _: "Run", describe=_run_key
        )
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
        """Start the workers (the manager calls it once this replica leads), after the
        Reviews controller the Runs ask when it is this controller's own."""
        if self._own_reviews:
            self.state.reviews.start()
        self.state.resolver.ledger.start()  # what it creates from now on, it remembers
        self._workers.start(2 * MAX_CONCURRENCY)
        self.ready.set()

    async def stop(self) -> None:
        await self._workers.stop()
        if self._own_reviews:
            await self.state.reviews.stop()

    def kick(self, uid: str, delay: float = 0.0) -> None:
        """Reconcile Run ``uid`` soon (coalesced: one pass per Run at a time)."""
        if not uid:
            return
        if self.settings.trace:
            self.state.mark(uid, "kicked")
        self.queue.add(uid, delay)

    def kick_waiting(self, namespace: str | None) -> None:
        """Re-check every Run of ``namespace`` waiting for its target."""
        for uid in list(self.state.waiting.get(namespace or "", ())):
            self.kick(uid)

    async def _work(self, uid: str) -> Result:
        self.state.changed.discard(uid)
        try:
            again = await self.reconcile(uid)
            return Result("changed" if uid in self.state.changed else "unchanged", again)
        finally:
            self.state.changed.discard(uid)

    def _unstarted(self, uid: str) -> bool:
        view = self.run_view(uid)
        return view is not None and not view.status.get("jobName") and not self.state.jobs_of(uid)

    async def refresh_quotas(self) -> None:
        """One pass of the leader's SpendQuota loop (:func:`.spend.refresh`), then a look
        by every Run waiting on a budget."""
        eval_runs = self.state.idx.eval_runs or {}
        await spend.refresh(
            self.config.watch_namespaces,
            lambda uid: self.run_view(uid) is not None or uid in eval_runs,
        )
        for namespace in list(self.state.waiting):
            self.kick_waiting(namespace)

    # -- views and single steps ------------------------------------------------------------
    def run_view(self, uid: str) -> RunView | None:
        return self.state.run_view(uid)

    def all_runs(self) -> list[RunView]:
        return self.state.all_runs()

    async def reconcile(self, uid: str) -> float | None:
        """One reconcile of Run ``uid`` (:func:`.observe.reconcile`)."""
        return await observe.reconcile(self.state, uid)
