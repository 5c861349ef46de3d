"""A gateway call that needs a person waits on a Review (the MCP gateway's human review).

A Run that needs a person parks and the operator opens its Review. A gateway session has
no Run to park: for a ``strict`` call without a standing approval (kind ``approval``) or a
skill that fails with ``onFailure: escalate_to_human`` (kind ``escalation``) the gateway
asks the operator to open one, and blocks that one MCP call until a reviewer decides;
every other call and session keeps being served (it is an ``await`` on a watch).

**The ask is a line on the pod's own log**, :class:`~swarmkit_api.review.GatewayReviewAsk`
after ``swarmkit.review-ask `` (:func:`ask_for`), like the checkpoint line of a parked Run.
The gateway has no API identity that may create a Review: its ServiceAccount may only get
and watch them, because anyone who may edit the namespace can mint that account's token
(``kubectl create token``). The operator follows the logs of the gateway's own pods, checks
the ask (that Agent's gateway, its session, an approval or escalation) and opens the Review
itself (:func:`swarmkit_operator.builders.review.build_gateway_review`):

* name ``gw-<agent>-<correlation id[:8]>-<n>`` (the n-th question of that session);
* owned by the Agent, labelled ``swarmkit.dev/gateway=<agent>``,
  ``swarmkit.dev/correlation-id=<session correlation id>`` and ``swarmkit.dev/review-kind``;
* ``spec.request.gatewaySession {agent, correlationId, session, identity, pod}`` says which
  session waits (no ``runRef``); question, skill, tool, scrubbed and capped arguments and
  context as for a Run; ``deadline`` = now + the wait.

The wait is ``spec.gateway.reviewTimeoutSeconds`` (default 240 s, below the MCP Python
SDK's 300 s read timeout), capped by the skill's or Workspace's review timeout. Then:
``approve`` runs the call through the normal pipeline, ``answer`` is its result,
``reject`` is a tool error with the reviewer's reason, no decision by the deadline is
verdict ``timeout`` (the skill's ``onReviewTimeout``; the operator marks the Review
``Expired`` so a late decision is refused). A decision admitted just before that still
counts (one last read at the deadline).

Audited as ``review.requested`` (the Review's name, the wait) and ``review.decided``
(verdict, the reviewer's authenticated identity, when, the wait in ms), both with the
session's correlation id, session and token identity. Where no Review can be waited on (no
API access, no RBAC, no Review CRD, or the operator did not open it within
:data:`OPEN_SECONDS`) :class:`~.errors.ReviewUnavailable` carries the reason and the call
falls back to the refusal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from swarmkit_api.bundle import ReviewItem
from swarmkit_api.common import LocalObjectReference
from swarmkit_api.review import (
    GatewayReviewAsk,
    GatewaySessionRef,
    ResumeDecision,
    ReviewRequest,
    decision_of,
    gateway_review_name,
)

from .audit import AuditLog
from .errors import ReviewUnavailable
from .kube import KubeApi, KubeError, KubeUnavailable
from .reviews import audit_decided

API_VERSION = "swarmkit.dev/v1alpha1"
#: Who "decides" a gateway Review nobody answered in time.
GATEWAY_TIMEOUT_DECIDER = "system:swarmkit-gateway:review-timeout"
#: Seconds before a watch that broke (a network error, an apiserver restart) is resumed.
REWATCH_DELAY = 1.0
#: Seconds the operator has to open an asked Review before the call gives up on it.
OPEN_SECONDS = 30.0


def ask_for(
    *, n: int, session: GatewaySessionRef, item: ReviewItem, wait_seconds: int, now: datetime
) -> GatewayReviewAsk:
    """The ask for the n-th question of ``session`` (pure; see the module doc)."""
    request = ReviewRequest(
        kind=item.kind,
        question=item.question[:4096],
        gateway_session=session,
        skill_ref=LocalObjectReference(name=item.skill) if item.skill else None,
        agent=item.agent,
        tool=item.tool,
        arguments=item.arguments,
        context=(item.context or "")[:4096] or None,
        task_id=item.task_id,
        key=item.key or "",
        deadline=now + timedelta(seconds=wait_seconds),
    )
    return GatewayReviewAsk(n=n, request=request)


def settled(review: Mapping[str, Any]) -> bool:
    """Decided, or ended without a decision (the operator marked it Expired or Closed)."""
    state = (review.get("status") or {}).get("state")
    return decision_of(review) is not None or state in ("Expired", "Closed")


class ReviewClient:
    """Waits for the decisions of the Reviews the operator opened for the gateway (shared
    by every session of the gateway process; get and watch only)."""

    def __init__(self, namespace: str, api: KubeApi | None = None) -> None:
        self.namespace = namespace
        self._api = api

    def api(self) -> KubeApi:
        if self._api is None:
            try:
                self._api = KubeApi.from_env()
            except KubeUnavailable as exc:
                raise ReviewUnavailable(f"no Kubernetes API access: {exc}") from None
        return self._api

    def path(self, name: str | None = None) -> str:
        base = f"/apis/{API_VERSION}/namespaces/{self.namespace}/reviews"
        return base if name is None else f"{base}/{name}"

    async def get(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.api().request("GET", self.path(name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def wait(self, name: str, seconds: float) -> dict[str, Any]:
        """The Review once settled, or as it stands after ``seconds``; it must be opened
        (by the operator) within :data:`OPEN_SECONDS`."""
        deadline = time.monotonic() + seconds
        opened_by = time.monotonic() + min(OPEN_SECONDS, seconds)
        latest: dict[str, Any] | None = None
        version = ""  # from a listing: the Review may not exist yet
        params = {"fieldSelector": f"metadata.name={quote(name)}"}
        while (remaining := deadline - time.monotonic()) > 0:
            if latest is None:
                remaining = min(remaining, max(0.0, opened_by - time.monotonic()))
            try:
                async with asyncio.timeout(remaining):
                    async for event in self.api().watch(
                        self.path(), {**params, "resourceVersion": version}, int(remaining) + 1
                    ):
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            version = ""  # e.g. 410 Gone: re-read below, watch from there
                            break
                        if event.get("type") == "DELETED":
                            raise ReviewUnavailable(f"review {name} was deleted while waiting")
                        latest = obj
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                        if settled(obj):
                            return obj
            except TimeoutError:
                pass
            except ReviewUnavailable:
                raise
            except Exception:  # a broken watch: read the object, then watch again
                await asyncio.sleep(min(REWATCH_DELAY, max(0.0, deadline - time.monotonic())))
            current = await self._read(name, seen=latest is not None)
            if current is None and time.monotonic() >= opened_by:
                raise ReviewUnavailable(
                    f"the operator did not open review {name} within {OPEN_SECONDS:g}s"
                )
            if current is not None:
                if settled(current):
                    return current
                latest = current
                version = str((current.get("metadata") or {}).get("resourceVersion") or "")
        # One last read: a decision admitted just before the deadline still counts.
        final = await self._read(name, seen=True, fallback=latest)
        assert final is not None
        return final

    async def _read(
        self, name: str, seen: bool, fallback: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """The Review now (None: not opened yet); once seen, gone is an error."""
        try:
            found = await self.get(name)
        except Exception:
            if fallback is not None:
                return fallback
            raise
        if found is None and seen:
            raise ReviewUnavailable(f"review {name} was deleted while waiting")
        return found

    async def aclose(self) -> None:
        if self._api is not None:
            await self._api.aclose()


class SessionReviewer:
    """Asks a person for one gateway session: the hook the pipeline awaits
    (:attr:`.context.RunContext.reviewer`)."""

    def __init__(
        self,
        client: ReviewClient,
        session: GatewaySessionRef,
        audit: AuditLog,
    ) -> None:
        self.client = client
        self.session = session
        self.audit = audit
        self.asked = 0

    async def __call__(self, item: ReviewItem) -> ResumeDecision:
        self.asked += 1
        name = gateway_review_name(self.session.agent, self.session.correlation_id, self.asked)
        wait = int(item.timeout_seconds or 1)
        ask = ask_for(
            n=self.asked, session=self.session, item=item, wait_seconds=wait, now=datetime.now(UTC)
        )
        self.audit.write_raw(ask.line())  # the operator opens it (module docstring)
        started = time.monotonic()
        self.audit.emit(
            "review.requested",
            review=name,
            kind=item.kind,
            agent=item.agent,
            skill=item.skill,
            tool=item.tool,
            question=item.question,
            timeout_s=wait,
            outcome="waiting",
        )
        try:
            review = await self.client.wait(name, wait)
        except ReviewUnavailable:
            raise
        except Exception as exc:
            raise ReviewUnavailable(f"lost review {name} while waiting: {exc}") from None
        found = decision_of(review)
        if found is None:
            found = ResumeDecision(
                review=name,
                key=item.key or "",
                kind=item.kind,
                verdict="timeout",
                decided_by=GATEWAY_TIMEOUT_DECIDER,
                decided_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            )
        audit_decided(
            self.audit,
            found,
            waited_ms=round((time.monotonic() - started) * 1000, 1),
            outcome=found.verdict,
        )
        return found


__all__ = [
    "GATEWAY_TIMEOUT_DECIDER",
    "OPEN_SECONDS",
    "ReviewClient",
    "SessionReviewer",
    "ask_for",
    "settled",
]
