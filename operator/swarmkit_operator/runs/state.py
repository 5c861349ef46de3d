"""What the Runs controller remembers between reconciles, and its view of a Run.

Nothing here is the truth about a Run: the API objects are (through the indexes). This is
only what saves work or bridges the short time an index lags behind the controller's own
writes: its latest status write per Run (the *overlay*), the Jobs it just created, which
Runs wait for their target, which pod finalizers it already released. Lost on a restart,
and every decision is then recomputed from the API objects.

Bounded: :meth:`RunState.forget` drops a Run's entries once it is final (all but the
overlay, which bridges the index's lag behind the final write and goes when the index
catches up) and every entry once it is gone, so the leader's memory follows the live,
unfinished Runs, not every Run it ever saw.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..config import OperatorConfig, RunsSettings
from ..indexes import one
from ..reviews import ReviewsController
from ..workload.resolve import Resolver
from .model import Indexes, RunView, rv
from .tracing import RunSpans

log = logging.getLogger("swarmkit_operator.runs")


class RunState:
    """The controller's memory (see the module docstring), shared by the Runs modules."""

    def __init__(
        self,
        config: OperatorConfig,
        indexes: Indexes,
        settings: RunsSettings | None = None,
        resolver: Resolver | None = None,
        reviews: ReviewsController | None = None,
    ) -> None:
        self.config = config
        self.settings = settings or RunsSettings()
        self.idx = indexes
        #: The operator's one resolver (the root builds it and hands it to the Runs
        #: controller, serving and the gateways; a controller built alone makes its own).
        self.resolver = resolver or Resolver(config, indexes.resolver())
        #: The operator's own spans of traced Runs (on when ``OTEL_*`` names an endpoint).
        self.spans = RunSpans(dict(self.settings.otel))
        #: The Reviews' owner: Runs ask it to open their Reviews and move their status on.
        self.reviews = reviews or ReviewsController()
        #: run uid → {resourceVersion, status} of this process's latest status write, used
        #: while the Runs index has not caught up with it.
        self.overlay: dict[str, dict[str, Any]] = {}
        #: run uid → (when, Job name, Job summary) of a Job this process just created, used
        #: only until the Jobs index has seen it (never to decide that a Job is gone).
        self.created_jobs: dict[str, tuple[float, str, dict[str, Any]]] = {}
        #: namespace → uids of the Runs there waiting for their target to be Ready.
        self.waiting: dict[str, set[str]] = {}
        #: uids of the pods whose outcome finalizer was removed already.
        self.released: set[str] = set()
        #: (namespace, name) of the bundle ConfigMaps labelled finished already.
        self.labelled: set[tuple[str, str]] = set()
        #: Runs whose current reconcile wrote something (for the reconcile metrics).
        self.changed: set[str] = set()
        #: Runs whose start was attempted by this process (a second attempt is sequential).
        self.start_attempts: set[str] = set()
        #: Called with (namespace, topology) when a Run of that topology finishes.
        self.on_finished: list[Callable[[str, str | None], None]] = []
        #: Test/bench hooks: monotonic times of milestones per run uid.
        self.milestones: dict[str, dict[str, float]] = {}
        self._background: set[asyncio.Task[Any]] = set()

    # -- views -----------------------------------------------------------------------------
    def run_view(self, uid: str) -> RunView | None:
        """The Run from the index, with this process's own later status write over it."""
        body = one(self.idx.runs, uid)
        if body is None:
            self.overlay.pop(uid, None)
            return None
        status = dict(body.get("status") or {})
        version = rv(body)
        overlay = self.overlay.get(uid)
        if overlay is not None:
            if rv(overlay) > version:
                status = dict(overlay.get("status") or {})
                version = rv(overlay)
            else:
                self.overlay.pop(uid, None)  # the index has caught up
        return RunView(
            name=str(body["name"]),
            namespace=str(body["namespace"]),
            uid=uid,
            generation=int(body.get("generation") or 0),
            spec=dict(body.get("spec") or {}),
            status=status,
            labels=dict(body.get("labels") or {}),
            deleting=bool(body.get("deletionTimestamp")),
            resource_version=version,
        )

    def all_runs(self) -> list[RunView]:
        out = []
        for uid in list(self.idx.runs.keys()):
            view = self.run_view(str(uid))
            if view is not None:
                out.append(view)
        return out

    def jobs_of(self, uid: str) -> list[dict[str, Any]]:
        return [dict(j) for j in self.idx.jobs.get(uid) or ()]

    def pods_of(self, uid: str) -> list[dict[str, Any]]:
        return [dict(p) for p in self.idx.pods.get(uid) or ()]

    def reviews_of(self, uid: str) -> list[dict[str, Any]]:
        if self.idx.reviews is None:
            return []
        return [dict(r) for r in self.idx.reviews.get(uid) or ()]

    def forget(self, uid: str, gone: bool = False) -> None:
        """Drop what this process remembers of Run ``uid``: it is final (nothing will start,
        wait or be traced for it again) or, ``gone``, deleted (its overlay too)."""
        self.created_jobs.pop(uid, None)
        self.start_attempts.discard(uid)
        self.resolver.ledger.forget(uid)
        self.milestones.pop(uid, None)
        for namespace in [ns for ns, uids in self.waiting.items() if uid in uids]:
            self.waiting[namespace].discard(uid)
            if not self.waiting[namespace]:
                del self.waiting[namespace]
        if gone:
            self.overlay.pop(uid, None)

    # -- small services --------------------------------------------------------------------
    def spawn(self, coro: Awaitable[Any]) -> None:
        """Run ``coro`` in the background (Events, labels: nothing a reconcile waits for)."""

        async def runner() -> None:
            try:
                await coro
            except Exception as exc:
                log.warning("background call failed: %s", exc)

        task = asyncio.get_running_loop().create_task(runner())
        # The loop keeps only weak references to tasks: hold it until it is done.
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def mark(self, uid: str, what: str) -> None:
        """Record the first time ``uid`` reached milestone ``what``."""
        self.milestones.setdefault(uid, {}).setdefault(what, time.monotonic())

    def trace(self, uid: str) -> None:
        """With ``$SWARMKIT_RUNS_TRACE``, log ``uid``'s milestones so far: one line
        ``trace <uid> <json>`` of CLOCK_MONOTONIC seconds, the clock every process on the
        machine shares (``bench/bench_runs.py --trace`` lines them up with its own watches)."""
        if self.settings.trace:
            marks = {k: round(v, 6) for k, v in self.milestones.get(uid, {}).items()}
            log.info("trace %s %s", uid, json.dumps(marks, sort_keys=True))
