"""kopf wiring of the reviews of swarm-authored Skills (thin; builders in builders/review.py).

A Skill whose ``provenance.authoredBy`` is ``authored_by_swarm`` is locked until a person
reviews it. For each of its content versions (``status.contentHash``) the operator opens
the Review ``skill-<name>-<hash8>`` (kind ``skill_review``, owned by the Skill). A
reviewer approves it like any Review (the admission policy ties the decision to the
authenticated user); from then on Runs pin that version as callable (the Runs resolver
reads the index :func:`skill_reviews`). Another version needs another review. The
``swarmkit.dev/reviewed-by`` annotation, which anyone with ``edit`` could set, counts for
nothing any more.

The operator records what it made of a decided skill review in the Review's status
(``Decided``, decidedBy, decidedAt), as it does for Run reviews.

**Gateway reviews** (label ``swarmkit.dev/gateway``) are opened by an Agent's MCP gateway
for a call that waits for a person; the gateway follows the decision itself. The operator
records a decision in the Review's status like any other and, once the deadline passes
without one (the gateway has stopped waiting and failed the call), marks it ``Expired``,
so the admission policy refuses a late decision instead of one nobody acts on. The
expiry is a timer per pending Review, set again from every watch event (an operator
restart lists them all).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION
from swarmkit_api.review import GATEWAY_LABEL, ResumeDecision

from .. import k8s
from ..builders import review as rv
from ..indexes import index
from ..runtime import Leadership
from .common import PRESENT, App
from .events import on_event


@index(
    "reviews",
    id="skill_reviews",
    labels={rv.SKILL_LABEL: PRESENT},
    group=GROUP,
    version=VERSION,
)
def skill_reviews(
    body: Mapping[str, Any], namespace: str | None, labels: Mapping[str, str], **_: Any
) -> dict[Any, Any]:
    """(namespace, skill) → its skill reviews (content hash, decision)."""
    spec = body.get("spec") or {}
    # The owner names the Skill; the label is only a selector (hashed for a long name).
    owners = (body.get("metadata") or {}).get("ownerReferences") or ()
    skill = next((o.get("name") for o in owners if o.get("kind") == "Skill"), None)
    return {(namespace, skill or labels[rv.SKILL_LABEL]): {"spec": dict(spec)}}


@on_event(GROUP, VERSION, "skills")
async def skill_review_needed(
    body: kopf.Body, namespace: str | None, name: str, uid: str | None, app: App, **_: Any
) -> None:
    spec = body.get("spec") or {}
    provenance = spec.get("provenance") or {}
    content_hash = (body.get("status") or {}).get("contentHash")
    if provenance.get("authoredBy") != "authored_by_swarm" or not content_hash or not namespace:
        return
    if body.get("metadata", {}).get("deletionTimestamp"):
        return
    manifest = rv.build_skill_review(
        namespace, name, str(uid), str(content_hash), str(spec.get("description") or "")
    )
    ns = namespace

    async def open_review() -> None:
        await k8s.create_custom_if_absent("reviews", ns, manifest)

    # A standby remembers it (the latest per Skill) and opens it once it leads.
    app.leadership.defer(("skill-review", namespace, name), open_review)


@on_event(GROUP, VERSION, "reviews", labels={rv.SKILL_LABEL: PRESENT})
async def skill_review_decided(
    body: Mapping[str, Any], namespace: str | None, name: str, app: App, **_: Any
) -> None:
    found = rv.decision_of(body)
    if found is None or not namespace:
        return
    ns, decided = namespace, dict(body)

    async def record() -> None:
        await _record_decision(ns, name, decided, found)

    app.leadership.defer(("review-decision", namespace, name), record)


async def _record_decision(
    namespace: str, name: str, body: Mapping[str, Any], found: ResumeDecision
) -> None:
    """Write the admitted decision into the Review's status (once per decider)."""
    status = body.get("status") or {}
    if status.get("state") == "Decided" and status.get("decidedBy") == found.decided_by:
        return
    await k8s.patch_status(
        "reviews",
        namespace,
        name,
        {
            "state": "Decided",
            "verdict": found.verdict,
            "decidedBy": found.decided_by,
            "decidedAt": found.decided_at or None,
        },
        k8s.REVIEWS_MANAGER,
    )


# --- reviews opened by an Agent's MCP gateway -------------------------------------------------

log = logging.getLogger("swarmkit_operator.reviews")
#: (namespace, name) → the pending gateway Review's expiry timer.
_expiries: dict[tuple[str, str], asyncio.Task[None]] = {}


async def _expire_at(namespace: str, name: str, delay: float, lead: Leadership) -> None:
    try:
        await asyncio.sleep(delay)
        await lead.acquired.wait()  # a standby's timer fires once it leads
        review = await k8s.get_custom("reviews", namespace, name)
        if review is None or rv.decision_of(review) is not None:
            return
        if (review.get("status") or {}).get("state") in ("Expired", "Closed", "Decided"):
            return
        await k8s.patch_status(
            "reviews", namespace, name, {"state": "Expired"}, k8s.REVIEWS_MANAGER
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the next watch event sets the timer again
        log.warning("gateway review %s/%s: could not mark it Expired: %s", namespace, name, exc)
    finally:
        _expiries.pop((namespace, name), None)


@on_event(GROUP, VERSION, "reviews", labels={GATEWAY_LABEL: PRESENT})
async def gateway_review(
    body: Mapping[str, Any], namespace: str | None, name: str, type: str | None, app: App, **_: Any
) -> None:
    if not namespace:
        return
    lead = app.leadership
    key = (namespace, name)
    status = body.get("status") or {}
    found = rv.decision_of(body)
    if type == "DELETED" or found is not None or status.get("state") in ("Expired", "Closed"):
        timer = _expiries.pop(key, None)
        if timer is not None:
            timer.cancel()
    if type == "DELETED":
        return
    if found is not None:
        ns, decided = namespace, dict(body)

        async def record() -> None:
            await _record_decision(ns, name, decided, found)

        lead.defer(("review-decision", namespace, name), record)
        return
    deadline = rv.deadline_of(body)
    if deadline is None or status.get("state") in ("Expired", "Closed") or key in _expiries:
        return
    if not status.get("state"):
        ns = namespace

        async def pending() -> None:
            await k8s.patch_status("reviews", ns, name, {"state": "Pending"}, k8s.REVIEWS_MANAGER)

        lead.defer(("review-pending", namespace, name), pending)
    delay = max(0.0, (deadline - datetime.now(UTC)).total_seconds())
    _expiries[key] = asyncio.get_running_loop().create_task(
        _expire_at(namespace, name, delay, lead)
    )
