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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION

from .. import k8s
from ..builders import review as rv
from ..indexes import index
from .common import PRESENT


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
    return {(namespace, labels[rv.SKILL_LABEL]): {"spec": dict(spec)}}


@kopf.on.event(GROUP, VERSION, "skills")
async def skill_review_needed(
    body: kopf.Body, namespace: str | None, name: str, uid: str | None, **_: Any
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
    await k8s.create_custom_if_absent("reviews", namespace, manifest)


@kopf.on.event(GROUP, VERSION, "reviews", labels={rv.SKILL_LABEL: kopf.PRESENT})
async def skill_review_decided(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> None:
    found = rv.decision_of(body)
    if found is None or not namespace:
        return
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
    )
