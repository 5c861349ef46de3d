"""The manager: what starts the operator's runnables, in one order, and when.

The composition root (``handlers/root.py``) builds the components (the reconcile
controller with its indexes and work queue, the Runs and gateways controllers, the skill
library) and hands the manager each one's loops as :class:`Runnable` values
(:meth:`Manager.add`, in the order they start), controller-runtime's ``Manager.Add`` with
``NeedLeaderElection``:

* a runnable that does not need the lease (the watch streams, the start-up re-LIST that
  drops what vanished) starts in every replica, when :meth:`Manager.start` is called: every
  replica keeps its watch streams and indexes current, and queues the keys its events touch
  (the work queue de-duplicates them: at most one entry per object);
* a runnable that needs the lease (every writer: the reconcile, Runs and gateways workers,
  every periodic loop) starts only once this replica leads (:mod:`.leader` opens the API
  client's write gate), in the root's order (what a standby's events asked to write, such
  as opening a skill Review, waits in its controller's queue until then);
* a leader that loses its Lease stops writing at once (the gate) and exits, so it comes
  back as a standby with fresh state (controller-runtime does the same).

Every periodic loop is one :class:`Periodic` runnable (``fn`` every ``every`` seconds, or
sooner when :meth:`Periodic.poke` is called; an error is logged and the next tick comes),
so none is hand-written with its own ``while True: sleep``.

Without leader election (``--leader-elect`` off: one replica) the replica leads from the
start. Why the operator elects its own leader instead of using kopf peering is in
``docs/design/operator-runtime.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import k8s, metrics
from ..config import Settings
from .leader import LeaderElector, Leadership, LeaseSettings

log = logging.getLogger("swarmkit_operator.manager")


def lease_settings(settings: Settings) -> LeaseSettings | None:
    """The Lease this replica competes for, None when leader election is off.

    Raises ValueError naming what is unsafe (client-go refuses the same settings).
    """
    leader = settings.leader
    if not leader.enabled:
        return None
    lease = LeaseSettings(
        name=leader.name or "swarmkit-operator",
        namespace=leader.namespace or operator_namespace(settings.pod_namespace),
        # client-go's identity: the pod (host) name and a unique suffix per process.
        identity=f"{settings.instance or socket.gethostname()}_{uuid.uuid4()}",
        lease_duration=leader.lease_duration,
        renew_deadline=leader.renew_deadline,
        retry_period=leader.retry_period,
    )
    problems = lease.problems()
    if problems:
        raise ValueError("leader election: " + "; ".join(problems))
    return lease


def operator_namespace(pod_namespace: str) -> str:
    """Where the operator runs: ``POD_NAMESPACE`` (the chart sets it), the in-cluster
    service account's namespace, else ``default``."""
    if pod_namespace:
        return pod_namespace
    with contextlib.suppress(OSError):
        return Path(k8s.SA_DIR, "namespace").read_text().strip() or "default"
    return "default"


@dataclass(frozen=True)
class Runnable:
    """Something the manager starts: ``start`` returns once it runs (it may create tasks of
    its own and stop them in its component's ``stop``, or return a task for the manager to
    cancel); ``needs_leader``: it writes, so it starts only in the leader."""

    name: str
    start: Callable[[], Awaitable[asyncio.Task[Any] | None]]
    needs_leader: bool = True
    #: What it finishes at a graceful stop while this replica still leads, before the
    #: Lease is handed over (in-flight reconciles and their Events, the skill library's
    #: last flush): after the hand-over the write gate refuses every write.
    drain: Callable[[], Awaitable[Any]] | None = None


class Periodic:
    """``fn`` every ``every`` seconds (the first right away), or sooner when poked; one
    pass at a time; a failed pass is logged and the next one comes on time. ``settle``:
    seconds to wait after a poke, so a burst of pokes makes one pass. ``last``: the pass
    of a graceful stop (the loop stopped first: never two passes at once)."""

    def __init__(
        self,
        name: str,
        fn: Callable[[], Awaitable[Any]],
        every: float,
        needs_leader: bool = True,
        settle: float = 0.0,
        first_after: float = 0.0,
        last: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self.name = name
        self.last = last
        self._task: asyncio.Task[Any] | None = None
        self.fn = fn
        self.every = every
        self.needs_leader = needs_leader
        self.settle = settle
        self.first_after = first_after
        self.passes = 0
        self._wake = asyncio.Event()

    def poke(self, *_: Any) -> None:
        """Run the next pass now (after ``settle``), not at the next period."""
        self._wake.set()

    def runnable(self) -> Runnable:
        async def start() -> asyncio.Task[Any]:
            self._task = asyncio.create_task(self._loop(), name=f"swarmkit-{self.name}")
            return self._task

        return Runnable(self.name, start, self.needs_leader, self._drain if self.last else None)

    async def _drain(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.last is not None:
            await self.last()

    async def _loop(self) -> None:
        if self.first_after > 0:
            await asyncio.sleep(self.first_after)
        while True:
            try:
                await self.fn()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("%s failed: %s: %s", self.name, type(exc).__name__, exc)
            self.passes += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.every)
            if self._wake.is_set():
                self._wake.clear()
                if self.settle > 0:
                    await asyncio.sleep(self.settle)


def _exit_lost() -> None:
    """The lease is lost: leave now (the process restarts as a standby)."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(1)


@dataclass
class Manager:
    """The operator's runnables and the leader election that gates the writers."""

    leadership: Leadership
    lease: LeaseSettings | None = None
    #: Every runnable, in the order they start (each group: the lease's, then the others).
    runnables: list[Runnable] = field(default_factory=list)
    on_lost: Callable[[], None] = _exit_lost
    elector: LeaderElector | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    started: bool = False

    @classmethod
    def build(cls, lease: LeaseSettings | None) -> Manager:
        leadership = Leadership() if lease is not None else Leadership.always()
        return cls(leadership=leadership, lease=lease)

    def add(self, runnable: Runnable | Periodic) -> None:
        """Start ``runnable`` with :meth:`start` (or, if it needs the lease, once this
        replica leads), after the runnables of its group added before it."""
        self.runnables.append(runnable.runnable() if isinstance(runnable, Periodic) else runnable)

    @property
    def writers(self) -> list[str]:
        """The names of the runnables that start only in the leader, in order."""
        return [r.name for r in self.runnables if r.needs_leader]

    async def start(self) -> None:
        """Install the write gate; start what every replica runs; elect (or just lead) and
        start the writers. The gate comes first: an event a standby's streams deliver must
        find its writes refused."""
        k8s.set_write_gate(self.leadership.write_refusal)
        await self._start(needs_leader=False)
        if self.lease is None:
            self.leadership.start_leading()
            await self._start_writers()
            return
        self.elector = LeaderElector(self.lease, self.leadership, self._start_writers, self._lost)
        self.tasks.append(asyncio.create_task(self.elector.run(), name="swarmkit-leader"))

    async def _start(self, needs_leader: bool) -> None:
        for runnable in self.runnables:
            if runnable.needs_leader == needs_leader:
                task = await runnable.start()
                if task is not None:
                    self.tasks.append(task)

    async def _start_writers(self) -> None:
        metrics.LEADER.set(1)
        await self._start(needs_leader=True)
        self.started = True
        log.info(
            "writers started (%s): %s",
            "leader" if self.lease else "single replica",
            ", ".join(self.writers),
        )

    def _lost(self) -> None:
        metrics.LEADER.set(0)
        self.on_lost()

    async def stop(self) -> None:
        """Graceful stop: the writers finish what they drain while this replica still
        leads (the last added first), then the Lease is handed over (a standby takes it at
        once) and every loop is cancelled."""
        if self.started and self.leadership.write_refusal() is None:
            for runnable in reversed(self.runnables):
                if runnable.needs_leader and runnable.drain is not None:
                    try:
                        await runnable.drain()
                    except Exception as exc:
                        log.warning(
                            "draining %s failed: %s: %s", runnable.name, type(exc).__name__, exc
                        )
        if self.elector is not None:
            with contextlib.suppress(Exception):
                await self.elector.release()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.tasks.clear()
        metrics.LEADER.set(0)
