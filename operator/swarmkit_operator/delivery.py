"""Mailbox webhooks: post each item of a mailbox that a Workspace routes to a webhook.

A Workspace mailbox may name a webhook (``spec.mailboxes[].webhook.urlSecretRef``): its
items are created labelled ``swarmkit.dev/webhook-delivery=pending`` (:mod:`.runs.effects`).
Driven by their watch, not by polling: the pending items are indexed
(``handlers/delivery.py``), every event of one kicks it into this controller's queue, and
:data:`WORKERS` workers of the leader POST each due one as a Slack-compatible
``{"text": ...}`` JSON body to the URL read from the Secret at that moment (a GET of that
one Secret, which the namespace's team grants the operator by name: the chart grants no
verb on Secrets, see ``rbac.py``):

* 2xx: ``status.delivery`` Delivered, the label ``delivered``, an Event on the item;
* anything else (an HTTP status, a connection error, the Secret missing or not granted to
  the operator): ``attempts`` + 1
  and ``nextAttemptTime`` after an exponential backoff (``webhook_backoff_seconds`` doubled
  per attempt, at most :data:`MAX_BACKOFF_SECONDS`; the item's key is queued again for
  that time); after ``webhook_max_attempts`` it is Failed (label ``failed``, a Warning
  Event).

The URL is a credential (a Slack webhook URL is its own token): it is never written to
status, Events or logs. Errors are recorded as an HTTP status or an exception *type*,
because an HTTP client's exception text may carry the URL. State lives on the item, so an
operator restart or a new leader picks up where the last one stopped; an item is posted
at most once per attempt, and at least once unless every attempt fails (a crash between a
successful POST and the status write posts it again: webhooks are at-least-once).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from swarmkit_api import GROUP, VERSION
from swarmkit_api.effects import DELIVERY_LABEL

from . import k8s
from .builders import run_status as rs
from .config import RunsSettings
from .indexes import IndexId
from .runtime.workqueue import Result, Workers, WorkQueue

log = logging.getLogger("swarmkit_operator.delivery")

#: The defaults of the first retry delay and of the attempts (:class:`~..config.RunsSettings`).
BACKOFF_SECONDS = 2.0
MAX_BACKOFF_SECONDS = 300.0
MAX_ATTEMPTS = 6
POST_TIMEOUT = aiohttp.ClientTimeout(total=10)
#: Deliveries at once (one item is never posted twice at once: the queue sees to that).
WORKERS = 4
PLURAL = "mailboxmessages"
#: The index of the pending items (``handlers/delivery.py``).
PENDING_DELIVERIES = IndexId.PENDING_DELIVERIES


def backoff(attempts: int, base: float = BACKOFF_SECONDS) -> float:
    """Seconds before attempt ``attempts`` + 1 (exponential, capped). Not the work queue's
    backoff: this schedule is the message's own, kept in its status (``nextAttemptTime``),
    so it survives a restart and a failover."""
    return float(min(base * 2 ** max(attempts - 1, 0), MAX_BACKOFF_SECONDS))


def payload(item: dict[str, Any]) -> dict[str, str]:
    """The Slack-compatible body: one ``text`` naming the mailbox, sender and message."""
    spec = item.get("spec") or {}
    sender = spec.get("sender") or {}
    head = f"[{spec.get('mailbox', '')}] {sender.get('agent', '')} (run {sender.get('run', '')})"
    return {"text": f"{head}: {spec.get('message', '')}"}


def webhook_ref(workspace: dict[str, Any] | None, mailbox: str) -> dict[str, str] | None:
    """The ``urlSecretRef`` of ``mailbox`` in ``workspace`` (an index summary), or None."""
    for entry in ((workspace or {}).get("spec") or {}).get("mailboxes") or ():
        if entry.get("name") == mailbox:
            ref = (entry.get("webhook") or {}).get("urlSecretRef")
            return dict(ref) if ref else None
    return None


class Delivery:
    """The deliveries (see the module docstring): a queue-backed controller of the pending
    items, kicked by their watch events."""

    def __init__(
        self,
        pending: Mapping[Any, list[Any]],
        workspaces: Mapping[Any, list[Any]],
        settings: RunsSettings,
    ) -> None:
        #: (namespace, name) → the pending item (``handlers/delivery.py`` keeps it current).
        self.pending = pending
        #: (namespace, name) → the Runs' Workspace summaries (its mailboxes' routes).
        self.workspaces = workspaces
        self.settings = settings
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self._workers = Workers(
            self.queue,
            self._work,
            "swarmkit-delivery",
            kind=lambda _: "MailboxDelivery",
            describe=lambda key: f"{key[0]}/{key[1]}",
        )
        self._session: aiohttp.ClientSession | None = None
        #: Items this process recorded as done (Delivered or Failed) while the index may
        #: still show them pending (the label is a second write): never posted again.
        self._done: set[tuple[str, str]] = set()
        #: (namespace, name) → the last attempt's status, labelled but not written yet.
        self._unrecorded: dict[tuple[str, str], dict[str, Any]] = {}

    def kick(self, namespace: str, name: str, delay: float = 0.0) -> None:
        self.queue.add((namespace, name), delay)

    def start(self) -> None:
        """Start the workers (the manager calls it once this replica leads) and look at
        every item pending now (the start-up's listing filled the index)."""
        self._workers.start(WORKERS)
        for namespace, name in list(self.pending):
            self.kick(namespace, name)

    async def stop(self) -> None:
        await self._workers.stop()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _work(self, key: tuple[str, str]) -> Result:
        unrecorded = self._unrecorded.get(key)
        if unrecorded is not None:  # labelled done, its status write failed: write it now
            await self._record(*key, unrecorded, None)
            return Result("changed")
        entries = self.pending.get(key)
        if not entries:
            self._done.discard(key)
            return Result("gone")  # delivered, failed for good, or deleted
        item = dict(next(iter(entries)))
        now = datetime.now(UTC)
        delivery = (item.get("status") or {}).get("delivery") or {}
        if key in self._done:
            return Result("unchanged")  # done: its label's change is on its way
        final = {"Delivered": "delivered", "Failed": "failed"}.get(str(delivery.get("state")))
        if final is not None:  # recorded, not labelled (an older operator's order): label it
            await k8s.patch_custom_labels(PLURAL, key[0], key[1], {DELIVERY_LABEL: final})
            self._done.add(key)
            return Result("changed")
        due = rs.parse_time(delivery.get("nextAttemptTime"))
        if due is not None and due > now:
            return Result("deferred", (due - now).total_seconds())
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=POST_TIMEOUT)
        retry = await self.deliver(self._session, item, now)
        if retry is None:
            self._done.add(key)
            return Result("changed")
        return Result("changed", max((retry - now).total_seconds(), 0.0))

    def _retry_at(self, now: datetime, attempts: int) -> datetime:
        """When attempt ``attempts`` + 1 is due (the settings' backoff)."""
        return now + timedelta(seconds=backoff(attempts, self.settings.webhook_backoff_seconds))

    async def deliver(
        self, session: aiohttp.ClientSession, item: dict[str, Any], now: datetime
    ) -> datetime | None:
        """Post ``item`` once and record the attempt; when to try again (None: done)."""
        meta = item.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        delivery = dict((item.get("status") or {}).get("delivery") or {})
        spec = item.get("spec") or {}
        ws = None
        for entry in self.workspaces.get((namespace, spec.get("workspace"))) or ():
            ws = dict(entry)
        ref = webhook_ref(ws, str(spec.get("mailbox") or ""))
        error = await self._post(session, namespace, ref, item)
        attempts = int(delivery.get("attempts") or 0) + 1
        stamp = rs.rfc3339(now)
        involved = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MailboxMessage",
            "name": name,
            "namespace": namespace,
            "uid": str(meta.get("uid") or ""),
        }
        if error is None:
            status = {
                "state": "Delivered",
                "attempts": attempts,
                "lastAttemptTime": stamp,
                "deliveredTime": stamp,
                "lastError": "",
                "nextAttemptTime": None,
            }
            await self._record(namespace, name, status, "delivered")
            log.info(
                "mailbox item %s/%s delivered to its webhook (attempt %d)",
                namespace,
                name,
                attempts,
            )
            await k8s.post_event(
                involved,
                "Normal",
                "WebhookDelivered",
                f"posted to the webhook of mailbox {spec.get('mailbox')} (attempt {attempts})",
            )
            return None
        if attempts >= self.settings.webhook_max_attempts:
            status = {
                "state": "Failed",
                "attempts": attempts,
                "lastAttemptTime": stamp,
                "lastError": error,
                "nextAttemptTime": None,
            }
            await self._record(namespace, name, status, "failed")
            log.warning(
                "mailbox item %s/%s: webhook delivery failed for good: %s", namespace, name, error
            )
            await k8s.post_event(
                involved, "Warning", "WebhookFailed", f"gave up after {attempts} attempts: {error}"
            )
            return None
        retry = self._retry_at(now, attempts)
        status = {
            "state": "Pending",
            "attempts": attempts,
            "lastAttemptTime": stamp,
            "lastError": error,
            "nextAttemptTime": rs.rfc3339(retry),
        }
        await self._record(namespace, name, status, None)
        log.info(
            "mailbox item %s/%s: webhook attempt %d failed (%s); retry at %s",
            namespace,
            name,
            attempts,
            error,
            rs.rfc3339(retry),
        )
        return retry

    async def _post(
        self,
        session: aiohttp.ClientSession,
        namespace: str,
        ref: dict[str, str] | None,
        item: dict[str, Any],
    ) -> str | None:
        """None when delivered, else what went wrong (never the URL)."""
        if ref is None:
            return "the Workspace no longer routes this mailbox to a webhook"
        refusal = k8s.write_refusal()
        if refusal is not None:  # a deposed leader posts nothing (the new one will)
            raise k8s.NotLeader("POST", "mailbox webhook", refusal)
        try:
            url = await k8s.read_secret_key(namespace, ref.get("name", ""), ref.get("key", ""))
        except k8s.SecretNotGranted as exc:
            return str(exc)  # names the Secret and the grant, never a value
        if not url:
            return f"Secret {ref.get('name')} not found or has no key {ref.get('key')}"
        try:
            async with session.post(url.strip(), json=payload(item)) as response:
                if 200 <= response.status < 300:
                    return None
                return f"HTTP {response.status}"
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return f"request failed ({type(exc).__name__})"

    async def _record(
        self, namespace: str, name: str, delivery: dict[str, Any], label: str | None
    ) -> None:
        """Write the attempt to the item's status; a last attempt's label first, so whoever
        reads ``Delivered`` (or ``Failed``) reads the label too. The label takes the item
        out of the pending index: until its status is written it is kept here, and a
        retry writes it from here."""
        key = (namespace, name)
        if label is not None:
            self._unrecorded[key] = delivery
            await k8s.patch_custom_labels(PLURAL, namespace, name, {DELIVERY_LABEL: label})
        await k8s.patch_status(
            PLURAL, namespace, name, {"delivery": delivery}, k8s.DELIVERY_MANAGER
        )
        self._unrecorded.pop(key, None)


__all__ = ["Delivery", "backoff", "payload", "webhook_ref"]
