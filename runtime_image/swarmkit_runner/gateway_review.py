"""A gateway call that needs a person waits on a Review (the MCP gateway's human review).

A Run that needs a person parks and the operator opens its Review. A gateway session has
no Run to park, so the gateway asks itself: for a ``strict`` call without a standing
approval (kind ``approval``) or a skill that fails with ``onFailure: escalate_to_human``
(kind ``escalation``) it creates the Review through the Kubernetes API with its pod's
service account (the operator's Role for it allows create/get/watch on Reviews in its
namespace, nothing else) and blocks that one MCP call until a reviewer decides; every
other call and session keeps being served (it is an ``await`` on a watch).

The Review (:func:`build_review`), built from the same :class:`~swarmkit_api.review.ReviewRequest`
fields as a parked Run's:

* name ``gw-<agent>-<correlation id[:8]>-<n>`` (the n-th question of that session);
* owned by the Agent (deleted with it; no ``blockOwnerDeletion``), labelled
  ``swarmkit.dev/gateway=<agent>``, ``swarmkit.dev/correlation-id=<session correlation id>``
  and ``swarmkit.dev/review-kind``;
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
session's correlation id, session and token identity. Where no Review can be created (no
API access, no RBAC, no Review CRD) :class:`~.errors.ReviewUnavailable` carries the reason
and the call falls back to the refusal.
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
    CORRELATION_LABEL,
    GATEWAY_LABEL,
    REVIEW_KIND_LABEL,
    GatewaySessionRef,
    ResumeDecision,
    ReviewRequest,
    decision_of,
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
MAX_NAME = 63


def review_name(agent: str, correlation_id: str, n: int) -> str:
    """``gw-<agent>-<correlation id[:8]>-<n>`` (at most 63 characters)."""
    suffix = f"-{correlation_id.replace('-', '')[:8]}-{n}"
    return f"gw-{agent}"[: MAX_NAME - len(suffix)].rstrip("-") + suffix


def _label(value: str) -> str:
    return value[:63].strip("-_.") or "x"


def build_review(
    *,
    name: str,
    namespace: str,
    agent_uid: str,
    session: GatewaySessionRef,
    item: ReviewItem,
    wait_seconds: int,
    now: datetime,
) -> dict[str, Any]:
    """The Review asking ``item`` for a gateway session (pure; see the module doc)."""
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
    labels = {
        "app.kubernetes.io/part-of": "swarmkit-operator",
        "app.kubernetes.io/component": "gateway",
        GATEWAY_LABEL: _label(session.agent),
        CORRELATION_LABEL: _label(session.correlation_id),
        REVIEW_KIND_LABEL: item.kind,
    }
    owner = {"apiVersion": API_VERSION, "kind": "Agent", "name": session.agent, "uid": agent_uid}
    return {
        "apiVersion": API_VERSION,
        "kind": "Review",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": {"request": request.wire()},
    }


def settled(review: Mapping[str, Any]) -> bool:
    """Decided, or ended without a decision (the operator marked it Expired or Closed)."""
    state = (review.get("status") or {}).get("state")
    return decision_of(review) is not None or state in ("Expired", "Closed")


class ReviewClient:
    """Creates Reviews in the gateway's namespace and waits for their decisions (shared
    by every session of the gateway process)."""

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

    async def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return await self.api().request("POST", self.path(), manifest)
        except KubeUnavailable as exc:
            raise ReviewUnavailable(f"no Kubernetes API access: {exc}") from None
        except KubeError as exc:
            raise ReviewUnavailable(f"the Review could not be created ({exc})") from None
        except Exception as exc:  # a transport error (connection refused, TLS, timeout)
            detail = str(exc) or type(exc).__name__
            raise ReviewUnavailable(f"the Kubernetes API is unreachable: {detail}") from None

    async def get(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.api().request("GET", self.path(name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def wait(self, name: str, resource_version: str, seconds: float) -> dict[str, Any]:
        """The Review once settled, or as it stands after ``seconds``."""
        deadline = time.monotonic() + seconds
        latest: dict[str, Any] | None = None
        version = resource_version
        params = {"fieldSelector": f"metadata.name={quote(name)}"}
        while (remaining := deadline - time.monotonic()) > 0:
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
                break
            except ReviewUnavailable:
                raise
            except Exception:  # a broken watch: read the object, then watch again
                await asyncio.sleep(min(REWATCH_DELAY, max(0.0, deadline - time.monotonic())))
            current = await self._read(name)
            if settled(current):
                return current
            latest = current
            version = str((current.get("metadata") or {}).get("resourceVersion") or "")
        # One last read: a decision admitted just before the deadline still counts.
        final = await self._read(name, fallback=latest)
        return final

    async def _read(self, name: str, fallback: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            found = await self.get(name)
        except Exception:
            if fallback is not None:
                return fallback
            raise
        if found is None:
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
        agent_uid: str,
        audit: AuditLog,
    ) -> None:
        self.client = client
        self.session = session
        self.agent_uid = agent_uid
        self.audit = audit
        self.asked = 0

    async def __call__(self, item: ReviewItem) -> ResumeDecision:
        self.asked += 1
        name = review_name(self.session.agent, self.session.correlation_id, self.asked)
        wait = int(item.timeout_seconds or 1)
        manifest = build_review(
            name=name,
            namespace=self.client.namespace,
            agent_uid=self.agent_uid,
            session=self.session,
            item=item,
            wait_seconds=wait,
            now=datetime.now(UTC),
        )
        created = await self.client.create(manifest)
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
        version = str((created.get("metadata") or {}).get("resourceVersion") or "")
        try:
            review = await self.client.wait(name, version, wait)
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
    "ReviewClient",
    "SessionReviewer",
    "build_review",
    "review_name",
    "settled",
]
