"""The Runs controller: when each Run is reconciled, one at a time per Run.

Every watch event only *kicks* the Run it concerns; :class:`RunController` runs each kicked
Run's reconcile (:func:`.observe.reconcile`) in its own coalescing worker: kicks that arrive
while a reconcile runs make one more pass, not one per kick; any number of Runs proceed in
parallel, within a concurrency budget. A failed reconcile is retried with backoff, and a
reconcile may ask to be run again after some seconds (a timer, replaced by any earlier kick).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from swarmkit_api.run import RunSpec

from .. import metrics
from ..config import OperatorConfig
from . import observe, spend
from .model import MAX_CONCURRENCY, TRACE, Indexes, RunView
from .resolve import Resolved, Waiting
from .state import RunState

log = logging.getLogger("swarmkit_operator.runs")


@dataclass
class _Worker:
    #: Kicked since the current pass started: make one more.
    dirty: bool = False
    task: asyncio.Task[None] | None = None
    #: A delayed kick (a recheck or a retry).
    timer: asyncio.TimerHandle | None = None
    failures: int = 0


class RunController:
    """Reconciles Runs; see the module docstring and :mod:`swarmkit_operator.runs`."""

    def __init__(self, config: OperatorConfig, indexes: Indexes) -> None:
        self.state = RunState(config, indexes)
        self.config = config
        self.idx = indexes
        #: Set once the indexes are populated; no reconcile runs before.
        self.ready = asyncio.Event()
        self._workers: dict[str, _Worker] = {}
        self._sem = asyncio.Semaphore(MAX_CONCURRENCY)
        #: Runs not started yet have their own budget: starting never waits behind updates.
        self._start_sem = asyncio.Semaphore(MAX_CONCURRENCY)
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
    def kick(self, uid: str, delay: float = 0.0) -> None:
        """Reconcile Run ``uid`` soon (coalesced: one worker per Run)."""
        if not uid:
            return
        if TRACE:
            self.state.mark(uid, "kicked")
        worker = self._workers.setdefault(uid, _Worker())
        if delay > 0:
            loop = asyncio.get_running_loop()
            if worker.timer is not None:
                if worker.timer.when() <= loop.time() + delay:
                    return  # an earlier timer is set already
                worker.timer.cancel()
            worker.timer = loop.call_later(delay, self.kick, uid)
            return
        if worker.timer is not None:
            worker.timer.cancel()
            worker.timer = None
        worker.dirty = True
        if worker.task is None or worker.task.done():
            worker.task = asyncio.get_running_loop().create_task(self._work(uid, worker))

    def kick_waiting(self, namespace: str | None) -> None:
        """Re-check every Run of ``namespace`` waiting for its target."""
        for uid in list(self.state.waiting.get(namespace or "", ())):
            self.kick(uid)

    async def _work(self, uid: str, worker: _Worker) -> None:
        await self.ready.wait()
        while worker.dirty:
            worker.dirty = False
            started = time.monotonic()
            self.state.changed.discard(uid)
            try:
                async with self._budget(uid):
                    again = await self.reconcile(uid)
                worker.failures = 0
                outcome = "changed" if uid in self.state.changed else "unchanged"
            except Exception as exc:  # retried with backoff; never lost
                worker.failures += 1
                again = min(0.5 * 2**worker.failures, 60.0)
                outcome = "error"
                metrics.RETRIES.labels("Run").inc()
                log.warning("run %s: reconcile failed (retry in %.1fs): %s", uid, again, exc)
            metrics.RECONCILES.labels("Run", outcome).inc()
            metrics.RECONCILE_SECONDS.labels("Run").observe(time.monotonic() - started)
            if again is not None and not worker.dirty:
                self.kick(uid, again)
        if uid not in self._workers:
            return
        # Forget the worker of a Run that is gone (nothing pending for it).
        if worker.timer is None and not worker.dirty and self.run_view(uid) is None:
            self._workers.pop(uid, None)

    def _budget(self, uid: str) -> asyncio.Semaphore:
        view = self.run_view(uid)
        unstarted = (
            view is not None and not view.status.get("jobName") and not self.state.jobs_of(uid)
        )
        return self._start_sem if unstarted else self._sem

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
