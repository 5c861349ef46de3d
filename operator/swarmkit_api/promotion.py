"""Promotion gated on evaluation: ``spec.promotion`` of a Topology or an Agent, and its status.

With ``spec.promotion`` a change does not take effect at once. The new version (the content
hash the operator already computes: ``status.version``) is the *candidate*; the version Runs,
the served Topology and the MCP gateway keep using is the *active* one
(``status.promotion.active``). The operator starts an EvalRun of the candidate against the
active version on each named EvalSet; ``gate`` decides: Pass promotes, Fail leaves the
candidate unpromoted (``Promoted=False`` naming the regressions) until the spec changes again,
Inconclusive holds it or opens a Review (``onInconclusive``).

The names of the annotations ``kubectl swarmkit promote --force`` writes live here too: the
admission policy ``swarmkit-promote-force`` (``swarmkit_operator.admission_promotion``) and
the operator read the same constants.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import LocalObjectReference

#: ``kubectl swarmkit promote --force`` sets this to the candidate version it promotes.
FORCE_PROMOTE_ANNOTATION = "swarmkit.dev/force-promote"
#: ... and this to the caller's user name (the admission policy requires it to be the
#: authenticated user, and the ``promote`` verb on the object: only the chart's admin role
#: grants it).
FORCE_PROMOTED_BY_ANNOTATION = "swarmkit.dev/force-promoted-by"
#: The RBAC verb a forced promotion needs on ``topologies`` / ``agents`` (group swarmkit.dev).
PROMOTE_VERB = "promote"
#: Label on the EvalRuns the operator starts for a candidate: ``<kind>.<name>`` of its owner.
PROMOTION_LABEL = "swarmkit.dev/promotion-of"
#: The verdicts of an EvalRun, as ``EvalRun.status.verdict`` spells them.
VERDICT_PASS = "Pass"
VERDICT_FAIL = "Fail"
VERDICT_INCONCLUSIVE = "Inconclusive"
#: Promotions kept in ``status.promotion.history`` (newest first).
HISTORY_LIMIT = 10


class PromotionGate(ApiModel):
    """When a candidate's evaluation passes (the EvalRun applies it to its statistics)."""

    min_pass_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="The candidate's pass rate (lower bound of its 95 % interval) must reach "
        "this, on every EvalSet.",
    )
    non_inferiority_margin: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="How much worse than the active version the candidate may be: the lower "
        "bound of the paired difference's 95 % interval must be above -margin.",
    )
    min_cases: int = Field(
        default=10,
        ge=1,
        le=10000,
        description="Fewer graded cases than this is Inconclusive, never Pass.",
    )
    max_new_regressions: int = Field(
        default=0,
        ge=0,
        le=10000,
        description="Cases the active version passes and the candidate fails, at most.",
    )
    on_inconclusive: Literal["hold", "review"] = Field(
        default="hold",
        description="hold: the candidate stays unpromoted (Promoted=False Inconclusive) until "
        "the spec changes or someone forces it; review: a Review carrying the comparison is "
        "opened and a person decides.",
    )


class PromotionSpec(ApiModel):
    """Promote a new version only once it passes its evaluation against the active one."""

    cel_rules = (
        CelRule(
            rule="self.evalSets.all(a, self.evalSets.exists_one(b, b.name == a.name))",
            message="each evalSets entry must name a different EvalSet",
            field_path=".evalSets",
            check=lambda m: len({e.name for e in m.eval_sets}) == len(m.eval_sets),
        ),
    )

    eval_sets: list[LocalObjectReference] = Field(
        min_length=1,
        max_length=16,
        description="EvalSets (same namespace) every candidate is evaluated on; each must pass.",
    )
    gate: PromotionGate = Field(
        default_factory=PromotionGate, description="What a passing evaluation is."
    )


class PromotedVersion(ApiModel):
    """A version of the object and the immutable renders that pin it."""

    version: str = Field(description="The content-addressed version (status.version).")
    rendered_config_map: str = Field(description="Its rendered ConfigMap.")
    rendered_sha256: str | None = Field(
        default=None,
        description="The sha256 of that render's content, recorded when it was rendered: "
        "whoever runs this version reads the render only when its content has this digest "
        "(its name's 8 hex digits alone are 2^32 work to forge).",
    )
    pins: list[str] = Field(
        default_factory=list,
        description="The rendered ConfigMaps it runs with (agents, skills): kept by the "
        "garbage collection as long as this version is active or a candidate.",
    )
    promoted_at: datetime | None = Field(default=None, description="When it became active.")
    forced_by: str | None = Field(
        default=None, description="Who forced it past its evaluation (kubectl swarmkit promote)."
    )
    eval_runs: list[str] = Field(
        default_factory=list, description="The EvalRuns that evaluated it (one per EvalSet)."
    )


class CandidateVersion(PromotedVersion):
    """The version under evaluation and where it stands."""

    verdict: Literal["Pass", "Fail", "Inconclusive"] | None = Field(
        default=None, description="The combined verdict of its EvalRuns, once all ended."
    )
    regressions: list[str] = Field(
        default_factory=list,
        description="Cases the active version passes and this one fails (EvalSet/case).",
    )
    review: str | None = Field(
        default=None, description="The Review opened for an Inconclusive verdict."
    )


class PromotionStatus(ApiModel):
    """Active and candidate versions (``spec.promotion``)."""

    active: PromotedVersion | None = Field(
        default=None, description="The version Runs, serving and the gateway use."
    )
    candidate: CandidateVersion | None = Field(
        default=None, description="The newer version being evaluated (absent when none)."
    )
    history: list[PromotedVersion] = Field(
        default_factory=list,
        max_length=HISTORY_LIMIT,
        description="Earlier active versions, newest first.",
    )
    created_uids: dict[str, str] = Field(
        default_factory=dict,
        description="EvalRun/<name> → uid of each EvalRun the operator created for the "
        "candidate, recorded right after the create: only these are counted. An EvalRun "
        "under one of those names that is not the one recorded (anyone who may create "
        "EvalRuns can take a planned name, with laxer criteria) is never counted: "
        "Promoted=False TamperedObject.",
    )


__all__ = [
    "FORCE_PROMOTED_BY_ANNOTATION",
    "FORCE_PROMOTE_ANNOTATION",
    "HISTORY_LIMIT",
    "PROMOTE_VERB",
    "PROMOTION_LABEL",
    "VERDICT_FAIL",
    "VERDICT_INCONCLUSIVE",
    "VERDICT_PASS",
    "CandidateVersion",
    "PromotedVersion",
    "PromotionGate",
    "PromotionSpec",
    "PromotionStatus",
]
