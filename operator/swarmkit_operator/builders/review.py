"""Reviews of parked Runs (pure): names, the Review, the checkpoint and decision ConfigMaps.

A Run goes through *stages*: stage 0 is its first Job; each decision starts stage n+1 in a
new Job (``run-<name>-<uid5>-resume-<n>``). When stage n parks:

* its checkpoint (the runner's stdout line, checked against the sha256 in its result)
  becomes the immutable ConfigMap ``run-<name>-<uid5>-ckpt-<n>``;
* the question becomes the Review ``<name>-<uid5>-<n+1>``, owned by the Run, labelled
  with its uid, its deadline = when the run parked + the item's review timeout;
* the decision, read from the Review (what the admission policy checked), goes into stage
  n+1's Job template (an annotation mounted as ``decision.json`` through the downward API),
  with the checkpoint ConfigMap, checked first against the sha256 the runner reported.

:func:`decision_of` reads what a person wrote (``spec.decision``; the admission policy has
checked ``decidedBy``) and when (the apiserver's ``managedFields`` entry of that write).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from swarmkit_api.bundle import ReviewItem
from swarmkit_api.review import (
    CHECKPOINT_FILE,
    CHECKPOINT_LINE_PREFIX,
    REVIEW_KIND_LABEL,
    TIMEOUT_DECIDER,
    ResumeDecision,
    decided_at,
    decision_of,
)

from ..hashing import dns_label, label_value
from .job import (
    MANAGED_BY_LABELS,
    RUN_API_VERSION,
    RUN_UID_LABEL,
    ResumeFiles,
    RunRef,
    job_name,
    owner_reference,
)
from .run_status import parse_time, rfc3339

#: A ConfigMap holds at most 1 MiB; leave room for its metadata.
MAX_CHECKPOINT_BYTES = 1_000_000
RUN_NAME_LABEL_KEY = "swarmkit.dev/run"
MAX_NAME = 63


def _base(run_name: str, run_uid: str) -> str:
    return job_name(run_name, run_uid)  # run-<name>-<uid5>, at most 63


def review_name(run_name: str, run_uid: str, stage: int) -> str:
    """``<name>-<uid5>-<stage+1>``: the Review stage ``stage`` parked on."""
    suffix = f"-{stage + 1}"
    return _base(run_name, run_uid)[len("run-") :][: MAX_NAME - len(suffix)] + suffix


def checkpoint_config_map_name(run_name: str, run_uid: str, stage: int) -> str:
    return f"{_base(run_name, run_uid)}-ckpt-{stage}"


def resume_files(
    run_name: str,
    run_uid: str,
    stage: int,
    decision: ResumeDecision | None,
    checkpoint_sha256: str = "",
) -> ResumeFiles | None:
    """The files stage ``stage`` resumes from (None for stage 0): the checkpoint of stage
    ``stage - 1`` (its sha256 as the runner reported it) and ``decision`` (what the Review
    says, never a ConfigMap)."""
    if stage <= 0 or decision is None:
        return None
    return ResumeFiles(
        checkpoint_config_map_name(run_name, run_uid, stage - 1),
        decision.model_dump_json(by_alias=True),
        checkpoint_sha256,
    )


def checkpoint_from_log(log: str, sha256: str) -> str | None:
    """The encoded checkpoint on the stdout line whose sha256 the runner reported."""
    for line in reversed(log.splitlines()):
        if line.startswith(CHECKPOINT_LINE_PREFIX):
            encoded = line[len(CHECKPOINT_LINE_PREFIX) :].strip()
            if hashlib.sha256(encoded.encode()).hexdigest() == sha256:
                return encoded
    return None


def _labels(run: RunRef) -> dict[str, str]:
    return {**MANAGED_BY_LABELS, RUN_UID_LABEL: run.uid}


def build_checkpoint_config_map(run: RunRef, stage: int, encoded: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": checkpoint_config_map_name(run.name, run.uid, stage),
            "namespace": run.namespace,
            "labels": _labels(run),
            "annotations": {"swarmkit.dev/checkpoint-sha256": _sha(encoded)},
            "ownerReferences": [owner_reference(run)],
        },
        "immutable": True,
        "data": {CHECKPOINT_FILE: encoded},
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build_review(run: RunRef, item: ReviewItem, stage: int, parked_at: datetime) -> dict[str, Any]:
    """The Review asking ``item`` (owned by the Run; deleted with it)."""
    request: dict[str, Any] = {
        "kind": item.kind,
        "question": item.question[:4096],
        "runRef": {"name": run.name},
        "key": item.key or "",
    }
    if item.skill:
        request["skillRef"] = {"name": item.skill}
    for field, value in (
        ("agent", item.agent),
        ("tool", item.tool),
        ("arguments", item.arguments),
        ("context", (item.context or "")[:4096] or None),
        ("taskId", item.task_id),
    ):
        if value:
            request[field] = value
    if item.timeout_seconds:
        request["deadline"] = rfc3339(parked_at + timedelta(seconds=item.timeout_seconds))
    owner = owner_reference(run)
    owner["controller"] = True
    return {
        "apiVersion": RUN_API_VERSION,
        "kind": "Review",
        "metadata": {
            "name": review_name(run.name, run.uid, stage),
            "namespace": run.namespace,
            "labels": {**_labels(run), REVIEW_KIND_LABEL: item.kind},
            "ownerReferences": [owner],
        },
        "spec": {"request": request},
    }


def deadline_of(review: Mapping[str, Any]) -> datetime | None:
    request = (review.get("spec") or {}).get("request") or {}
    return parse_time(request.get("deadline"))


def timeout_decision(review: Mapping[str, Any], now: datetime) -> ResumeDecision:
    """What an expired review resumes the run with (the skill's failure path)."""
    request = (review.get("spec") or {}).get("request") or {}
    return ResumeDecision(
        review=str((review.get("metadata") or {}).get("name") or ""),
        key=str(request.get("key") or ""),
        kind=request.get("kind") or "escalation",
        verdict="timeout",
        decided_by=TIMEOUT_DECIDER,
        decided_at=rfc3339(now),
        task_id=request.get("taskId"),
    )


__all__ = [
    "REVIEW_KIND_LABEL",
    "SKILL_LABEL",
    "SKILL_REVIEW_KIND",
    "ResumeFiles",
    "approves",
    "build_checkpoint_config_map",
    "build_review",
    "build_skill_review",
    "checkpoint_config_map_name",
    "checkpoint_from_log",
    "deadline_of",
    "decided_at",
    "decision_of",
    "resume_files",
    "review_name",
    "skill_review_name",
    "timeout_decision",
]


# --- swarm-authored skills --------------------------------------------------------------------

SKILL_LABEL = "swarmkit.dev/skill"
SKILL_REVIEW_KIND = "skill_review"


def skill_review_name(skill: str, content_hash: str) -> str:
    """``skill-<name>-<hash8>``: one Review per content version of a swarm-authored skill."""
    return dns_label(f"skill-{skill}", f"-{content_hash[:8]}", MAX_NAME)


def build_skill_review(
    namespace: str, skill: str, skill_uid: str, content_hash: str, description: str
) -> dict[str, Any]:
    """The Review that unlocks a swarm-authored skill's content version ``content_hash``
    (owned by the Skill; a new version needs a new review)."""
    question = (
        f"Skill {skill} was authored by the swarm (provenance authored_by_swarm) and stays "
        f"locked until a person reviews it. Approve content version {content_hash[:12]}?"
    )
    return {
        "apiVersion": RUN_API_VERSION,
        "kind": "Review",
        "metadata": {
            "name": skill_review_name(skill, content_hash),
            "namespace": namespace,
            "labels": {
                **MANAGED_BY_LABELS,
                SKILL_LABEL: label_value(skill),
                REVIEW_KIND_LABEL: SKILL_REVIEW_KIND,
            },
            "ownerReferences": [
                {
                    "apiVersion": RUN_API_VERSION,
                    "kind": "Skill",
                    "name": skill,
                    "uid": skill_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "request": {
                "kind": SKILL_REVIEW_KIND,
                "question": question,
                "skillRef": {"name": skill},
                "contentHash": content_hash,
                **({"context": description[:4096]} if description else {}),
            }
        },
    }


def approves(review: Mapping[str, Any], content_hash: str | None) -> bool:
    """Whether ``review`` is an approval of exactly ``content_hash``."""
    spec = review.get("spec") or {}
    request = spec.get("request") or {}
    decision = spec.get("decision") or {}
    return (
        bool(content_hash)
        and request.get("kind") == SKILL_REVIEW_KIND
        and request.get("contentHash") == content_hash
        and decision.get("verdict") == "approve"
    )
