"""The run bundle and the run result: the one contract between operator and runner.

The operator renders a :class:`RunBundle` into an immutable ConfigMap and mounts it, with
every pinned skill ConfigMap, into the Run's pod. The runner validates it with this same
model, runs, and writes a :class:`RunResult` (at most 4 KiB of JSON) to its termination
message, which the operator copies into the Run's status.

Secrets never appear in a bundle: credentials are referenced by Secret name and key, and
:func:`secret_env_name` tells both sides which environment variable carries each value.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import Field

from .agent import DEFAULT_GATEWAY_REVIEW_SECONDS, AgentSpec, GatewayToken
from .base import ApiModel
from .common import SecretKeyRef
from .egress import EgressPlan
from .funnel import FunnelSpec
from .genai_metrics import MAX_ENTRIES as MAX_GENAI_ENTRIES
from .genai_metrics import GenAiCallStats
from .replay import RecordedCall
from .run import AgentSkillUsage, AuditChainHead, TokenUsage
from .run import ReviewItem as ReviewItem  # re-exported: part of the result contract
from .skill import SkillSpec
from .topology import TopologySpec
from .workspace import Governance, WorkspaceSpec

BUNDLE_SCHEMA_VERSION = 1
#: Where the operator mounts the bundle and the skills in the runner's pod.
BUNDLE_MOUNT = "/etc/swarmkit/bundle"
BUNDLE_FILE = "bundle.json"
#: A Run's Job sets it to the sha256 of the bundle.json the operator wrote: the runner
#: refuses a mounted bundle with another digest (a ConfigMap re-created by someone else).
BUNDLE_SHA256_ENV = "SWARMKIT_BUNDLE_SHA256"
#: A resumed stage's Job: the sha256 the runner reported for the checkpoint it resumes
#: from (the Run's status.checkpointSha256); the runner refuses another file.
CHECKPOINT_SHA256_ENV = "SWARMKIT_CHECKPOINT_SHA256"
SKILLS_MOUNT = "/etc/swarmkit/skills"
SCRATCH_MOUNT = "/scratch"
TERMINATION_LOG = "/dev/termination-log"
#: Kubernetes caps a termination message at 4096 bytes.
MAX_RESULT_BYTES = 4096
#: Entries each list of an agent's skill usage keeps when the result must be summarised.
SUMMARY_ENTRIES = 3
#: Agents whose skill usage is kept when even the summary does not fit.
SUMMARY_AGENTS = 8
TRUNCATION_MARKER = "…[truncated]"

Outcome = Literal[
    "Succeeded",
    "Failed",
    "TimedOut",
    "LimitExceeded",
    "ValidationFailed",
    "AwaitingReview",
    "Cancelled",
    "Truncated",
    "BudgetExceeded",
    "HarnessFailed",
    "HarnessTimedOut",
    "HarnessAskedQuestion",
    "TamperedObject",
]


#: Env vars ``<prefix><n>`` of a served topology's pod hold its accepted bearer tokens (set
#: by the operator from ``spec.serve.auth.bearerTokens`` with ``secretKeyRef``).
SERVE_TOKEN_ENV_PREFIX = "SWARMKIT_SECRET_SERVE_TOKEN_"


def secret_env_name(ref: SecretKeyRef) -> str:
    """The env var the Job sets from ``ref`` (stable, valid, collision-resistant)."""
    digest = hashlib.sha256(f"{ref.name}/{ref.key}".encode()).hexdigest()[:10].upper()
    return f"SWARMKIT_SECRET_{digest}"


class ScriptPin(ApiModel):
    """A bundled script, its pinned hash and whether it may run."""

    path: str = Field(description="Path inside the skill.")
    sha256: str = Field(description="Pinned sha256; re-checked before every run.")
    approved: bool = Field(description="Approved by the operator and not denied here.")
    reason: str = Field(default="", description="Why (not) approved.")


class BundleSkill(ApiModel):
    """A skill exactly as pinned for the run."""

    name: str = Field(description="Skill name.")
    content_hash: str = Field(description="Content hash at render time.")
    spec: SkillSpec = Field(description="The skill spec (files' content lives on disk).")
    directory: str = Field(description="Absolute path of the skill's mounted files.")
    scripts: list[ScriptPin] = Field(default_factory=list, description="Script pins.")
    callable: bool = Field(default=True, description="False while provenance forbids calls.")
    blocked_reason: str = Field(default="", description="Why it is not callable.")
    reviewed: bool = Field(
        default=False,
        description="A reviewer recorded a human review (annotation swarmkit.dev/reviewed-by); "
        "this is the explicit approval a strict-tier skill needs to be called.",
    )
    synthesized_topology: str | None = Field(
        default=None, description="Set for topology-<name> skills synthesized by pack:workspace."
    )
    config_map: str | None = Field(
        default=None,
        description="The rendered skill ConfigMap its files are mounted from (None for "
        "synthesized skills); the operator re-mounts it when it recreates a lost Job.",
    )
    files_sha256: dict[str, str] = Field(
        default_factory=dict,
        description="sha256 of every file the pod mounts in the skill's directory (SKILL.md "
        "and each bundled file, by path), as the operator rendered them. The runner checks "
        "each before anything runs and refuses the run (TamperedObject, naming the skill and "
        "the file) on a difference: a skill ConfigMap replaced after the operator checked it. "
        "Empty in a bundle written before this field: nothing is checked then.",
    )


class BundleAgent(ApiModel):
    """An agent exactly as pinned for the run."""

    name: str = Field(description="Agent name.")
    version: str = Field(description="Agent version.")
    spec: AgentSpec = Field(description="The agent spec.")
    skills: list[str] = Field(
        default_factory=list, description="Resolved skill grants (packs expanded)."
    )
    commands: list[str] = Field(
        default_factory=list, description="pack:<id> grants as '<pack>/<command>' (reads only)."
    )
    permissions: list[str] = Field(
        default_factory=list, description="Effective permissions (bundle + inline)."
    )


class BundleTopology(ApiModel):
    """A topology reachable from the run, with its version."""

    name: str = Field(description="Topology name.")
    version: str = Field(description="Topology version.")
    spec: TopologySpec = Field(description="The topology spec.")
    funnels: dict[str, FunnelSpec] = Field(
        default_factory=dict, description="The Funnels its nodes name, as pinned."
    )


class RunInfo(ApiModel):
    """Identity and input of the run."""

    name: str = Field(description="Run name.")
    namespace: str = Field(description="Namespace.")
    uid: str = Field(description="Run uid; the run id in audit lines.")
    correlation_id: str = Field(description="Correlation id (defaults to the uid).")
    input: str = Field(default="", description="Input for the root agent.")
    timeout_seconds: int = Field(description="Deadline of the whole run.")
    max_cost: str | None = Field(
        default=None, description="Spend cap (Run spec.maxCost or governance.maxCostPerRun)."
    )
    max_tokens: int | None = Field(default=None, description="The Run's own token cap.")
    read_only: bool = Field(
        default=False, description="Every tool call that does not only read is refused."
    )
    replay: list[RecordedCall] | None = Field(
        default=None,
        description="Replay mode (a read-only Run replaying a recorded one): every tool call "
        "that does not only read gets its recorded answer (matched by tool and "
        "arguments, in order) and is never run; one with none is refused "
        "(swarmkit_api.replay).",
    )


class BundleGateway(ApiModel):
    """Set when the bundle is served by ``swarmkit_runner gateway`` instead of run once."""

    port: int = Field(description="Port of the MCP endpoint.")
    tokens: list[GatewayToken] = Field(
        description="Accepted bearer tokens (Secret refs; values come from the env)."
    )
    review_timeout_seconds: int = Field(
        default=DEFAULT_GATEWAY_REVIEW_SECONDS,
        description="How long a call waits for a person's decision on its Review.",
    )


class RunBundle(ApiModel):
    """Everything the runner needs, validated on both sides."""

    schema_version: Literal[1] = Field(default=1, description="Bundle schema version.")
    run: RunInfo = Field(description="The run.")
    target_kind: Literal["Topology", "Agent"] = Field(description="What the run executes.")
    target: str = Field(description="Name of the topology or agent.")
    topologies: dict[str, BundleTopology] = Field(
        default_factory=dict, description="The target topology and every reachable one."
    )
    agents: dict[str, BundleAgent] = Field(description="Every agent the run may execute.")
    skills: dict[str, BundleSkill] = Field(default_factory=dict, description="Pinned skills.")
    workspace: WorkspaceSpec = Field(description="Workspace policy (Secret refs only).")
    workspace_name: str = Field(description="Workspace name.")
    allow_script_execution: bool = Field(
        default=False, description="Operator setting AND workspace setting."
    )
    governance: Governance = Field(description="Effective limits.")
    flow_data_dir: str | None = Field(default=None, description="Mounted flow data files.")
    flow_data_sha256: dict[str, str] = Field(
        default_factory=dict,
        description="sha256 of each flow data file mounted under flowDataDir (by path), as "
        "the operator copied it into the bundle ConfigMap beside bundle.json. The runner "
        "checks each before anything runs (TamperedObject naming the file): only bundle.json "
        "is covered by the Job's SWARMKIT_BUNDLE_SHA256.",
    )
    gateway: BundleGateway | None = Field(
        default=None, description="The MCP gateway settings (gateway bundles only)."
    )
    egress: EgressPlan | None = Field(
        default=None,
        description="Where the runner may connect (None: egress policy none, no check).",
    )

    def to_json(self) -> str:
        # UTF-8 as it is: escaping non-ASCII as \uXXXX would take 6 bytes a character and
        # let an input inside the CRD's limit overflow the ConfigMap.
        return json.dumps(self.wire(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def summarise_skills(
    usage: list[AgentSkillUsage], entries: int, agents: int | None = None
) -> list[AgentSkillUsage]:
    """``usage`` with each list cut to its first ``entries`` (counts stay exact) and, when
    ``agents`` is set, only the first ``agents`` agents."""
    out = []
    for item in usage[:agents] if agents is not None else usage:
        cut = (
            len(item.loaded) > entries
            or len(item.files_read) > entries
            or len(item.scripts) > entries
        )
        if not cut:
            out.append(item)
            continue
        out.append(
            item.model_copy(
                update={
                    "loaded": item.loaded[:entries],
                    "files_read": item.files_read[:entries],
                    "scripts": item.scripts[:entries],
                    "truncated": True,
                }
            )
        )
    return out


class RunResult(ApiModel):
    """What the runner reports (its termination message)."""

    outcome: Outcome = Field(description="How the run ended.")
    message: str = Field(default="", description="One-line reason.")
    output: str = Field(default="", description="The root agent's final answer (capped).")
    output_truncated: bool = Field(default=False, description="Output was cut.")
    usage: TokenUsage = Field(default_factory=TokenUsage, description="Tokens used.")
    steps: int = Field(default=0, description="Model turns.")
    tool_calls: int = Field(default=0, description="Tool calls.")
    review_items: list[ReviewItem] = Field(default_factory=list, description="Pending reviews.")
    skills: list[AgentSkillUsage] = Field(
        default_factory=list,
        description="Per agent that used a skill: skills loaded, files read, scripts run.",
    )
    checkpoint_sha256: str | None = Field(
        default=None,
        description="AwaitingReview: sha256 of the checkpoint line printed on stdout (the "
        "operator stores only a checkpoint that matches it).",
    )
    outbox_sha256: str | None = Field(
        default=None,
        description="sha256 of the outbox line printed on stdout: the effects recorded in "
        "this stage (swarmkit_api.effects).",
    )
    recording_sha256: str | None = Field(
        default=None,
        description="sha256 of the recording line printed on stdout: this stage's tool calls "
        "above the read tier and their answers (swarmkit_api.replay).",
    )
    audit: AuditChainHead | None = Field(
        default=None,
        description="The head of this pod's hash-chained audit log (swarmkit_api.audit_chain).",
    )
    genai: list[GenAiCallStats] = Field(
        default_factory=list,
        max_length=MAX_GENAI_ENTRIES,
        description="This stage's model calls as GenAI client metric buckets "
        "(swarmkit_api.genai_metrics): durations and tokens, no content.",
    )

    def to_termination_message(self, max_bytes: int = MAX_RESULT_BYTES) -> str:
        """Compact JSON of at most ``max_bytes`` bytes.

        When the whole result does not fit, the skill usage is summarised first (every count
        kept, each list cut to its first :data:`SUMMARY_ENTRIES` names), then the output is
        cut with a marker (review items dropped); if even an empty output leaves no room,
        the lists are dropped, then all but the first :data:`SUMMARY_AGENTS` agents, and
        last the GenAI metric buckets.
        """
        text = self._dump(self)
        if len(text.encode()) <= max_bytes:
            return text
        summary = summarise_skills(self.skills, SUMMARY_ENTRIES)
        shorter = self.model_copy(update={"skills": summary})
        text = self._dump(shorter)
        if len(text.encode()) <= max_bytes:
            return text
        best = ""
        for skills in (
            summary,
            summarise_skills(self.skills, 0),
            summarise_skills(self.skills, 0, SUMMARY_AGENTS),
            [],
        ):
            best = self._fit_output(self.model_copy(update={"skills": skills}), max_bytes)
            if len(best.encode()) <= max_bytes:
                return best
        return self._fit_output(self.model_copy(update={"skills": [], "genai": []}), max_bytes)

    def _fit_output(self, result: RunResult, max_bytes: int) -> str:
        """``result`` with the longest output prefix that fits (possibly none)."""
        result = result.model_copy(update={"output_truncated": True, "review_items": []})
        output = self.output
        lo, hi = 0, len(output)
        best = self._dump(result.model_copy(update={"output": TRUNCATION_MARKER, "message": ""}))
        while lo <= hi:  # binary search for the longest prefix that fits
            mid = (lo + hi) // 2
            candidate = self._dump(
                result.model_copy(update={"output": output[:mid] + TRUNCATION_MARKER})
            )
            if len(candidate.encode()) <= max_bytes:
                best, lo = candidate, mid + 1
            else:
                hi = mid - 1
        return best

    @staticmethod
    def _dump(result: RunResult) -> str:
        return json.dumps(result.wire(), separators=(",", ":"), ensure_ascii=False)
