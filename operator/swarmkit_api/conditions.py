"""Condition types and reasons: the one vocabulary of every ``status.conditions`` we write.

The operator writes these on the kinds' statuses, and the CLI, the web view and the CRDs'
printer columns read them: all of them name a type or a reason through a constant here,
never through a string literal of their own (``tests/unit/operator/test_condition_constants.py``
fails on a literal), so one rename cannot leave a reader behind.

Types are bare names (``READY``); reasons carry a ``REASON_`` prefix, because a reason may
spell the same word as a type (the Run's ``Succeeded`` condition with reason ``Succeeded``).
Each value is defined once; a reason several conditions use lives with the condition it was
made for and says where else it appears.
"""

from __future__ import annotations

from typing import Final

# --- Condition types -----------------------------------------------------------------------

#: Skill, Agent, Topology, Workspace: the object is usable (rendered, resolved).
READY: Final[str] = "Ready"
#: Skill, Agent, Topology, Workspace: the spec is valid (on its own and against what it names).
ACCEPTED: Final[str] = "Accepted"
#: Skill: every bundled script is approved for execution.
SCRIPTS_APPROVED: Final[str] = "ScriptsApproved"
#: Agent: every granted skill exists and is Ready.
SKILLS_RESOLVED: Final[str] = "SkillsResolved"
#: Agent (``spec.gateway``) and Topology (``spec.serve``): the served workload answers.
SERVING: Final[str] = "Serving"
#: Topology, Agent (``spec.promotion``): the current version is the active one. Unknown while
#: a candidate is evaluated or waits for a calibrated judge, False when its evaluation failed
#: (or was inconclusive and held).
PROMOTED: Final[str] = "Promoted"
#: Run: how the run went (Tekton's convention: Unknown while it runs, True/False at the end).
SUCCEEDED: Final[str] = "Succeeded"

# --- Accepted (Skill, Agent, Topology, Workspace); Ready mirrors a False one ---------------

REASON_VALID: Final[str] = "Valid"
#: The spec fails its schema (also SkillsResolved=Unknown of an invalid Agent).
REASON_INVALID: Final[str] = "Invalid"
#: An embedded JSON Schema (a Skill's inputs/outputs, a command's inputs, an Agent's
#: outputSchema, a Funnel's validate.schema), or one nested in it, breaks the metaschema.
REASON_INVALID_SCHEMA: Final[str] = "InvalidSchema"
#: The render would be over its size limit: an Agent's or Workspace's ConfigMap over the
#: apiserver's 1 MiB, a Skill over 16 MiB in all or with a file over one ConfigMap.
REASON_TOO_LARGE: Final[str] = "TooLarge"
#: Skill: the name is reserved for the skills ``pack:workspace`` synthesizes.
REASON_NAME_COLLISION: Final[str] = "NameCollision"
#: Workspace: two entries of one list share a name.
REASON_DUPLICATE_NAME: Final[str] = "DuplicateName"
#: Topology: the call graph has a cycle / nests too deep / mixes workspaces.
REASON_CYCLE: Final[str] = "Cycle"
REASON_DEPTH_EXCEEDED: Final[str] = "DepthExceeded"
REASON_WORKSPACE_MISMATCH: Final[str] = "WorkspaceMismatch"
#: Agent: a reference into its Workspace does not resolve.
REASON_UNKNOWN_PERMISSION_BUNDLE: Final[str] = "UnknownPermissionBundle"
REASON_UNKNOWN_TOOL: Final[str] = "UnknownTool"
REASON_NATIVE_TOOL_UNAVAILABLE: Final[str] = "NativeToolUnavailable"
REASON_UNKNOWN_MODEL_PROVIDER: Final[str] = "UnknownModelProvider"
REASON_UNSUPPORTED_MODEL_SETTING: Final[str] = "UnsupportedModelSetting"
REASON_UNKNOWN_FLOW_DATA: Final[str] = "UnknownFlowData"
REASON_UNKNOWN_COMMAND_PACK: Final[str] = "UnknownCommandPack"
#: Agent: a granted Skill would send a Workspace credential to a host its `allowedHosts`
#: does not list (or names a credential the Workspace does not declare).
REASON_CREDENTIAL_NOT_ALLOWED: Final[str] = "CredentialNotAllowed"

# --- Ready (Skill, Agent, Topology, Workspace) ---------------------------------------------

#: Skill, Agent, Workspace: rendered into its ConfigMap.
REASON_RENDERED: Final[str] = "Rendered"
#: Topology: every agent and child topology is Ready.
REASON_RESOLVED: Final[str] = "Resolved"
REASON_CONFIG_MAP_NOT_FOUND: Final[str] = "ConfigMapNotFound"
#: A referenced Secret (key) is missing (also Serving, for gateway and serve tokens).
REASON_SECRET_NOT_FOUND: Final[str] = "SecretNotFound"
REASON_WORKSPACE_NOT_FOUND: Final[str] = "WorkspaceNotFound"
REASON_WORKSPACE_NOT_READY: Final[str] = "WorkspaceNotReady"
REASON_AGENT_NOT_FOUND: Final[str] = "AgentNotFound"
#: Topology: a node's Funnel does not exist / is unusable (invalid, judge not granted, ...).
REASON_FUNNEL_NOT_FOUND: Final[str] = "FunnelNotFound"
REASON_FUNNEL_INVALID: Final[str] = "FunnelInvalid"
#: Serving (Topology serve, Agent gateway): a funnel-gated node is reachable; its approval
#: needs a Run to park.
REASON_FUNNEL_NOT_SERVABLE: Final[str] = "FunnelNotServable"
#: Funnel (Ready=False): no set of the listed users can satisfy its approval.
REASON_QUORUM_UNREACHABLE: Final[str] = "QuorumUnreachable"
#: A funnel's reviewer agent holds a skill or tool that is not read-only (it names which).
REASON_REVIEWER_NOT_READ_ONLY: Final[str] = "ReviewerNotReadOnly"
REASON_AGENT_NOT_READY: Final[str] = "AgentNotReady"
REASON_CHILD_TOPOLOGY_NOT_FOUND: Final[str] = "ChildTopologyNotFound"
REASON_CHILD_TOPOLOGY_NOT_READY: Final[str] = "ChildTopologyNotReady"

# --- SkillsResolved (Agent) ----------------------------------------------------------------

REASON_ALL_RESOLVED: Final[str] = "AllResolved"
#: Also a Funnel's Ready=False while its judge skill does not exist.
REASON_SKILL_NOT_FOUND: Final[str] = "SkillNotFound"
REASON_SKILL_NOT_READY: Final[str] = "SkillNotReady"

# --- ScriptsApproved (Skill); also each ``status.scripts[].reason`` and bundle script pin ---

REASON_NO_SCRIPTS: Final[str] = "NoScripts"
REASON_APPROVED: Final[str] = "Approved"
#: Unknown until the skill renders (nothing to check yet). Also an Agent's SkillsResolved
#: while a ConfigMap bearing its render's name is not the render (Ready says which).
REASON_NOT_RENDERED: Final[str] = "NotRendered"
REASON_PIN_MISMATCH: Final[str] = "PinMismatch"
REASON_EXECUTION_DISABLED: Final[str] = "ExecutionDisabled"
REASON_NOT_ALLOW_LISTED: Final[str] = "NotAllowListed"
#: Per script only: the Workspace narrows what the operator approved.
REASON_DENIED_BY_WORKSPACE: Final[str] = "DeniedByWorkspace"
#: Per script only (bundle pins): the Skill's own status refused it without a reason.
REASON_NOT_APPROVED: Final[str] = "NotApproved"

# --- Serving (Agent gateway, Topology serve) -----------------------------------------------

#: Every replica serves the current version (the reason spells the type).
REASON_SERVING: Final[str] = "Serving"
REASON_ROLLING_OUT: Final[str] = "RollingOut"
#: Topology: an older version keeps serving while the current one cannot roll out.
REASON_STALE: Final[str] = "Stale"
REASON_SCALED_TO_ZERO: Final[str] = "ScaledToZero"
REASON_NO_READY_REPLICAS: Final[str] = "NoReadyReplicas"
#: Topology: ``spec.serve`` was removed / does not validate.
REASON_NOT_SERVED: Final[str] = "NotServed"
REASON_INVALID_SERVE_SPEC: Final[str] = "InvalidServeSpec"
#: Agent gateway: Deployment being created / no replica ready yet / the agent's run target
#: is not resolvable yet / ``spec.gateway`` turned off.
REASON_CREATING: Final[str] = "Creating"
REASON_STARTING: Final[str] = "Starting"
REASON_WAITING: Final[str] = "Waiting"
REASON_DISABLED: Final[str] = "Disabled"

# --- Promoted (Topology, Agent with spec.promotion) ------------------------------------------

#: The current version is the active one: it passed its evaluation (or is the first one).
REASON_PROMOTED: Final[str] = "Promoted"
#: An EvalRun of the candidate against the active version is running.
REASON_EVALUATING: Final[str] = "Evaluating"
#: The candidate's evaluation failed: it stays unpromoted until the spec changes.
REASON_EVALUATION_FAILED: Final[str] = "EvaluationFailed"
#: Inconclusive with ``onInconclusive: hold`` (the candidate stays unpromoted). With
#: ``review`` it is Unknown ``AwaitingReview`` (the Run's reason) until a person decides.
REASON_INCONCLUSIVE: Final[str] = "Inconclusive"
#: A person rejected an inconclusive candidate in its Review.
REASON_REJECTED: Final[str] = "Rejected"
#: Promoted past its evaluation by ``kubectl swarmkit promote --force`` (message names who).
REASON_FORCED: Final[str] = "Forced"
#: Also Promoted=False: an EvalSet of ``spec.promotion.evalSets`` does not exist (the
#: EvalRun's ``REASON_EVAL_SET_NOT_FOUND``, below). Also Promoted=Unknown: the candidate waits
#: for a calibrated judge, with its EvalRun's ``REASON_JUDGE_UNCALIBRATED`` or
#: ``REASON_TOO_FEW_LABELS`` (below), and is evaluated again when its EvalSet's calibration
#: changes.

# --- Succeeded (Run); the table in swarmkit_operator/builders/run_status.py says when -------

#: Also Serving (Topology): the Deployment is not created yet.
REASON_PENDING: Final[str] = "Pending"
REASON_RUNNING: Final[str] = "Running"
REASON_JOB_LOST: Final[str] = "JobLost"
#: An object the run uses (bundle, checkpoint) bears its name but not the content, owner or
#: digest the operator recorded when it wrote it: never used (the message names it); or a
#: skill file the runner finds mounted with another sha256 than its bundle records (the
#: message names the skill, the file and the ConfigMap; nothing ran). Also
#: Skill, Agent and Workspace Ready=False: a ConfigMap bearing its render's name is not the
#: render. Also Serving (Topology serve, Agent gateway), and for a Job, Deployment, Service or
#: NetworkPolicy under a name the operator derives that it did not make for that owner.
REASON_TAMPERED_OBJECT: Final[str] = "TamperedObject"
#: Something the run pinned (its bundle, a skill revision, its checkpoint) is gone.
REASON_PINNED_REVISION_MISSING: Final[str] = "PinnedRevisionMissing"
#: A Run whose spec.startAfter is still ahead (created by the schedule tool).
REASON_SCHEDULED: Final[str] = "Scheduled"
REASON_AWAITING_REVIEW: Final[str] = "AwaitingReview"
REASON_RESUMED: Final[str] = "Resumed"
REASON_SUCCEEDED: Final[str] = "Succeeded"
REASON_FAILED: Final[str] = "Failed"
REASON_TIMED_OUT: Final[str] = "TimedOut"
REASON_LIMIT_EXCEEDED: Final[str] = "LimitExceeded"
REASON_CANCELLED: Final[str] = "Cancelled"
#: An answer cut at the token limit (past its continuations, or inside a tool call).
REASON_TRUNCATED: Final[str] = "Truncated"
REASON_VALIDATION_FAILED: Final[str] = "ValidationFailed"
#: The run's spend cap (maxCost / maxTokens) would be crossed by its next model call.
REASON_BUDGET_EXCEEDED: Final[str] = "BudgetExceeded"
#: A Topology harness node its harness cannot run: its provider speaks another wire format,
#: or it needs a capability the harness's conformance test has not shown.
REASON_HARNESS_UNSUPPORTED: Final[str] = "HarnessUnsupported"
#: A harness node's CLI exited non-zero, ended without a final answer or its events did not map.
REASON_HARNESS_FAILED: Final[str] = "HarnessFailed"
#: A harness node's CLI ran past the node's timeout and was killed.
REASON_HARNESS_TIMED_OUT: Final[str] = "HarnessTimedOut"
#: A harness node's CLI asked an interactive question (nobody at a terminal to answer it).
REASON_HARNESS_ASKED_QUESTION: Final[str] = "HarnessAskedQuestion"
#: Not started: a SpendQuota covering it cannot reserve its cap (the message names it).
REASON_BUDGET_EXHAUSTED: Final[str] = "BudgetExhausted"
#: Not started: a SpendQuota with onExhausted hold opened a Review of kind spend.
REASON_BUDGET_HOLD: Final[str] = "BudgetHold"

# --- SpendQuota conditions -------------------------------------------------------------------
#: True once use reaches the quota's warningPercent.
BUDGET_WARNING: Final[str] = "BudgetWarning"
#: True when the selector matches no Topology or Agent of the namespace.
SELECTOR_UNMATCHED: Final[str] = "SelectorUnmatched"
REASON_THRESHOLD_REACHED: Final[str] = "ThresholdReached"
#: A SpendQuota the operator has read and keeps current: Runs that start are held to it.
REASON_IN_FORCE: Final[str] = "InForce"
REASON_BELOW_THRESHOLD: Final[str] = "BelowThreshold"
REASON_NO_MATCH: Final[str] = "NoMatch"
REASON_MATCHED: Final[str] = "Matched"
REASON_POD_CREATION_FAILED: Final[str] = "PodCreationFailed"
REASON_IMAGE_PULL_FAILED: Final[str] = "ImagePullFailed"
#: The runtimeClassName its pods would run under names no RuntimeClass (Pending until one
#: appears; also Serving of a served Topology or a gateway Agent).
REASON_RUNTIME_CLASS_NOT_FOUND: Final[str] = "RuntimeClassNotFound"

# --- EvalRun (Succeeded: Unknown while it runs, True once it has a verdict) -------------------
#: Every case graded on every side: status.verdict holds Pass, Fail or Inconclusive.
REASON_EVALUATED: Final[str] = "Evaluated"
#: Unknown: its EvalSet does not exist (yet) / is not Ready (the message says why).
REASON_EVAL_SET_NOT_FOUND: Final[str] = "EvalSetNotFound"
REASON_EVAL_SET_NOT_READY: Final[str] = "EvalSetNotReady"
#: Unknown: a side's Topology or Agent does not exist or is not Ready yet.
REASON_TARGET_NOT_READY: Final[str] = "TargetNotReady"
#: A side's case Run pinned another version than the one asked for (that case is errored).
REASON_VERSION_UNAVAILABLE: Final[str] = "VersionUnavailable"
#: True, verdict Inconclusive: a judge's Cohen's kappa against the human labels is below its
#: graders' minKappa (the message names the judge, its kappa and the labels counted); the
#: promotion of a candidate it judged is then Promoted=Unknown with this reason.
REASON_JUDGE_UNCALIBRATED: Final[str] = "JudgeUncalibrated"
#: True, verdict Inconclusive: a gated judge gave a verdict on fewer labelled answers than
#: minLabels, or its kappa is undefined (people and judge gave every answer one verdict).
REASON_TOO_FEW_LABELS: Final[str] = "TooFewLabels"

__all__ = [
    "ACCEPTED",
    "BUDGET_WARNING",
    "PROMOTED",
    "READY",
    "REASON_AGENT_NOT_FOUND",
    "REASON_AGENT_NOT_READY",
    "REASON_ALL_RESOLVED",
    "REASON_APPROVED",
    "REASON_AWAITING_REVIEW",
    "REASON_BELOW_THRESHOLD",
    "REASON_BUDGET_EXCEEDED",
    "REASON_BUDGET_EXHAUSTED",
    "REASON_BUDGET_HOLD",
    "REASON_CANCELLED",
    "REASON_CHILD_TOPOLOGY_NOT_FOUND",
    "REASON_CHILD_TOPOLOGY_NOT_READY",
    "REASON_CONFIG_MAP_NOT_FOUND",
    "REASON_CREATING",
    "REASON_CREDENTIAL_NOT_ALLOWED",
    "REASON_CYCLE",
    "REASON_DENIED_BY_WORKSPACE",
    "REASON_DEPTH_EXCEEDED",
    "REASON_DISABLED",
    "REASON_DUPLICATE_NAME",
    "REASON_EVALUATED",
    "REASON_EVALUATING",
    "REASON_EVALUATION_FAILED",
    "REASON_EVAL_SET_NOT_FOUND",
    "REASON_EVAL_SET_NOT_READY",
    "REASON_EXECUTION_DISABLED",
    "REASON_FAILED",
    "REASON_FORCED",
    "REASON_FUNNEL_INVALID",
    "REASON_FUNNEL_NOT_FOUND",
    "REASON_FUNNEL_NOT_SERVABLE",
    "REASON_HARNESS_ASKED_QUESTION",
    "REASON_HARNESS_FAILED",
    "REASON_HARNESS_TIMED_OUT",
    "REASON_HARNESS_UNSUPPORTED",
    "REASON_IMAGE_PULL_FAILED",
    "REASON_INCONCLUSIVE",
    "REASON_INVALID",
    "REASON_INVALID_SCHEMA",
    "REASON_INVALID_SERVE_SPEC",
    "REASON_IN_FORCE",
    "REASON_JOB_LOST",
    "REASON_JUDGE_UNCALIBRATED",
    "REASON_LIMIT_EXCEEDED",
    "REASON_MATCHED",
    "REASON_NAME_COLLISION",
    "REASON_NATIVE_TOOL_UNAVAILABLE",
    "REASON_NOT_ALLOW_LISTED",
    "REASON_NOT_APPROVED",
    "REASON_NOT_RENDERED",
    "REASON_NOT_SERVED",
    "REASON_NO_MATCH",
    "REASON_NO_READY_REPLICAS",
    "REASON_NO_SCRIPTS",
    "REASON_PENDING",
    "REASON_PINNED_REVISION_MISSING",
    "REASON_PIN_MISMATCH",
    "REASON_POD_CREATION_FAILED",
    "REASON_PROMOTED",
    "REASON_QUORUM_UNREACHABLE",
    "REASON_REJECTED",
    "REASON_RENDERED",
    "REASON_RESOLVED",
    "REASON_RESUMED",
    "REASON_REVIEWER_NOT_READ_ONLY",
    "REASON_ROLLING_OUT",
    "REASON_RUNNING",
    "REASON_RUNTIME_CLASS_NOT_FOUND",
    "REASON_SCALED_TO_ZERO",
    "REASON_SCHEDULED",
    "REASON_SECRET_NOT_FOUND",
    "REASON_SERVING",
    "REASON_SKILL_NOT_FOUND",
    "REASON_SKILL_NOT_READY",
    "REASON_STALE",
    "REASON_STARTING",
    "REASON_SUCCEEDED",
    "REASON_TAMPERED_OBJECT",
    "REASON_TARGET_NOT_READY",
    "REASON_THRESHOLD_REACHED",
    "REASON_TIMED_OUT",
    "REASON_TOO_FEW_LABELS",
    "REASON_TOO_LARGE",
    "REASON_TRUNCATED",
    "REASON_UNKNOWN_COMMAND_PACK",
    "REASON_UNKNOWN_FLOW_DATA",
    "REASON_UNKNOWN_MODEL_PROVIDER",
    "REASON_UNKNOWN_PERMISSION_BUNDLE",
    "REASON_UNKNOWN_TOOL",
    "REASON_UNSUPPORTED_MODEL_SETTING",
    "REASON_VALID",
    "REASON_VALIDATION_FAILED",
    "REASON_VERSION_UNAVAILABLE",
    "REASON_WAITING",
    "REASON_WORKSPACE_MISMATCH",
    "REASON_WORKSPACE_NOT_FOUND",
    "REASON_WORKSPACE_NOT_READY",
    "SCRIPTS_APPROVED",
    "SELECTOR_UNMATCHED",
    "SERVING",
    "SKILLS_RESOLVED",
    "SUCCEEDED",
]
