"""The Funnel resource: a quality gate every artifact of a Topology agent node must pass.

A Topology node names a Funnel (``funnel: {name}``); after the node's agent produces its
answer (the *artifact*) the runner runs the layers in a fixed order: ``validate`` (JSON
Schema, no model), ``judge`` (a decision skill's confidence against ``threshold``),
``review`` (a reviewer agent's findings against ``routeBackAt``), then ``approve``: the run
parks and a Review asks the people the ``approve`` rules name. Only ``approve`` ends the
gate. A failing automated layer sends its critique back to the drafting agent and the
artifact re-enters at ``validate``, at most ``maxRetries`` times; exhaustion never passes
silently: it opens the approval with the last critique attached (``onExhausted: approve``,
the default) or fails the run (``onExhausted: fail``).

The shapes follow SwarmKit's ``funnel.schema.json`` (snake_case there, camelCase here), with
two differences a Kubernetes schema needs: a rule's quorum is ``quorum: all | any`` *or*
``kOf: N`` (a structural schema has no ``oneOf`` of a string and an object), and roles are
Kubernetes identities (``users`` and ``groups`` as the apiserver authenticates them) kept in
the Funnel itself instead of a workspace role registry.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import KEBAB, Conditions, JsonSchema

Severity = Literal["low", "medium", "high", "critical"]
#: Severities in increasing order (``routeBackAt`` compares by position).
SEVERITIES: tuple[Severity, ...] = ("low", "medium", "high", "critical")


class SliceBudget(ApiModel):
    """How large a change the artifact's diff may be (validate fails past it)."""

    max_diff_lines: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Most added lines across the diff."
    )
    max_files: int | None = Field(
        default=None, ge=1, le=100_000, description="Most files the diff may touch."
    )


class ValidateLayer(ApiModel):
    """Layer 1, deterministic (no model): the artifact's shape."""

    schema_: JsonSchema | None = Field(
        default=None,
        alias="schema",
        description="JSON Schema (2020-12) the artifact (the agent's answer, as JSON) must match.",
    )
    autocorrect: bool = Field(
        default=True,
        description="Re-ask the drafting agent with field-specific errors (once) before an "
        "invalid shape counts as a retry.",
    )
    slice_budget: SliceBudget | None = Field(
        default=None,
        description="Bounds on the artifact's unified diff (its `diff` field): added lines "
        "and files touched.",
    )
    cited_change: bool = Field(
        default=False,
        description="The artifact is {summary, citations:[{claim, path, lines}], diff}: a "
        "citation of a line the diff did not change, or a changed file no citation names, "
        "fails.",
    )


class JudgeLayer(ApiModel):
    """Layer 2: a decision skill scores the artifact."""

    skill: str = Field(
        pattern=KEBAB,
        max_length=63,
        description="A decision Skill (category decision) whose outputs carry `confidence` "
        "(0..1) and `reasoning`; it must be granted to the gated node's agent.",
    )
    threshold: float = Field(
        default=0.8, ge=0, le=1, description="Confidence below this is a retry (0..1)."
    )


class ReviewLayer(ApiModel):
    """Layer 3: a reviewer agent reports findings."""

    agent: str = Field(
        pattern=KEBAB,
        max_length=63,
        description="The reviewer Agent; it answers JSON {findings:[{severity, message}]}.",
    )
    route_back_at: Severity = Field(
        default="high",
        description="Findings at or above this severity are a retry; lower ones go to the "
        "approval.",
    )


class RoleMembers(ApiModel):
    """Who holds a role: Kubernetes user names and groups, as the apiserver authenticates."""

    cel_rules = (
        CelRule(
            rule="(has(self.users) && size(self.users) > 0) || "
            "(has(self.groups) && size(self.groups) > 0)",
            message="a role needs at least one user or group",
            check=lambda m: bool(m.users or m.groups),
        ),
    )

    users: list[str] = Field(
        default_factory=list, max_length=100, description="User names (kubectl auth whoami)."
    )
    groups: list[str] = Field(default_factory=list, max_length=100, description="Group names.")


class ApprovalRule(ApiModel):
    """One rule: the roles that may sign and how many signatures it takes."""

    cel_rules = (
        CelRule(
            rule="has(self.quorum) != has(self.kOf)",
            message="set exactly one of quorum (all | any) and kOf",
            field_path=".quorum",
            check=lambda m: (m.quorum is None) != (m.k_of is None),
        ),
    )

    roles: list[str] = Field(
        min_length=1, max_length=20, description="Roles (keys of approve.roles) of this rule."
    )
    quorum: Literal["all", "any"] | None = Field(
        default=None,
        description="all: every role of the rule signs; any: one role suffices.",
    )
    k_of: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description="This many distinct people holding any role of the rule sign.",
    )


class ApproveLayer(ApiModel):
    """Layer 4 (required): people sign; the only way the gate ends."""

    cel_rules = (
        CelRule(
            rule="self.rules.all(r, r.roles.all(n, n in self.roles))",
            message="every role a rule names must be defined in approve.roles",
            field_path=".rules",
            check=lambda m: all(n in m.roles for r in m.rules for n in r.roles),
        ),
    )

    rules: list[ApprovalRule] = Field(
        min_length=1, max_length=20, description="Every rule must hold for the gate to pass."
    )
    roles: dict[str, RoleMembers] = Field(
        min_length=1,
        max_length=50,
        description="Role name → the users and groups holding it.",
    )
    exclude_author: bool = Field(
        default=True,
        description="Who created the Run (recorded by the apiserver at creation) may not approve.",
    )
    min_distinct_approvers: int = Field(
        default=1,
        ge=1,
        le=100,
        description="Distinct people across all rules (one person holding two roles counts once).",
    )
    on_revision: Literal["resetAll", "reconfirmChanged"] = Field(
        default="resetAll",
        description="What a revision (a signature with verdict revise) does to the "
        "signatures given before it: resetAll drops them all (everyone signs the revised "
        "artifact again); reconfirmChanged keeps them for the rules that do not name the "
        "role the revision was asked in.",
    )


class FunnelSpec(ApiModel):
    """The layers of a gate (validate, judge, review optional; approve required)."""

    validate_: ValidateLayer | None = Field(
        default=None, alias="validate", description="Layer 1: JSON Schema, diff budgets."
    )
    judge: JudgeLayer | None = Field(default=None, description="Layer 2: a decision skill.")
    review: ReviewLayer | None = Field(default=None, description="Layer 3: a reviewer agent.")
    approve: ApproveLayer = Field(description="Layer 4: who must sign.")
    max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Redrafts the automated layers may ask for (for the whole funnel).",
    )
    on_exhausted: Literal["approve", "fail"] = Field(
        default="approve",
        description="Retries exhausted: open the approval with the last critique attached "
        "(approve) or fail the run (fail). Never passes silently.",
    )


class FunnelStatus(ApiModel):
    """Observed state of a Funnel."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    version: str | None = Field(default=None, description="Hash of the spec.")
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


# --- the gate as it travels runner → operator → Review ---------------------------------------


class Finding(ApiModel):
    """One reviewer finding."""

    severity: Severity = Field(description="low | medium | high | critical.")
    message: str = Field(max_length=2000, description="What is wrong.")


class LayerResult(ApiModel):
    """How often an automated layer had one outcome, over the drafts of an approval round."""

    layer: Literal["validate", "judge", "review"] = Field(description="The layer.")
    outcome: str = Field(
        min_length=1,
        max_length=32,
        description="validate: ok, autocorrect, failed; judge: ok, below_threshold, error; "
        "review: ok, route_back.",
    )
    count: int = Field(ge=1, description="Drafts with this outcome.")


class GateReport(ApiModel):
    """What the automated layers found, attached to the approval (written by the runner)."""

    funnel: str = Field(description="The Funnel.")
    node: str = Field(default="", description="The gated topology node.")
    artifact: str = Field(default="", max_length=16384, description="The artifact (capped).")
    attempts: int = Field(default=1, ge=1, description="Drafts made (1 + retries).")
    exhausted: bool = Field(
        default=False, description="The retries ran out: the last critique is attached."
    )
    validation: list[str] = Field(
        default_factory=list, description="Validation problems of the last draft (empty: ok)."
    )
    score: float | None = Field(default=None, description="The judge's last confidence.")
    critique: str = Field(default="", max_length=4096, description="The last critique.")
    findings: list[Finding] = Field(
        default_factory=list, description="Reviewer findings (the ones below routeBackAt)."
    )
    round: int = Field(
        default=1, ge=1, description="Approval round: 1 + the revisions asked so far."
    )
    diff: str = Field(
        default="",
        max_length=16384,
        description="Unified diff of the artifact against the one shown at the previous "
        "round's approval (empty in round 1; capped).",
    )
    layer_results: list[LayerResult] = Field(
        default_factory=list,
        max_length=16,
        description="The automated layers' outcomes over this round's drafts (the operator "
        "counts them in swarmkit_funnel_layer_results_total).",
    )
    retries: int = Field(
        default=0, ge=0, description="Retries the automated layers asked for in this round."
    )


class Approval(ApiModel):
    """One person's signature on a funnel approval, in one role."""

    cel_rules = (
        CelRule(
            rule="self.verdict != 'revise' || (has(self.text) && size(self.text) > 0)",
            message="verdict revise needs text: what the drafting agent must change",
            field_path=".text",
            check=lambda m: m.verdict != "revise" or bool(m.text),
        ),
    )

    verdict: Literal["approve", "reject", "revise"] = Field(
        description="approve, reject (the run fails), or revise (text goes back to the "
        "drafting agent; the revised artifact opens a new approval round)."
    )
    role: str = Field(
        min_length=1,
        max_length=63,
        description="The role signed in; the admission policy checks you hold it.",
    )
    decided_by: str = Field(
        min_length=1,
        max_length=253,
        description="Your user name exactly as the apiserver authenticates you.",
    )
    text: str | None = Field(
        default=None, max_length=4096, description="Comment (required for revise)."
    )


class ApprovalRound(ApiModel):
    """An earlier approval round of the same gate: its Review and the signatures in it
    (the last one the revision that ended it). Written by the operator from that Review."""

    round: int = Field(ge=1, description="The round (1 is the first approval).")
    review: str = Field(description="The Review of that round.")
    approvals: list[Approval] = Field(
        default_factory=list, max_length=200, description="The signatures of that round, in order."
    )


#: Earlier rounds a gate's Review keeps (the operator drops the oldest past it: their
#: signatures then stop counting, the safe direction).
MAX_ROUNDS = 20


__all__ = [
    "MAX_ROUNDS",
    "SEVERITIES",
    "Approval",
    "ApprovalRound",
    "ApprovalRule",
    "ApproveLayer",
    "Finding",
    "FunnelSpec",
    "FunnelStatus",
    "GateReport",
    "JudgeLayer",
    "LayerResult",
    "ReviewLayer",
    "RoleMembers",
    "Severity",
    "SliceBudget",
    "ValidateLayer",
]
