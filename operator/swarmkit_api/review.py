"""The Review resource: one question a person must answer, and the runner's resume contract.

A Review is created by the operator only: from what a parked run reported (the runner of
a Run has no API access), owned by its Run (or, for a swarm-authored skill, by the Skill);
or, for a call of an Agent's MCP gateway session that waits for a person
(``request.gatewaySession``), from what the gateway's own pod asked on its log
(:class:`GatewayReviewAsk`), owned by the Agent (the gateway's service account may only get
and watch Reviews: anyone who may edit the namespace can mint its token). ``spec.request``
is what is asked; it never changes. A person answers by writing
``spec.decision {verdict, text, decidedBy}``; the ValidatingAdmissionPolicy shipped with
the chart (``swarmkit-review-decisions``) requires ``decidedBy`` to be the authenticated
user of that very request, refuses a second decision and a decision on an expired review,
and lets only the operator create a Review labelled as a Run's, a Skill's or a gateway's.
The CRD itself (CEL transition rules, below) also refuses any change to a decided review.

:class:`Checkpoint` and :class:`ResumeDecision` are the files a resumed runner reads: the
run's journal so far (what every model call and tool call returned) and the decision.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import Conditions, LocalObjectReference
from .funnel import MAX_ROUNDS, Approval, ApprovalRound, ApproveLayer, GateReport, JudgeLayer
from .quorum import Tally, tally

#: Labels on every Review: its kind; a gateway session's Review also names its Agent (the
#: label the gateway's pods carry) and the session's correlation id.
REVIEW_KIND_LABEL = "swarmkit.dev/review-kind"
GATEWAY_LABEL = "swarmkit.dev/gateway"
CORRELATION_LABEL = "swarmkit.dev/correlation-id"
#: Who created the Review: the admission policy requires it to be the authenticated
#: creator, and the operator uses a Review it expects only when it names the operator.
CREATED_BY_ANNOTATION = "swarmkit.dev/created-by"
#: The labels that say on whose behalf the operator opened a Review (a Run's, a Skill's,
#: a gateway's): only the operator may create a Review bearing one.
RUN_UID_LABEL = "swarmkit.dev/run-uid"
SKILL_LABEL = "swarmkit.dev/skill"
ORIGIN_LABELS = (GATEWAY_LABEL, RUN_UID_LABEL, SKILL_LABEL)

ReviewKind = Literal[
    "escalation",
    "approval",
    "input_request",
    "human_task",
    "skill_review",
    "funnel_approval",
    "spend",
    "promotion",
]
Verdict = Literal["approve", "reject", "answer"]
ReviewState = Literal["Pending", "Decided", "Expired", "Resumed", "Closed"]

#: Who "decides" an expired review (the operator, delivering the timeout to the runner).
TIMEOUT_DECIDER = "system:swarmkit-operator:review-timeout"
#: Longest scrubbed argument text kept in a review request.
MAX_ARGUMENTS_CHARS = 4000


class GatewaySessionRef(ApiModel):
    """The MCP gateway session whose call waits (the Review is owned by its Agent)."""

    agent: str = Field(description="The Agent whose gateway asked.")
    correlation_id: str = Field(
        description="The session's correlation id (every audit line of the session has it)."
    )
    session: str = Field(default="", description="The MCP session id.")
    identity: str = Field(default="", description="The bearer token's name (who called).")
    pod: str = Field(default="", description="The gateway replica that waits.")


class FunnelGate(ApiModel):
    """A funnel's approval: the policy as the Run pinned it, who created the Run, and what
    the automated layers found (written by the operator; immutable like the request)."""

    funnel: str = Field(description="The Funnel.")
    approve: ApproveLayer = Field(description="Who must sign (the pinned approve layer).")
    author: str = Field(
        default="",
        description="Who created the Run (the apiserver-checked annotation "
        "swarmkit.dev/created-by); excluded from signing when approve.excludeAuthor.",
    )
    judge: JudgeLayer | None = Field(
        default=None, description="The judge layer as the Run pinned it (its skill, threshold)."
    )
    judge_content_hash: str | None = Field(
        default=None, description="The content hash of the judge skill the Run pinned."
    )
    report: GateReport = Field(description="The artifact and the automated layers' results.")
    rounds: list[ApprovalRound] = Field(
        default_factory=list,
        max_length=MAX_ROUNDS,
        description="Earlier approval rounds of this gate, each ended by a revision (written "
        "by the operator from their Reviews); the quorum counts their signatures per "
        "approve.onRevision.",
    )

    @classmethod
    def of(cls, review: Mapping[str, Any]) -> tuple[FunnelGate, list[Approval]] | None:
        """The gate of a ``funnel_approval`` Review and its signatures (None: the Review is
        no funnel approval). Raises ``ValueError`` (pydantic's ValidationError) when the gate
        or a signature does not parse: the operator then sees no decision, the CLI says so."""
        spec = review.get("spec") or {}
        raw = (spec.get("request") or {}).get("gate")
        if not raw:
            return None
        gate = cls.model_validate(raw)
        return gate, [Approval.model_validate(a) for a in spec.get("approvals") or ()]

    def tally(self, approvals: list[Approval]) -> Tally:
        """The quorum as ``approvals`` leave it (:func:`swarmkit_api.quorum.tally`)."""
        return tally(self.approve, approvals, self.author, self.rounds)


class ReviewRequest(ApiModel):
    """What is asked (written once by the operator; immutable)."""

    kind: ReviewKind = Field(
        description="escalation (a skill failed and onFailure is escalate_to_human), approval "
        "(a strict-tier call waits for approval), input_request (a remote agent asked a "
        "question, onUnanswerable relay), human_task (the human_task_request builtin), "
        "skill_review (a swarm-authored skill waits for its first human review), "
        "funnel_approval (a funnel gate waits for people to sign: spec.approvals), "
        "spend (a "
        "Run waits on a SpendQuota with onExhausted hold: approve lets it start past the "
        "limit, reject fails it), promotion (a Topology's or Agent's candidate version was "
        "inconclusive in its evaluation: approve promotes it, reject leaves it unpromoted)."
    )
    question: str = Field(max_length=4096, description="What must be decided.")
    run_ref: LocalObjectReference | None = Field(
        default=None, description="The parked Run (absent for skill reviews)."
    )
    gateway_session: GatewaySessionRef | None = Field(
        default=None,
        description="The MCP gateway session whose call waits (absent for Runs and skills).",
    )
    skill_ref: LocalObjectReference | None = Field(default=None, description="Skill involved.")
    content_hash: str | None = Field(
        default=None,
        description="skill_review: the content hash the review approves; promotion: the "
        "candidate version.",
    )
    agent: str | None = Field(default=None, description="The agent that asked.")
    tool: str | None = Field(default=None, description="The tool or skill called.")
    arguments: str | None = Field(
        default=None,
        max_length=MAX_ARGUMENTS_CHARS,
        description="The call's arguments as JSON, secrets scrubbed.",
    )
    context: str | None = Field(
        default=None, max_length=4096, description="Why it is asked (the failure, the task)."
    )
    task_id: str | None = Field(default=None, description="The remote A2A task (input_request).")
    key: str = Field(default="", description="Where the run parked (runner journal key).")
    deadline: datetime | None = Field(
        default=None,
        description="After this the review expires and the run takes its "
        "failure path (Workspace governance.reviewTimeoutSeconds or the skill's).",
    )
    gate: FunnelGate | None = Field(
        default=None, description="funnel_approval: the policy, the author and the report."
    )


class ReviewDecision(ApiModel):
    """A person's answer. ``decidedBy`` must be the authenticated user who writes it."""

    cel_rules = (
        CelRule(
            rule="self.verdict != 'answer' || (has(self.text) && size(self.text) > 0)",
            message="verdict answer needs the answer in text",
            field_path=".text",
            check=lambda m: m.verdict != "answer" or bool(m.text),
        ),
    )

    verdict: Verdict = Field(
        description="approve (go on; a strict call runs), reject (the call is refused / the "
        "run takes its failure path), or answer (text is the answer)."
    )
    text: str | None = Field(default=None, max_length=16384, description="Answer or comment.")
    decided_by: str = Field(
        min_length=1,
        max_length=253,
        description="Your user name exactly as the apiserver authenticates you (kubectl auth "
        "whoami); the admission policy refuses anything else.",
    )


def _unchanged_request(_: Any) -> bool:
    return True  # a transition rule: only the apiserver sees the old object


class ReviewSpec(ApiModel):
    """The question (``request``) and, once answered, the ``decision``."""

    cel_rules = (
        CelRule(
            rule="self.request == oldSelf.request",
            message="spec.request is immutable (it is written by the operator)",
            field_path=".request",
            check=_unchanged_request,
        ),
        CelRule(
            # An exact prefix, not "every old entry still present": that let a signer
            # insert a forged entry before hers or replace a duplicate in place.
            rule="!has(oldSelf.approvals) || (has(self.approvals) && "
            "size(self.approvals) >= size(oldSelf.approvals) && "
            "self.approvals.slice(0, size(oldSelf.approvals)) == oldSelf.approvals)",
            message="signatures are appended, never inserted, reordered, changed or removed",
            field_path=".approvals",
            check=_unchanged_request,
        ),
        CelRule(
            rule="!has(oldSelf.decision) || (has(self.decision) && self.decision == "
            "oldSelf.decision)",
            message="this review is already decided; a decision cannot be changed or removed",
            field_path=".decision",
            check=_unchanged_request,
        ),
    )

    request: ReviewRequest = Field(description="What is asked (immutable).")
    decision: ReviewDecision | None = Field(default=None, description="The answer, once given.")
    approvals: list[Approval] = Field(
        default_factory=list,
        max_length=200,
        description="funnel_approval: signatures, one per person and role, appended one at "
        "a time (kubectl swarmkit review --role); never changed or removed.",
    )


class ReviewStatus(ApiModel):
    """What the operator made of the review."""

    state: ReviewState | None = Field(
        default=None,
        description="Pending, Decided (the decision was taken up), Expired (no answer before "
        "the deadline), Resumed (the run goes on with it), Closed (the run ended without it, "
        "e.g. cancelled).",
    )
    verdict: str | None = Field(default=None, description="The verdict taken up.")
    decided_by: str | None = Field(default=None, description="Authenticated decider.")
    decided_at: datetime | None = Field(
        default=None,
        description="When the decision was written (from the apiserver's record "
        "of the write, managedFields).",
    )
    resumed_job: str | None = Field(default=None, description="The Job that resumed the run.")
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


# --- the resume contract (runner side) -------------------------------------------------------


class ResumeDecision(ApiModel):
    """The decision the operator mounts into a resumed runner (``decision.json``)."""

    review: str = Field(description="The Review's name.")
    key: str = Field(description="The journal key where the run parked.")
    kind: ReviewKind = Field(description="Kind of the review.")
    verdict: Literal["approve", "reject", "answer", "timeout", "revise"] = Field(
        description="The verdict; timeout when the review expired; revise (funnel "
        "approvals): text goes back to the drafting agent."
    )
    text: str = Field(default="", description="Answer or comment.")
    decided_by: str = Field(description="Authenticated decider (or the operator on timeout).")
    decided_at: str = Field(default="", description="RFC 3339 time of the decision.")
    task_id: str | None = Field(default=None, description="The remote task (input_request).")


def decided_at(review: Mapping[str, Any]) -> str:
    """When ``spec.decision`` was written: the time of the managedFields entry that owns
    it (set by the apiserver on that write), or '' when unknown."""
    for entry in (review.get("metadata") or {}).get("managedFields") or ():
        fields = ((entry.get("fieldsV1") or {}).get("f:spec") or {}) if entry else {}
        if "f:decision" in fields and entry.get("time"):
            return str(entry["time"])
    return ""


def decision_of(review: Mapping[str, Any]) -> ResumeDecision | None:
    """The decision a Review holds, None while it holds none: the one way to read it.

    ``spec.decision`` (one person; the admission policy checked ``decidedBy``), or for a
    funnel approval what its signatures add up to (:meth:`FunnelGate.tally`): approve once
    the quorum holds, reject on a rejection, revise on a revision request. The operator (a
    parked Run, a skill review, a spend hold, a gateway Review's status), the MCP gateway
    (a waiting call) and ``kubectl swarmkit review`` all read decisions with this."""
    spec = review.get("spec") or {}
    request = spec.get("request") or {}
    name = str((review.get("metadata") or {}).get("name") or "")
    key = str(request.get("key") or "")
    decision = spec.get("decision")
    if decision:
        return ResumeDecision(
            review=name,
            key=key,
            kind=request.get("kind") or "escalation",
            verdict=decision.get("verdict") or "reject",
            text=str(decision.get("text") or ""),
            decided_by=str(decision.get("decidedBy") or ""),
            decided_at=decided_at(review),
            task_id=request.get("taskId"),
        )
    try:
        found = FunnelGate.of(review)
    except ValueError:
        return None  # an unreadable gate never opens (the CLI shows why)
    if found is None:
        return None
    gate, approvals = found
    result = gate.tally(approvals)
    if result.rejected_by is not None:
        who = result.rejected_by
        text = next(
            (a.text or "" for a in approvals if a.decided_by == who and a.verdict == "reject"), ""
        )
        verdict: Literal["approve", "reject", "revise"] = "reject"
    elif result.revision is not None:
        who, text, verdict = result.revision.decided_by, result.revision.text or "", "revise"
    elif result.approved:
        who, text, verdict = ", ".join(result.approvers), "", "approve"
    else:
        return None
    return ResumeDecision(
        review=name,
        key=key,
        kind="funnel_approval",
        verdict=verdict,
        text=text,
        decided_by=who,
        decided_at=decided_at(review),
    )


# --- a gateway session's question (gateway side) ----------------------------------------------

#: The stdout line prefix an Agent's MCP gateway asks the operator to open a Review on
#: (one line, read by the operator from the log of the gateway's own pods: the gateway
#: has no identity of its own that could create one, see :class:`GatewayReviewAsk`).
REVIEW_ASK_LINE_PREFIX = "swarmkit.review-ask "
MAX_NAME = 63


def gateway_review_name(agent: str, correlation_id: str, n: int) -> str:
    """``gw-<agent>-<correlation id[:8]>-<n>`` (at most 63 characters): the n-th question
    of a gateway session (the gateway waits on it, the operator opens it)."""
    suffix = f"-{correlation_id.replace('-', '')[:8]}-{n}"
    return f"gw-{agent}"[: MAX_NAME - len(suffix)].rstrip("-") + suffix


class GatewayReviewAsk(ApiModel):
    """What a gateway prints (after :data:`REVIEW_ASK_LINE_PREFIX`) for the operator to open
    the Review a waiting call needs: the n-th question of its session and what is asked.

    The operator opens it only for a pod of that Agent's gateway, for an ``approval`` or
    ``escalation`` of that gateway's session, under the name :func:`gateway_review_name`
    gives, owned by the Agent (:func:`swarmkit_operator.builders.review.
    build_gateway_review`); the gateway's ServiceAccount may only get and watch Reviews."""

    n: int = Field(ge=1, le=100000, description="The question's number in its session.")
    request: ReviewRequest = Field(description="What is asked (request.gatewaySession set).")

    def line(self) -> str:
        return REVIEW_ASK_LINE_PREFIX + json.dumps(self.wire(), separators=(",", ":"))

    @classmethod
    def from_line(cls, line: str) -> GatewayReviewAsk | None:
        """The ask on a log line (None: the line is no ask). Raises ``ValueError`` when it
        is one but does not parse."""
        if not line.startswith(REVIEW_ASK_LINE_PREFIX):
            return None
        return cls.model_validate_json(line[len(REVIEW_ASK_LINE_PREFIX) :])


class Checkpoint(ApiModel):
    """Where a parked run stands: every recorded effect (model call, tool call) by key."""

    version: Literal[1] = Field(default=1, description="Checkpoint format version.")
    run_uid: str = Field(description="The run this belongs to.")
    resume: int = Field(default=0, ge=0, description="How many resumes preceded it.")
    entries: dict[str, Any] = Field(
        default_factory=dict, description="Journal key → recorded result."
    )
    parked_key: str = Field(description="Journal key of the call that waits.")
    item: dict[str, Any] = Field(
        default_factory=dict, description="The review item asked there (a ReviewItem)."
    )
    decisions: list[dict[str, Any]] = Field(
        default_factory=list, description="Decisions applied so far (audit)."
    )

    def encode(self) -> str:
        """Compact, compressed, base64 text (what the runner prints, the ConfigMap holds)."""
        raw = json.dumps(self.wire(), separators=(",", ":"), sort_keys=True).encode()
        return base64.b64encode(zlib.compress(raw, 9)).decode()

    @classmethod
    def decode(cls, text: str) -> Checkpoint:
        return cls.model_validate(json.loads(zlib.decompress(base64.b64decode(text))))


#: The stdout line prefix the runner prints its checkpoint on (one line, read by the operator
#: from the pod log; the termination message carries its sha256 to check it).
CHECKPOINT_LINE_PREFIX = "swarmkit.checkpoint "
CHECKPOINT_FILE = "checkpoint"
DECISION_FILE = "decision.json"
RESUME_MOUNT = "/etc/swarmkit/resume"


__all__ = [
    "CHECKPOINT_FILE",
    "CHECKPOINT_LINE_PREFIX",
    "CORRELATION_LABEL",
    "CREATED_BY_ANNOTATION",
    "DECISION_FILE",
    "GATEWAY_LABEL",
    "ORIGIN_LABELS",
    "RESUME_MOUNT",
    "REVIEW_ASK_LINE_PREFIX",
    "REVIEW_KIND_LABEL",
    "RUN_UID_LABEL",
    "SKILL_LABEL",
    "TIMEOUT_DECIDER",
    "Checkpoint",
    "FunnelGate",
    "GatewayReviewAsk",
    "GatewaySessionRef",
    "ResumeDecision",
    "ReviewDecision",
    "ReviewKind",
    "ReviewRequest",
    "ReviewSpec",
    "ReviewState",
    "ReviewStatus",
    "decided_at",
    "decision_of",
    "gateway_review_name",
]
