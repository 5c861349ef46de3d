"""The Reviews controller: the one writer of a Review's ``status``, and the one opener.

A Review has three kinds of askers: a parked Run (its question, then resumed, expired or
closed), a SpendQuota hold (decided), and the watch of the Reviews that nobody's
reconcile follows (a swarm-authored skill's review and a gateway session's: Pending,
Decided, Expired at the deadline). None of them writes the Review: each asks this
controller for a *transition* (:meth:`ReviewsController.transition`), or for a Review to
be opened (:meth:`ReviewsController.open`), and this controller writes it.

It is queue-backed like every controller of the operator (the project's
:class:`~swarmkit_operator.runtime.workqueue.WorkQueue`, one key per Review, one pass per
key at a time, its workers started only in the leader):

* a pass reads the Review, opens it when asked to and it does not exist, and writes the
  status that is due: the transition asked for last, else what the Review itself says
  (:func:`derived`); it writes nothing when the status already says so;
* a failed write is never dropped: the key goes back on the queue with backoff and the
  write is tried again until it lands or the Review is gone, whoever asked; an asker that
  awaits the transition gets the error of that pass (its own reconcile fails and is
  retried too);
* a gateway Review's expiry is the same key added with a delay (until its deadline), not
  a timer: on a standby the key waits in the queue until this replica leads;
* each pass is counted like every controller's (``swarmkit_reconcile_total`` and
  ``swarmkit_reconcile_duration_seconds`` with kind ``Review``, retries in
  ``swarmkit_workqueue_retries_total``).

A Review the operator expects to open but finds already there is used only when the
operator created it: its annotation ``swarmkit.dev/created-by`` (which the admission policy
``swarmkit-review-decisions`` requires to be the authenticated creator) names the
operator's own user (a SelfSubjectReview, asked once). Anything else is
:class:`~swarmkit_operator.builders.trust.Refused` (``TamperedObject``), never adopted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from swarmkit_api.review import (
    CREATED_BY_ANNOTATION,
    GATEWAY_LABEL,
    GatewayReviewAsk,
    decision_of,
    gateway_review_name,
)

from . import k8s
from .builders import review as rv
from .builders import trust
from .builders.pod import CONTAINER_NAME
from .runtime.workqueue import Result, Workers, WorkQueue

log = logging.getLogger("swarmkit_operator.reviews")

PLURAL = "reviews"
#: Reviews written at once (one Review is never written by two passes at once).
WORKERS = 2
#: States after which nothing is derived any more (only an asker moves them on).
SETTLED = ("Expired", "Closed", "Resumed")

Key = tuple[str, str]


@dataclass(frozen=True)
class Transition:
    """A Review status an asker wants written (``None`` fields are left as they are)."""

    state: str
    verdict: str | None = None
    decided_by: str | None = None
    decided_at: str | None = None
    resumed_job: str | None = None

    def fields(self) -> dict[str, Any]:
        wanted = {
            "state": self.state,
            "verdict": self.verdict,
            "decidedBy": self.decided_by,
            "decidedAt": self.decided_at or None,
            "resumedJob": self.resumed_job,
        }
        return {k: v for k, v in wanted.items() if v is not None}


def _now() -> datetime:
    return datetime.now(UTC)


def derived(review: Mapping[str, Any], now: datetime) -> Transition | None:
    """What a skill or gateway Review's own content makes due (None: nothing).

    A decision is recorded (``Decided``, who, when); a gateway Review is ``Pending`` until
    then and ``Expired`` once its deadline passed without one (the gateway stopped waiting:
    the admission policy then refuses a late decision). Run and spend Reviews are moved
    on by their askers only."""
    labels = (review.get("metadata") or {}).get("labels") or {}
    gateway = GATEWAY_LABEL in labels
    if not gateway and rv.SKILL_LABEL not in labels:
        return None
    status = review.get("status") or {}
    if status.get("state") in SETTLED:
        return None
    found = decision_of(review)
    if found is not None:
        return Transition("Decided", found.verdict, found.decided_by, found.decided_at or None)
    if not gateway:
        return None
    deadline = rv.deadline_of(review)
    if deadline is not None and now >= deadline:
        return Transition("Expired")
    return Transition("Pending")


def _written(review: Mapping[str, Any], transition: Transition) -> bool:
    """Whether the Review's status already says what ``transition`` asks."""
    status = review.get("status") or {}
    return all(status.get(k) == v for k, v in transition.fields().items() if k != "decidedAt")


class ReviewsController:
    """Opens Reviews and writes their status (module docstring)."""

    def __init__(self, clock: Callable[[], datetime] = _now) -> None:
        self.clock = clock
        self.queue: WorkQueue[Key] = WorkQueue()
        # The same retry rule and metrics as every controller (kind "Review").
        self._workers = Workers(
            self.queue,
            self._work,
            "swarmkit-reviews",
            kind=lambda _: "Review",
            describe=lambda key: f"{key[0]}/{key[1]}",
        )
        #: The transition asked for last, per Review, until it is written.
        self._asked: dict[Key, Transition] = {}
        #: Reviews to open (their manifests), until they exist.
        self._opening: dict[Key, dict[str, Any]] = {}
        #: Askers awaiting the next pass of a key.
        self._waiters: dict[Key, list[asyncio.Future[dict[str, Any] | None]]] = {}
        #: Keys whose current pass wrote something (the reconcile metrics' outcome).
        self._changed: set[Key] = set()
        #: The operator's own user name (who it creates Reviews as), asked once.
        self.identity: str | None = None
        #: The gateway pods whose logs ask for Reviews.
        self.asks = GatewayAsks(self)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the workers and follow the gateway pods (the manager calls it once this
        replica leads)."""
        self._workers.start(WORKERS)
        self.asks.start()

    async def stop(self) -> None:
        await self.asks.stop()
        await self._workers.stop()
        for waiters in self._waiters.values():
            for future in waiters:
                future.cancel()
        self._waiters.clear()

    # -- what askers call ------------------------------------------------------------------
    async def transition(
        self, namespace: str, name: str, transition: Transition
    ) -> dict[str, Any] | None:
        """Have ``transition`` written; returns the Review as written (None: it is gone).

        Raises the error of the pass that tried; the write stays queued and is retried
        all the same."""
        key = (namespace, name)
        self._asked[key] = transition
        return await self._pass(key)

    async def open(self, manifest: Mapping[str, Any], wait: bool = True) -> dict[str, Any] | None:
        """Open the Review ``manifest`` (created by this controller, as the operator);
        returns it, or the operator's existing one of that name. A Review of that name
        the operator did not create raises :class:`~.builders.trust.Refused`. With
        ``wait=False`` it is only queued (a standby opens it once it leads)."""
        meta = manifest["metadata"]
        key = (str(meta["namespace"]), str(meta["name"]))
        self._opening[key] = dict(manifest)
        if not wait:
            self.queue.add(key)
            return None
        return await self._pass(key)

    async def adopt(self, review: Mapping[str, Any]) -> None:
        """``review`` (found by the name the operator expects) was opened by the operator,
        else :class:`~.builders.trust.Refused` naming it (never used)."""
        check_created_by(review, await self._identity())

    def observed(self, type_: str | None, review: Mapping[str, Any]) -> None:
        """A watch event of a skill or gateway Review: queue it when a transition is due
        now, and at its deadline when it may expire then."""
        meta = review.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if type_ == "DELETED":
            self._forget(key)
            return
        due = derived(review, self.clock())
        if due is not None and not _written(review, due):
            self.queue.add(key)
        self._expire_later(key, review, due)

    # -- the passes ------------------------------------------------------------------------
    async def _pass(self, key: Key) -> dict[str, Any] | None:
        future: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(future)
        self.queue.add(key)
        return await future

    async def _work(self, key: Key) -> Result:
        waiters = self._waiters.pop(key, [])
        asked = self._asked.get(key)
        self._changed.discard(key)
        try:
            written = await self.reconcile(key, asked)
        except trust.Refused as refused:  # never retried: the object is not the operator's
            log.warning("review %s/%s: %s", *key, refused.message)
            self._forget(key)
            _settle(waiters, error=refused)
            return Result("error")
        except Exception as exc:  # retried by the queue (rate-limited) until it lands
            _settle(waiters, error=exc)
            raise
        finally:
            changed = key in self._changed
            self._changed.discard(key)
        if self._asked.get(key) is asked:
            self._asked.pop(key, None)
        _settle(waiters, result=written)
        return Result("changed" if changed else "unchanged")

    async def reconcile(self, key: Key, asked: Transition | None) -> dict[str, Any] | None:
        """One pass over Review ``key``: open it if asked, write what is due."""
        namespace, name = key
        review = await k8s.get_custom(PLURAL, namespace, name)
        manifest = self._opening.get(key)
        if manifest is not None:
            if review is None:
                self._changed.add(key)
            review = await self._opened(manifest, review)
            self._opening.pop(key, None)
        if review is None:
            self._asked.pop(key, None)
            return None
        due = asked or derived(review, self.clock())
        if due is not None and not _written(review, due):
            written = await k8s.patch_status_object(
                PLURAL, namespace, name, due.fields(), k8s.REVIEWS_MANAGER
            )
            if written is None:
                return None
            review = written
            self._changed.add(key)
            log.info("review %s/%s: %s", namespace, name, due.state)
        self._expire_later(key, review, derived(review, self.clock()))
        return review

    async def _opened(
        self, manifest: Mapping[str, Any], existing: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The Review ``manifest`` asks for: created now as the operator, or ``existing``
        when the operator created it (else refused)."""
        me = await self._identity()
        if existing is None:
            meta = dict(manifest["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), CREATED_BY_ANNOTATION: me}
            created = await k8s.create_custom_if_absent(
                PLURAL, meta["namespace"], {**manifest, "metadata": meta}
            )
            if created is not None:
                return created
            existing = await k8s.get_custom(PLURAL, meta["namespace"], meta["name"])
            if existing is None:
                raise RuntimeError(f"Review {meta['name']} vanished while it was opened")
        check_created_by(existing, me)
        return existing

    async def _identity(self) -> str:
        if self.identity is None:
            self.identity = await k8s.whoami()
        return self.identity

    def _expire_later(self, key: Key, review: Mapping[str, Any], due: Transition | None) -> None:
        """A pending gateway Review is looked at again at its deadline (a delayed key)."""
        if due is None or due.state != "Pending":
            return
        deadline = rv.deadline_of(review)
        if deadline is not None:
            self.queue.add(key, (deadline - self.clock()).total_seconds())

    def _forget(self, key: Key) -> None:
        self._asked.pop(key, None)
        self._opening.pop(key, None)


class GatewayAsks:
    """Follows the log of every running pod of an Agent's gateway (in the leader) and opens
    the Reviews its sessions ask for (:class:`~swarmkit_api.review.GatewayReviewAsk` lines):
    the gateway's ServiceAccount may not create Reviews, since anyone who may edit the
    namespace can mint its token; a line in its own pod's log is what only it writes."""

    def __init__(self, reviews: ReviewsController) -> None:
        self.reviews = reviews
        #: (namespace, pod) → the running gateway pod, from its watch events.
        self.pods: dict[Key, Mapping[str, Any]] = {}
        self._follows: dict[Key, asyncio.Task[None]] = {}
        #: (namespace, pod) → the Reviews its log asked for already (a reconnect re-reads).
        self._handled: dict[Key, set[str]] = {}
        self.leading = False

    def start(self) -> None:
        self.leading = True
        for key in list(self.pods):
            self._follow(key)

    async def stop(self) -> None:
        self.leading = False
        tasks = list(self._follows.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._follows.clear()

    def pod_event(self, type_: str | None, pod: Mapping[str, Any]) -> None:
        """A gateway pod's watch event: follow it while it runs."""
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        running = (pod.get("status") or {}).get("phase") == "Running"
        if type_ == "DELETED" or not running or meta.get("deletionTimestamp"):
            self.pods.pop(key, None)
            self._handled.pop(key, None)
            task = self._follows.pop(key, None)
            if task is not None:
                task.cancel()
            return
        self.pods[key] = pod
        if self.leading:
            self._follow(key)

    def _follow(self, key: Key) -> None:
        if key not in self._follows or self._follows[key].done():
            name = f"swarmkit-review-asks-{key[0]}-{key[1]}"
            self._follows[key] = asyncio.get_running_loop().create_task(self._read(key), name=name)

    async def _read(self, key: Key) -> None:
        namespace, pod = key
        since: float | None = None
        while key in self.pods:
            now = self.reviews.clock().timestamp()
            # A reconnect reads what was written meanwhile (and a little more: asks already
            # handled are skipped by name); the first read takes the whole log.
            back = int(now - since) + 5 if since is not None else None
            since = now
            try:
                async for line in k8s.follow_pod_log(namespace, pod, CONTAINER_NAME, back):
                    await self.asked(namespace, pod, line)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the pod restarted, the stream broke: read again
                log.info("gateway pod %s/%s: log stream ended: %s", namespace, pod, exc)
            await asyncio.sleep(1.0)

    async def asked(self, namespace: str, pod_name: str, line: str) -> None:
        """One log line of a gateway pod: open the Review it asks for, if it is an ask."""
        try:
            ask = GatewayReviewAsk.from_line(line)
        except ValueError as exc:
            log.warning("gateway pod %s/%s: an unreadable review ask: %s", namespace, pod_name, exc)
            return
        if ask is None or ask.request.gateway_session is None:
            return
        agent = ask.request.gateway_session.agent
        handled = self._handled.setdefault((namespace, pod_name), set())
        name = gateway_review_name(agent, ask.request.gateway_session.correlation_id, ask.n)
        if name in handled:
            return
        handled.add(name)
        opened = await self._manifest(namespace, pod_name, agent, ask)
        if isinstance(opened, str):
            log.warning(
                "gateway pod %s/%s: review %s not opened: %s", namespace, pod_name, name, opened
            )
            return
        await self.reviews.open(opened, wait=False)

    async def _manifest(
        self, namespace: str, pod_name: str, agent: str, ask: GatewayReviewAsk
    ) -> dict[str, Any] | str:
        """The Review ``ask`` opens, or why none (the pod, the Agent, the ask itself)."""
        refusal = rv.gateway_pod_refusal(self.pods.get((namespace, pod_name)) or {}, agent)
        if refusal is not None:
            return refusal
        found = await k8s.get_custom("agents", namespace, agent)
        if found is None or not (found.get("spec") or {}).get("gateway"):
            return f"agent {agent} has no gateway"
        return rv.build_gateway_review(namespace, agent, str(found["metadata"]["uid"]), ask)


def check_created_by(review: Mapping[str, Any], operator: str) -> None:
    """``review`` was created by ``operator`` (see the module docstring), else
    :class:`~.builders.trust.Refused` naming it."""
    meta = review.get("metadata") or {}
    creator = str((meta.get("annotations") or {}).get(CREATED_BY_ANNOTATION) or "")
    if creator != operator:
        raise trust.foreign("Review", str(meta.get("name") or ""), creator or "someone else")


def _settle(
    waiters: list[asyncio.Future[dict[str, Any] | None]],
    result: dict[str, Any] | None = None,
    error: BaseException | None = None,
) -> None:
    for future in waiters:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


__all__ = ["GatewayAsks", "ReviewsController", "Transition", "check_created_by", "derived"]
