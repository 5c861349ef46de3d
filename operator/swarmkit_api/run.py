"""The Run resource: one execution of a Topology (or a single Agent) as a Job."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import (
    MAX_LABELS,
    RESERVED_LABEL_DOMAINS,
    RESERVED_LABEL_KEY,
    Conditions,
    LabelValue,
    LocalObjectReference,
    cel_string,
    labels_rule,
)
from .effects import RunEffect
from .funnel import GateReport
from .replay import MAX_RECORDED_CALLS, RecordedCall
from .spend import MONEY_PATTERN, ModelUsage

#: Most bytes of UTF-8 in Run.spec.input: it fits the run bundle's ConfigMap with room left
#: for the agents, skills and workspace policy it travels with (see docs/concepts limits).
MAX_INPUT_BYTES = 524288


def _reserved(key: str) -> bool:
    prefix = key.rpartition("/")[0]
    return any(prefix == d or prefix.endswith("." + d) for d in RESERVED_LABEL_DOMAINS)


class RunSpec(ApiModel):
    """What to run, with which input."""

    cel_rules = (
        CelRule(
            rule="has(self.topologyRef) != has(self.agentRef)",
            message="exactly one of topologyRef or agentRef must be set",
            field_path=".topologyRef",
            check=lambda m: (m.topology_ref is None) != (m.agent_ref is None),
        ),
        CelRule(
            # The run bundle carries the input as UTF-8 in a ConfigMap (1 MiB in all): the
            # character limit alone would let 262,144 four-byte characters through.
            rule=f"!has(self.input) || size(bytes(self.input)) <= {MAX_INPUT_BYTES}",
            message=f"input must be at most {MAX_INPUT_BYTES} bytes of UTF-8",
            field_path=".input",
            check=lambda m: len(m.input.encode()) <= MAX_INPUT_BYTES,
        ),
        labels_rule("labels", "labels"),
        CelRule(
            rule="!has(self.labels) || "
            f"self.labels.all(k, !k.matches({cel_string(RESERVED_LABEL_KEY)}))",
            message="labels: keys under "
            + ", ".join(RESERVED_LABEL_DOMAINS)
            + " are the operator's (they link the Job and pod to their Run)",
            field_path=".labels",
            check=lambda m: not any(_reserved(k) for k in m.labels),
        ),
        CelRule(
            rule="!has(self.replay) || (has(self.readOnly) && self.readOnly)",
            message="replay needs readOnly: a replayed Run answers its writes from the "
            "recording and runs none",
            field_path=".replay",
            check=lambda m: m.replay is None or m.read_only,
        ),
    )

    topology_ref: LocalObjectReference | None = Field(default=None, description="Topology to run.")
    agent_ref: LocalObjectReference | None = Field(
        default=None, description="Or a single Agent to run."
    )
    version: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{12}$",
        description="Pin this version of the target (status.version): with spec.promotion, "
        "its active or its candidate version (an evaluation's Runs); default: the active "
        "version, else the current one.",
    )
    input: str = Field(
        default="",
        max_length=262144,
        description=f"Input given to the root agent: at most 262,144 characters and "
        f"{MAX_INPUT_BYTES} bytes of UTF-8.",
    )
    timeout_seconds: int | None = Field(
        default=None, ge=1, le=86400, description="Deadline; defaults to the Workspace's."
    )
    correlation_id: str | None = Field(
        default=None, max_length=128, description="Joins this run with records elsewhere."
    )
    labels: dict[str, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_LABELS,
        description="Labels copied to the Job and pod (valid label keys and values; not under "
        "the operator's swarmkit.dev, kubernetes.io or k8s.io prefixes).",
    )
    cancelled: bool = Field(default=False, description="Set true to stop the run.")
    start_after: datetime | None = Field(
        default=None,
        description="Do not start before this time (the Run waits with Succeeded=Unknown, "
        "reason Scheduled); set by the schedule tool, or by hand.",
    )
    max_cost: str | None = Field(
        default=None,
        pattern=MONEY_PATTERN,
        description="Most this run (child runs included) may spend, in the Workspace "
        "providers' currency; defaults to governance.maxCostPerRun. Checked before every "
        "model call with the call's maxTokens as the worst case; reserved against quotas.",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Most input+output tokens this run may use (besides the Workspace's "
        "maxTokensPerRun); checked before every model call like maxCost.",
    )
    read_only: bool = Field(
        default=False,
        description="Refuse, in the runner, every tool call that does not only read, or with "
        "replay answer it from the recording (an EvalRun's replayed cases set it: an "
        "evaluation never writes what a production Run would).",
    )
    replay: list[RecordedCall] | None = Field(
        default=None,
        max_length=MAX_RECORDED_CALLS,
        description="Replay mode (with readOnly; an EvalRun's case built from a recorded "
        "Run): every tool call that does not only read gets the answer recorded for the "
        "same tool and arguments, in order (the recorded Run's status.recording), and "
        "is never run; one with no recorded answer is refused (ReplayNotRecorded).",
    )


class TokenUsage(ApiModel):
    """Model tokens used by a run."""

    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    cached_input_tokens: int = Field(
        default=0, ge=0, description="Input tokens read from a provider's prompt cache."
    )
    models: list[ModelUsage] = Field(
        default_factory=list, description="Tokens and cost per model (child runs included)."
    )
    cost: str | None = Field(
        default=None, description="Total cost; null when any model used is unpriced."
    )
    currency: str | None = Field(default=None, description="Currency of cost.")
    cost_unknown: bool = Field(
        default=False, description="A model used has no prices: the total cost is unknown."
    )


class ReviewItem(ApiModel):
    """Something a person must decide before the run can go on."""

    kind: Literal[
        "escalation", "approval", "input_request", "human_task", "human_gate", "funnel_approval"
    ] = Field(description="Kind.")
    skill: str | None = Field(default=None, description="The skill involved.")
    agent: str | None = Field(default=None, description="The agent involved.")
    question: str = Field(description="What must be decided.")
    task_id: str | None = Field(default=None, description="Remote task, if any.")
    tool: str | None = Field(default=None, description="The tool or skill called.")
    arguments: str | None = Field(
        default=None, description="The call's arguments as JSON (secrets scrubbed, capped)."
    )
    context: str | None = Field(default=None, description="Why it is asked.")
    key: str | None = Field(default=None, description="Where the run parked (journal key).")
    timeout_seconds: int | None = Field(
        default=None, description="How long the review may wait (the skill's or the Workspace's)."
    )
    review: str | None = Field(
        default=None, description="The Review object that asks it (set by the operator)."
    )
    gate: GateReport | None = Field(
        default=None, description="funnel_approval: what the automated layers found."
    )


class GateStatus(ApiModel):
    """One funnel gate a run passed through (per parked approval)."""

    funnel: str = Field(description="The Funnel.")
    node: str = Field(default="", description="The gated topology node.")
    review: str = Field(description="The Review asking for the approval.")
    attempts: int = Field(default=1, description="Drafts made (1 + retries).")
    score: float | None = Field(default=None, description="The judge's last confidence.")
    exhausted: bool = Field(default=False, description="The automated retries ran out.")
    round: int = Field(default=1, description="Approval round (1 + revisions asked before).")
    judge: str | None = Field(
        default=None, description="The judge layer's decision Skill (as the Run pinned it)."
    )
    judge_content_hash: str | None = Field(
        default=None, description="The content hash of that Skill, as the Run pinned it."
    )
    judge_passed: bool | None = Field(
        default=None,
        description="The judge's verdict on the artifact shown: score ≥ the pinned threshold "
        "(unset: it gave the shown artifact no score).",
    )
    state: Literal["AwaitingApproval", "Approved", "Rejected", "Expired", "RevisionRequested"] = (
        Field(
            description="AwaitingApproval, then Approved, Rejected, Expired or "
            "RevisionRequested (the next round is a new entry)."
        )
    )


class RecordedDecision(ApiModel):
    """A decision a run went on with: who (authenticated), when, what."""

    review: str = Field(description="The Review's name.")
    kind: str = Field(default="", description="Kind of the review.")
    verdict: str = Field(description="approve, reject, answer, timeout, or revise.")
    decided_by: str = Field(description="The authenticated user (admission-checked).")
    decided_at: datetime | None = Field(default=None, description="When it was written.")
    resumed_job: str | None = Field(default=None, description="The Job that resumed the run.")


class SkillFileRead(ApiModel):
    """A bundled file an agent read with ``read_skill_file`` (level 3)."""

    skill: str = Field(description="Skill name.")
    path: str = Field(description="Path of the file inside the skill.")


class SkillScriptRuns(ApiModel):
    """How often an agent ran one approved script with ``run_skill_script``."""

    skill: str = Field(description="Skill name.")
    path: str = Field(description="Path of the script inside the skill.")
    runs: int = Field(default=0, ge=0, description="Times it was run.")
    failures: int = Field(
        default=0, ge=0, description="Runs that exited non-zero or were killed (timeout)."
    )
    last_exit_code: int | None = Field(
        default=None, description="Exit status of the last run (None when it was killed)."
    )


class AgentSkillUsage(ApiModel):
    """What one agent did with its granted skills during a run.

    The counts are always exact. The lists name every skill, file and script unless the
    termination message (4 KiB with the output) had no room: then ``truncated`` is true and
    each list keeps its first few entries.
    """

    agent: str = Field(description="Agent name.")
    loaded: list[str] = Field(
        default_factory=list,
        description="Skills loaded with load_skill (level 2), in order of first load.",
    )
    loads: int = Field(default=0, ge=0, description="Distinct skills loaded.")
    files_read: list[SkillFileRead] = Field(
        default_factory=list, description="Bundled files read with read_skill_file (level 3)."
    )
    file_reads: int = Field(default=0, ge=0, description="Distinct files read.")
    scripts: list[SkillScriptRuns] = Field(
        default_factory=list, description="Approved scripts run, with their exit status."
    )
    script_runs: int = Field(default=0, ge=0, description="Script runs in total.")
    script_failures: int = Field(default=0, ge=0, description="Script runs that failed.")
    truncated: bool = Field(
        default=False, description="Lists were cut to fit the termination message."
    )


class AuditChainHead(ApiModel):
    """The end of a run's hash-chained audit log (:mod:`swarmkit_api.audit_chain`).

    The runner reports it in its result; the operator copies it, with the pod whose log it
    ends, into the Run's status. ``kubectl swarmkit logs --verify`` holds a copy of the log
    against it. A resumed or recreated Run has one chain per pod: the status keeps each.
    """

    head: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="sha256 (hex) of the last audit line written."
    )
    lines: int = Field(ge=0, description="How many audit lines the chain holds.")
    pod: str | None = Field(default=None, description="The pod whose log this chain is.")


class PinnedVersions(ApiModel):
    """Exactly which versions a run saw."""

    topology: str | None = Field(default=None, description="Topology version.")
    agents: dict[str, str] = Field(default_factory=dict, description="Agent → version.")
    skills: dict[str, str] = Field(default_factory=dict, description="Skill → content hash.")


class RunStatus(ApiModel):
    """Observed state of a Run."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    start_time: datetime | None = Field(default=None, description="When the Job started.")
    completion_time: datetime | None = Field(default=None, description="When the run ended.")
    job_name: str | None = Field(default=None, description="The Run's Job.")
    pod_name: str | None = Field(default=None, description="The Job's pod.")
    bundle_config_map: str | None = Field(default=None, description="The immutable bundle.")
    bundle_sha256: str | None = Field(
        default=None,
        description="sha256 of the bundle ConfigMap's data, recorded when the operator wrote "
        "it: a bundle with another digest is never used (TamperedObject).",
    )
    created_uids: dict[str, str] = Field(
        default_factory=dict,
        description="<Kind>/<name> → uid of each object the operator created for the run "
        "(its Jobs, its NetworkPolicy), recorded right after the create: an object under one "
        "of those names that is not the one recorded is never used (TamperedObject).",
    )
    trace_id: str | None = Field(
        default=None, description="The Run's OpenTelemetry trace id (when traced)."
    )
    pinned: PinnedVersions | None = Field(default=None, description="Pinned versions.")
    output: str | None = Field(default=None, description="The run's output (capped).")
    output_truncated: bool = Field(default=False, description="Whether output was truncated.")
    usage: TokenUsage | None = Field(default=None, description="Token usage.")
    steps: int = Field(default=0, ge=0, description="Model turns taken.")
    tool_calls: int = Field(default=0, ge=0, description="Tool calls made.")
    review_items: list[ReviewItem] = Field(
        default_factory=list,
        description="What a person must decide while the run is AwaitingReview.",
    )
    skills: list[AgentSkillUsage] = Field(
        default_factory=list,
        description="Per agent: skills loaded, files read and scripts run (from the runner).",
    )
    job_recreations: int = Field(default=0, ge=0, description="How often a lost Job was recreated.")
    resumes: int = Field(default=0, ge=0, description="How often the run resumed after a review.")
    checkpoint_config_map: str | None = Field(
        default=None, description="The immutable checkpoint of the latest park."
    )
    checkpoint_sha256: str | None = Field(
        default=None,
        description="sha256 of that checkpoint as the runner reported it: checked before it "
        "is shown to a reviewer or mounted (TamperedObject).",
    )
    decisions: list[RecordedDecision] = Field(
        default_factory=list, description="Every review decision the run went on with."
    )
    effects: list[RunEffect] = Field(
        default_factory=list,
        description="What the run did to shared platform state (schedule, agent_message, "
        "mailbox_send), each materialized once by the operator.",
    )
    recording: list[RecordedCall] = Field(
        default_factory=list,
        max_length=MAX_RECORDED_CALLS,
        description="Its tool calls that do not only read, with what each returned (secret "
        "values scrubbed), in order: what an evaluation replaying this Run answers them with.",
    )
    recorded_stages: list[str] = Field(
        default_factory=list,
        description="sha256 of each stage's recording line merged into recording (once each).",
    )
    recording_incomplete: bool = Field(
        default=False,
        description="Some of its calls are not in recording (it would have grown past its "
        "limit): a replay refuses those.",
    )
    gates: list[GateStatus] = Field(
        default_factory=list,
        description="Funnel gates: attempts, the judge's last score, the approval's state.",
    )
    spend_reservations: list[str] = Field(
        default_factory=list,
        description="SpendQuotas its cap is reserved on (cleared once its spend is settled).",
    )
    audit: list[AuditChainHead] = Field(
        default_factory=list,
        description="The head of each pod's hash-chained audit log, oldest first (a resumed "
        "Run has one chain per pod; checked by kubectl swarmkit logs --verify).",
    )
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


__all__ = [
    "AgentSkillUsage",
    "AuditChainHead",
    "GateStatus",
    "PinnedVersions",
    "RecordedDecision",
    "ReviewItem",
    "RunSpec",
    "RunStatus",
    "SkillFileRead",
    "SkillScriptRuns",
    "TokenUsage",
]
