"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Several replicas run; one holds the Lease and writes, the others are standbys that keep
their watch streams and indexes current (a failover does not start cold) and write
nothing. The rules are client-go's ``leaderelection`` package:

* A candidate tries every ``retry_period`` to acquire the Lease: it may take it when
  nobody holds it, or when the holder has not renewed it for ``lease_duration`` measured
  on the candidate's own clock from the moment it *observed* the last change (so clock
  skew between nodes does not matter). Writes use the Lease's resourceVersion: of two
  candidates only one wins.
* The leader renews every ``retry_period``. When it has not renewed successfully for
  ``renew_deadline`` (shorter than ``lease_duration``), it stops leading.

**Fencing.** :meth:`Leadership.write_refusal` is checked by the API client before every
write request (:func:`swarmkit_operator.k8s.set_write_gate`): a replica that is not the
leader, or a leader whose last successful renewal (counted from when that renewal was
*sent*) is older than ``renew_deadline``, sends no write at all. So a leader cut off from
the apiserver stops writing at most ``renew_deadline`` after its last renewal, while a
standby can take over at the earliest ``lease_duration`` after it. One window remains: a
write *sent* just before the fence can still land up to the client's request timeout
later (30 s), which is longer than ``lease_duration - renew_deadline``; such a late write
can overwrite a newer status once, and the watch event it causes makes the new leader
reconcile that object and write its status again (level-triggered). A leader that lost
its Lease then exits (as controller-runtime does): the process starts again as a standby
with fresh state instead of handing its loops back.

On a graceful stop the leader releases the Lease (holder cleared, duration 1 s, as
client-go's ``ReleaseOnCancel``), so a rolling update fails over at once; after a SIGKILL
the standbys wait for the Lease to expire.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import k8s

log = logging.getLogger("swarmkit_operator.leader")

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


@dataclass(frozen=True)
class LeaseSettings:
    """Where the Lease is and how it is held (client-go's names and defaults' shape)."""

    name: str
    namespace: str
    identity: str
    #: How long a standby waits, after it last saw the Lease change, before taking it.
    lease_duration: float = 15.0
    #: How long the leader keeps leading without a successful renewal.
    renew_deadline: float = 10.0
    #: How often the leader renews and a standby retries.
    retry_period: float = 2.0

    def problems(self) -> list[str]:
        """What makes these settings unsafe (client-go refuses the same)."""
        out = []
        if self.retry_period <= 0:
            out.append("retry period must be positive")
        if self.renew_deadline <= self.retry_period * 1.2:
            out.append("renew deadline must exceed 1.2 x the retry period")
        if self.lease_duration <= self.renew_deadline:
            out.append("lease duration must exceed the renew deadline")
        if not self.name or not self.namespace or not self.identity:
            out.append("lease name, namespace and identity must be set")
        return out


def _micro_time(when: datetime | None = None) -> str:
    """A ``MicroTime`` as the apiserver writes it."""
    return (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Leadership:
    """Whether this replica leads, and the gate every write request passes.

    Without leader election (one replica, ``--leader-elect`` off) it leads from the start
    and is never fenced (:meth:`always`).
    """

    elected: bool = True
    leading: bool = False
    #: monotonic time until which a write is allowed (the last renewal + renew deadline).
    fenced_at: float = float("inf")
    acquired: asyncio.Event = field(default_factory=asyncio.Event)
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def always(cls) -> Leadership:
        lead = cls(elected=False, leading=True)
        lead.acquired.set()
        return lead

    def write_refusal(self) -> str | None:
        """Why a write must not be sent now (None: send it)."""
        if not self.elected:
            return None
        if not self.leading:
            return "not the leader (a standby replica writes nothing)"
        if self.clock() >= self.fenced_at:
            return "the leader's lease was not renewed within the renew deadline"
        return None

    def start_leading(self) -> None:
        self.leading = True
        self.acquired.set()


class LeaderElector:
    """Acquires, renews and releases the Lease for a :class:`Leadership` (see the module)."""

    def __init__(
        self,
        settings: LeaseSettings,
        leadership: Leadership,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.leadership = leadership
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._holder: str | None = None
        self.transitions = 0

    @property
    def path(self) -> str:
        return LEASES.format(namespace=self.settings.namespace)

    # --- one attempt ----------------------------------------------------------------------

    async def _call(self, verb: str, path: str, body: Any = None) -> tuple[int, Any]:
        # No retries inside one attempt and a timeout well inside the renew deadline: the
        # loop retries every retry_period, and a hung request must not outlive the fence.
        timeout = max(0.5, min(self.settings.retry_period, self.settings.renew_deadline / 3))
        try:
            return await k8s.request(verb, path, body, fenced=False, timeout=timeout, retries=0)
        except k8s.ApiError as exc:
            return exc.status or 0, str(exc)

    async def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go's ``tryAcquireOrRenew``): True when this replica holds
        the Lease afterwards."""
        s = self.settings
        now = self.leadership.clock()
        status, lease = await self._call("GET", f"{self.path}/{s.name}")
        if status == 404:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "spec": self._spec(acquire=_micro_time(), transitions=0),
            }
            status, _ = await self._call("POST", self.path, body)
            if status in (200, 201):
                self._holder = s.identity
                return True
            return False
        if status != 200 or not isinstance(lease, dict):
            return False
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (
            holder,
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseDurationSeconds"),
            spec.get("leaseTransitions"),
        )
        if record != self._observed:
            self._observed = record
            self._observed_at = now
        self._holder = holder or None
        duration = float(spec.get("leaseDurationSeconds") or s.lease_duration)
        if holder and holder != s.identity and self._observed_at + duration > now:
            return False  # held by another, not expired
        mine = holder == s.identity
        transitions = int(spec.get("leaseTransitions") or 0)
        lease["spec"] = self._spec(
            acquire=spec.get("acquireTime") if mine else _micro_time(),
            transitions=transitions if mine else transitions + 1,
        )
        status, _ = await self._call("PUT", f"{self.path}/{s.name}", lease)
        if status == 200:
            self._holder = s.identity
            self.transitions = lease["spec"]["leaseTransitions"]
            return True
        return False  # 409: someone else wrote it first

    def _spec(self, acquire: Any, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.settings.identity,
            "leaseDurationSeconds": max(1, round(self.settings.lease_duration)),
            "acquireTime": acquire,
            "renewTime": _micro_time(),
            "leaseTransitions": transitions,
        }

    # --- the loops ------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire (retrying forever), lead, renew until the deadline passes; then return
        after calling ``on_stopped_leading``."""
        s = self.settings
        lead = self.leadership
        announced = False
        while True:
            sent = lead.clock()
            if await self.try_acquire_or_renew():
                lead.fenced_at = sent + s.renew_deadline
                break
            if not announced:
                log.info(
                    "waiting for the lease %s/%s (held by %s); standing by",
                    s.namespace,
                    s.name,
                    self._holder or "nobody",
                )
                announced = True
            await asyncio.sleep(s.retry_period)
        log.info("acquired the lease %s/%s as %s: leading", s.namespace, s.name, s.identity)
        lead.start_leading()
        await self.on_started_leading()
        while True:
            await asyncio.sleep(s.retry_period)
            renewed = False
            while lead.clock() < lead.fenced_at:
                sent = lead.clock()
                if await self.try_acquire_or_renew():
                    lead.fenced_at = sent + s.renew_deadline
                    renewed = True
                    break
                if self._holder not in (None, s.identity):
                    break  # someone else holds it: it was lost
                await asyncio.sleep(min(s.retry_period / 2, 0.5))
            if not renewed:
                lead.fenced_at = min(lead.fenced_at, lead.clock())
                lead.leading = False
                why = (
                    f"held by {self._holder} now"
                    if self._holder not in (None, s.identity)
                    else f"not renewed within the renew deadline ({s.renew_deadline:g}s)"
                )
                log.error("lost the lease %s/%s (%s): stopped writing", s.namespace, s.name, why)
                self.on_stopped_leading()
                return

    async def release(self) -> None:
        """Give the Lease up at once (a graceful stop): client-go's ``ReleaseOnCancel``."""
        lead = self.leadership
        if not lead.leading or lead.write_refusal() is not None:
            return
        lead.leading = False  # nothing else writes from here on
        s = self.settings
        status, lease = await self._call("GET", f"{self.path}/{s.name}")
        if status != 200 or not isinstance(lease, dict):
            return
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != s.identity:
            return
        spec.update(
            holderIdentity="",
            leaseDurationSeconds=1,
            renewTime=_micro_time(),
        )
        lease["spec"] = spec
        status, _ = await self._call("PUT", f"{self.path}/{s.name}", lease)
        if status == 200:
            log.info("released the lease %s/%s", s.namespace, s.name)
