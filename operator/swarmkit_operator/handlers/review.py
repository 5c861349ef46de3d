"""kopf wiring of the reviews of swarm-authored Skills (thin; builders in builders/review.py).

A Skill whose ``provenance.authoredBy`` is ``authored_by_swarm`` is locked until a person
reviews it. For each of its content versions (``status.contentHash``) the operator opens
the Review ``skill-<name>-<hash8>`` (kind ``skill_review``, owned by the Skill). A
reviewer approves it like any Review (the admission policy ties the decision to the
authenticated user); from then on Runs pin that version as callable (the Runs resolver
reads the index :func:`skill_reviews`). Another version needs another review. The
``swarmkit.dev/reviewed-by`` annotation, which anyone with ``edit`` could set, counts for
nothing any more.

The Reviews controller (:mod:`swarmkit_operator.reviews`, the one writer of a Review's
status) opens it and records what it made of a decided skill review (``Decided``,
decidedBy, decidedAt), as it does for Run reviews.

**Gateway reviews** (label ``swarmkit.dev/gateway``) wait for a call of an Agent's MCP
gateway; the gateway follows the decision itself. The controller records a decision like
any other and, once the deadline passes without one (the gateway has stopped waiting and
failed the call), marks it ``Expired``, so the admission policy refuses a late decision
instead of one nobody acts on. Each watch event of such a Review only hands it to the
controller (:func:`review_observed`); the expiry is its queue key, delayed until the
deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION
from swarmkit_api.review import GATEWAY_LABEL

from ..builders import review as rv
from ..indexes import IndexId, index
from .common import PRESENT, App
from .events import on_event


@index(
    "reviews",
    id=IndexId.SKILL_REVIEWS,
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
    # Queued: the controller opens it (a standby once it leads), retrying until it exists.
    await app.reviews.open(manifest, wait=False)


@on_event(GROUP, VERSION, "reviews", labels={rv.SKILL_LABEL: PRESENT})
@on_event(GROUP, VERSION, "reviews", labels={GATEWAY_LABEL: PRESENT})
async def review_observed(type: str | None, body: Mapping[str, Any], app: App, **_: Any) -> None:
    """A skill or gateway Review changed: the controller records a decision, marks it
    Pending, or expires it at its deadline (:func:`swarmkit_operator.reviews.derived`)."""
    app.reviews.observed(type, body)


@on_event("v1", "pods", labels={GATEWAY_LABEL: PRESENT})
async def gateway_pod(type: str | None, body: Mapping[str, Any], app: App, **_: Any) -> None:
    """A pod of an Agent's gateway: the Reviews controller follows its log while it runs
    (the gateway asks for its Reviews there, :class:`swarmkit_operator.reviews.GatewayAsks`)."""
    app.reviews.asks.pod_event(type, body)
