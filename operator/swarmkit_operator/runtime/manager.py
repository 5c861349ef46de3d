"""The manager: what starts the operator's writing loops, in one order, only in the leader.

kopf's start-up handlers build the components (the reconcile :class:`Controller` with its
indexes and work queue, the Runs and gateways controllers, the skill library) and hand
them to the manager; the last start-up handler, once the watch streams are open, calls
:meth:`Manager.start`. From there on this module alone decides when anything writes:

* every replica keeps its watch streams and indexes current, and queues the keys its
  events touch (the work queue de-duplicates them: at most one entry per object);
* only the leader (:mod:`.leader`) starts the writers, in this order: the API client's
  write gate, the reconcile workers and Event poster, the objects that changed while no
  leader ran, the Runs controller (and with it the scheduler and retention loops, which
  wait for it), the gateways controller, the skill library's flush, and the writes event
  handlers deferred while this replica stood by;
* a leader that loses its Lease stops writing at once (the gate) and exits, so it comes
  back as a standby with fresh state (controller-runtime does the same).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import k8s, metrics
from .leader import LeaderElector, Leadership, LeaseSettings

if TYPE_CHECKING:  # annotations only: the manager is built before them
    from ..gateways import GatewayController
    from ..library import SkillLibrary
    from ..reconcile.controller import Controller
    from ..runs import RunController

log = logging.getLogger("swarmkit_operator.manager")

LEADER_ELECT_ENV = "SWARMKIT_LEADER_ELECT"
#: Defaults a little shorter than client-go's 15/10/2 s: a SIGKILLed leader's work resumes
#: in under 15 s (the lease duration plus one retry period at worst).
DEFAULT_LEASE_DURATION = 12.0
DEFAULT_RENEW_DEADLINE = 8.0
DEFAULT_RETRY_PERIOD = 2.0


def manager_of(memo: Any) -> Manager | None:
    """The manager kept in kopf's memo (None before the start-up handler ran)."""
    found = getattr(memo, "manager", None)
    return found if isinstance(found, Manager) else None


def lease_settings_from_env(env: Mapping[str, str]) -> LeaseSettings | None:
    """The leader election's settings (``__main__`` puts its flags there), None when off."""
    if env.get(LEADER_ELECT_ENV, "").lower() not in ("1", "true", "yes", "on"):
        return None
    identity = env.get("POD_NAME") or socket.gethostname()
    settings = LeaseSettings(
        name=env.get("SWARMKIT_LEASE_NAME") or "swarmkit-operator",
        namespace=env.get("SWARMKIT_LEASE_NAMESPACE") or operator_namespace(env),
        # client-go's identity: the pod (host) name and a unique suffix per process.
        identity=f"{identity}_{uuid.uuid4()}",
        lease_duration=float(env.get("SWARMKIT_LEASE_DURATION") or DEFAULT_LEASE_DURATION),
        renew_deadline=float(env.get("SWARMKIT_RENEW_DEADLINE") or DEFAULT_RENEW_DEADLINE),
        retry_period=float(env.get("SWARMKIT_RETRY_PERIOD") or DEFAULT_RETRY_PERIOD),
    )
    problems = settings.problems()
    if problems:
        raise ValueError("leader election: " + "; ".join(problems))
    return settings


def operator_namespace(env: Mapping[str, str]) -> str:
    """Where the operator runs: ``POD_NAMESPACE`` (the chart sets it), the in-cluster
    service account's namespace, else ``default``."""
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"]
    with contextlib.suppress(OSError):
        return Path(k8s.SA_DIR, "namespace").read_text().strip() or "default"
    return "default"


def _exit_lost() -> None:
    """The lease is lost: leave now (the process restarts as a standby)."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(1)


@dataclass
class Manager:
    """The operator's writing loops and the leader election that gates them."""

    leadership: Leadership
    lease: LeaseSettings | None = None
    controller: Controller | None = None
    runs: RunController | None = None
    gateways: GatewayController | None = None
    library: SkillLibrary | None = None
    on_lost: Callable[[], None] = _exit_lost
    elector: LeaderElector | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    started: bool = False

    @classmethod
    def build(cls, lease: LeaseSettings | None) -> Manager:
        leadership = Leadership() if lease is not None else Leadership.always()
        return cls(leadership=leadership, lease=lease)

    async def start(self) -> None:
        """Install the write gate; elect (or just lead) and start the writers."""
        k8s.set_write_gate(self.leadership.write_refusal)
        if self.lease is None:
            self.leadership.start_leading()
            await self._start_writers()
            return
        self.elector = LeaderElector(self.lease, self.leadership, self._start_writers, self._lost)
        self.tasks.append(asyncio.create_task(self.elector.run(), name="swarmkit-leader"))

    async def _start_writers(self) -> None:
        metrics.LEADER.set(1)
        ctl = self.controller
        if ctl is not None:
            await ctl.start()
            count = ctl.enqueue_unsettled()
            if count:
                log.info("%d object(s) changed while no leader ran: reconciling them first", count)
        if self.runs is not None:
            self.runs.ready.set()  # the scheduler and retention loops wait for this too
            # SpendQuota status follows the clock; Runs waiting on one look again.
            self.tasks.append(asyncio.create_task(self.runs.spend_loop(), name="swarmkit-spend"))
        if self.gateways is not None:
            self.gateways.ready.set()
        if self.library is not None:
            self.library.start()
        self.started = True
        log.info("writers started (%s)", "leader" if self.lease else "single replica")

    def _lost(self) -> None:
        metrics.LEADER.set(0)
        self.on_lost()

    async def stop(self) -> None:
        """Graceful stop: hand the Lease over first (a standby takes it at once)."""
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
