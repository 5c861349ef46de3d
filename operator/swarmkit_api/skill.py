"""The Skill resource: SwarmKit's only extension primitive, plus SKILL.md content.

A Skill carries the SwarmKit skill anatomy (category, implementation, inputs/outputs,
constraints, iam, provenance, audit), the SKILL.md-style ``instructions`` body and any
bundled ``files``. Bundled scripts are content, never permission: execution approval lives
in the operator's own configuration.
"""

from __future__ import annotations

import posixpath
from datetime import datetime
from typing import Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import (
    KEBAB,
    Conditions,
    ConfigMapKeyRef,
    Effects,
    JsonSchema,
    PermissionTier,
)

SkillCategory = Literal["capability", "decision", "coordination", "persistence"]
ImplementationType = Literal["mcp_tool", "llm_prompt", "composed", "command", "agent"]
AuthoredBy = Literal[
    "human",
    "authored_by_swarm",
    "derived_from_template",
    "imported_from_registry",
    "vendor_published",
]
#: The annotation a reviewer sets to record the human review of a swarm-authored skill.
REVIEWED_ANNOTATION = "swarmkit.dev/reviewed-by"
#: Largest total content (spec + files) of one Skill, in bytes: rendered over as many
#: ConfigMaps of at most 1 MiB as it needs (a revision's parts, mounted together).
MAX_SKILL_BYTES = 16 * 1024 * 1024
#: Longest ``description`` (the Agent Skills specification's limit; level 1 of every grant).
MAX_DESCRIPTION_CHARS = 1024


def _is_safe_relative_path(path: str) -> bool:
    if not path or path.startswith("/") or "\\" in path:
        return False
    norm = posixpath.normpath(path)
    return norm == path and not norm.startswith("..") and norm != "."


class Implementation(ApiModel):
    """How the skill is carried out. ``type`` selects which of the other fields apply."""

    cel_rules = (
        CelRule(
            rule="self.type != 'mcp_tool' || (has(self.server) && has(self.tool))",
            message="mcp_tool implementations need server and tool",
            field_path=".server",
            check=lambda m: m.type != "mcp_tool" or (m.server is not None and m.tool is not None),
        ),
        CelRule(
            rule="self.type != 'llm_prompt' || has(self.prompt)",
            message="llm_prompt implementations need prompt",
            field_path=".prompt",
            check=lambda m: m.type != "llm_prompt" or m.prompt is not None,
        ),
        CelRule(
            rule="self.type != 'composed' || (has(self.composes) && size(self.composes) > 0)",
            message="composed implementations need a non-empty composes list",
            field_path=".composes",
            check=lambda m: m.type != "composed" or bool(m.composes),
        ),
        CelRule(
            rule="self.type != 'command' || (has(self.pack) && has(self.command))",
            message="command implementations need pack and command",
            field_path=".pack",
            check=lambda m: m.type != "command" or (m.pack is not None and m.command is not None),
        ),
        CelRule(
            rule="self.type != 'agent' || (has(self.topology) != has(self.cardUrl))",
            message="agent implementations need exactly one of topology or cardUrl",
            field_path=".topology",
            check=lambda m: m.type != "agent" or ((m.topology is None) != (m.card_url is None)),
        ),
        CelRule(
            rule="!has(self.skillId) || has(self.cardUrl)",
            message="skillId is only valid with cardUrl (remote agents)",
            field_path=".skillId",
            check=lambda m: m.skill_id is None or m.card_url is not None,
        ),
    )

    type: ImplementationType = Field(
        description="mcp_tool | llm_prompt | composed | command | agent."
    )
    # mcp_tool
    server: str | None = Field(
        default=None, description="mcp_tool: id of an MCP server declared in the Workspace."
    )
    tool: str | None = Field(default=None, description="mcp_tool: tool name on that server.")
    arguments: dict[str, object] | None = Field(
        default=None,
        description="mcp_tool: fixed arguments merged over the model's arguments.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    # llm_prompt
    prompt: str | None = Field(default=None, description="llm_prompt: the skill's own prompt.")
    model: str | None = Field(
        default=None, description="llm_prompt: model override ('provider/model' or 'model')."
    )
    # composed
    composes: list[str] | None = Field(
        default=None, description="composed: names of the skills to run, in order."
    )
    strategy: Literal["sequential", "parallel-consensus"] | None = Field(
        default=None,
        description="composed: sequential (default) or parallel-consensus (majority verdict).",
    )
    # command
    pack: str | None = Field(default=None, description="command: id of a Workspace command pack.")
    command: str | None = Field(default=None, description="command: command name in that pack.")
    # agent
    topology: str | None = Field(
        default=None, description="agent: a Topology in this namespace, run as a child run."
    )
    card_url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="agent: URL of a remote A2A Agent Card (http or https).",
    )
    skill_id: str | None = Field(
        default=None, description="agent (remote): which card skill; omitted = the first."
    )
    credentials_ref: str | None = Field(
        default=None,
        description="agent (remote): a Workspace credentials entry, sent as a bearer token.",
    )
    timeout_s: int | None = Field(
        default=None, ge=1, le=86400, description="agent: seconds before the call is cancelled."
    )
    on_unanswerable: Literal["agent", "relay", "abort"] | None = Field(
        default=None,
        description="agent: who answers an input-required question (default agent).",
    )
    max_agent_answers: int | None = Field(
        default=None, ge=0, le=100, description="agent: answers per task before relaying."
    )
    permission: PermissionTier | None = Field(
        default=None, description="Permission tier of this skill's call (default cautious)."
    )
    effects: Effects | None = Field(
        default=None, description="read | write | unknown; readonly tiers allow only read."
    )


class RetryPolicy(ApiModel):
    """How often and how a failed skill call is retried."""

    attempts: int = Field(default=0, ge=0, le=10, description="Extra attempts after the first.")
    backoff: Literal["exponential", "linear", "none"] = Field(
        default="exponential", description="Delay growth between attempts."
    )


class Constraints(ApiModel):
    """Runtime limits of a skill call and what happens when it fails."""

    max_latency_ms: int | None = Field(
        default=None, ge=1, description="Latency budget; exceeding it is audited as a violation."
    )
    timeout_seconds: int | None = Field(
        default=None, ge=1, le=86400, description="Hard timeout of one call."
    )
    retry: RetryPolicy | None = Field(default=None, description="Retry policy.")
    on_failure: Literal["escalate_to_human", "fail", "retry", "fallback"] | None = Field(
        default=None,
        description="After retries: fail the run, retry, fall back to the agent, or escalate.",
    )
    output_retries: int | None = Field(
        default=None,
        ge=0,
        le=10,
        description="Decision skills: re-asks after a schema violation (default 2).",
    )
    review_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=2592000,
        description="How long a review this skill opens (escalation, approval, relayed "
        "question) waits; defaults to the Workspace's governance.reviewTimeoutSeconds.",
    )
    on_review_timeout: Literal["fail", "fallback"] | None = Field(
        default=None,
        description="No answer in time: fail the run (default) or hand the agent a tool error.",
    )


class Iam(ApiModel):
    """Identity requirements of the skill."""

    required_scopes: list[str] = Field(
        default_factory=list, description="Scopes the calling agent must hold."
    )


class Provenance(ApiModel):
    """Who authored the skill; trust defaults depend on it."""

    authored_by: AuthoredBy = Field(
        description="human | authored_by_swarm | derived_from_template | "
        "imported_from_registry | vendor_published."
    )
    version: str = Field(min_length=1, description="The skill's own version, e.g. 1.0.0.")


class AuditPolicy(ApiModel):
    """What of a call is written to the audit stream."""

    log_inputs: bool = Field(default=True, description="Record call inputs.")
    log_outputs: bool = Field(default=True, description="Record call outputs.")
    redact: list[str] = Field(
        default_factory=list,
        description="Dotted paths (e.g. input.password) replaced by [REDACTED] in audit lines.",
    )


class SkillFile(ApiModel):
    """A file bundled with the skill: inline content or a key of a ConfigMap."""

    cel_rules = (
        CelRule(
            rule="has(self.content) != has(self.configMapRef)",
            message="exactly one of content or configMapRef must be set",
            check=lambda m: (m.content is None) != (m.config_map_ref is None),
        ),
        CelRule(
            rule="!self.path.startsWith('/') && !self.path.startsWith('../') && "
            "!self.path.contains('/../') && !self.path.endsWith('/..') && self.path != '..'",
            message="path must be relative and stay inside the skill (no leading / or ..)",
            field_path=".path",
            check=lambda m: _is_safe_relative_path(m.path),
        ),
    )

    path: str = Field(
        min_length=1,
        max_length=255,
        pattern=r"^[A-Za-z0-9._/-]+$",
        description="Path relative to the skill directory, e.g. scripts/classify.py.",
    )
    content: str | None = Field(default=None, description="Inline file content (UTF-8).")
    config_map_ref: ConfigMapKeyRef | None = Field(
        default=None, description="Take the content from this ConfigMap key instead."
    )
    executable: bool = Field(
        default=False,
        description="Marks the file as a script. Scripts under scripts/ are scripts anyway. "
        "Being a script is not permission to run it.",
    )

    @property
    def is_script(self) -> bool:
        return self.executable or self.path.startswith("scripts/")


def _decision_has_reasoning(spec: SkillSpec) -> bool:
    if spec.category != "decision":
        return True
    props = spec.outputs.properties if spec.outputs is not None else None
    return props is not None and "reasoning" in props


class SkillSpec(ApiModel):
    """A SwarmKit skill with SKILL.md-style instructions and bundled files."""

    cel_rules = (
        CelRule(
            rule="self.category != 'decision' || (has(self.outputs) && "
            "has(self.outputs.properties) && 'reasoning' in self.outputs.properties)",
            message="decision skills must declare outputs (JSON Schema) with a reasoning property",
            field_path=".outputs",
            check=_decision_has_reasoning,
        ),
        CelRule(
            rule="!has(self.files) || "
            "self.files.all(f, self.files.exists_one(g, g.path == f.path))",
            message="file paths must be unique",
            field_path=".files",
            check=lambda m: len({f.path for f in m.files}) == len(m.files),
        ),
    )

    display_name: str | None = Field(
        default=None, max_length=200, description="Human-readable name, e.g. Code Quality Review."
    )
    description: str = Field(
        min_length=1,
        max_length=MAX_DESCRIPTION_CHARS,
        description="Written like a router: when to use this skill. Shown to every granted "
        "agent (level 1 of progressive disclosure).",
    )
    category: Literal["capability", "decision", "coordination", "persistence"] = Field(
        description="capability | decision | coordination | persistence."
    )
    implementation: Implementation | None = Field(
        default=None,
        description="How the skill runs. Omit for a pure instruction skill (SKILL.md only).",
    )
    inputs: JsonSchema | None = Field(default=None, description="JSON Schema of the inputs.")
    outputs: JsonSchema | None = Field(
        default=None, description="JSON Schema of the output; required for decision skills."
    )
    constraints: Constraints | None = Field(default=None, description="Limits and failure policy.")
    iam: Iam | None = Field(default=None, description="Required scopes.")
    provenance: Provenance = Field(description="Who authored the skill and its version.")
    audit: AuditPolicy | None = Field(default=None, description="Audit logging of calls.")
    instructions: str = Field(
        default="",
        description="The SKILL.md body: full instructions, loaded on demand (level 2).",
    )
    files: list[SkillFile] = Field(
        default_factory=list,
        max_length=200,
        description="Bundled files (reference docs, templates, scripts), read on demand (level 3).",
    )


class ScriptStatus(ApiModel):
    """A bundled script, its hash and whether the operator approved it."""

    path: str = Field(description="Path of the script inside the skill.")
    sha256: str = Field(description="sha256 of the script content as rendered.")
    approved: bool = Field(description="Whether the script may be run.")
    reason: str = Field(
        default="",
        description="Approved, NotAllowListed, PinMismatch, ExecutionDisabled or "
        "DeniedByWorkspace.",
    )


class SkillGrants(ApiModel):
    """Which Agents grant the skill (directly, or through a composed skill running it)."""

    count: int = Field(default=0, ge=0, description="Agents granting it.")
    agents: list[str] = Field(default_factory=list, description="The first few of them, by name.")


class SkillUsage(ApiModel):
    """The skill's use, rolled up from finished Runs (kept across operator restarts in the
    operator's ConfigMap ``swarmkit-skill-library``, so Runs deleted since still count)."""

    runs_granted: int = Field(
        default=0, ge=0, description="Finished Runs whose agents were granted the skill."
    )
    runs_loaded: int = Field(
        default=0, ge=0, description="Finished Runs in which an agent loaded it (load_skill)."
    )
    load_rate: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="runsLoaded / runsGranted (none before the first Run granting it).",
    )
    script_runs: int = Field(default=0, ge=0, description="Runs of its bundled scripts.")
    script_failures: int = Field(
        default=0, ge=0, description="Script runs that exited non-zero or timed out."
    )
    last_loaded: datetime | None = Field(
        default=None, description="Completion time of the last Run that loaded it."
    )


class SkillStatus(ApiModel):
    """Observed state of a Skill."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    content_hash: str | None = Field(
        default=None, description="sha256 over the normalized spec and every file."
    )
    version: str | None = Field(default=None, description="Short content hash (12 hex).")
    rendered_config_map: str | None = Field(
        default=None, description="Name of the immutable ConfigMap holding the rendered skill."
    )
    scripts: list[ScriptStatus] = Field(default_factory=list, description="Bundled scripts.")
    granted_by: SkillGrants | None = Field(default=None, description="Agents granting it.")
    usage: SkillUsage | None = Field(default=None, description="Use in finished Runs.")
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


__all__ = [
    "KEBAB",
    "MAX_SKILL_BYTES",
    "REVIEWED_ANNOTATION",
    "AuthoredBy",
    "Constraints",
    "Implementation",
    "ScriptStatus",
    "SkillCategory",
    "SkillFile",
    "SkillGrants",
    "SkillSpec",
    "SkillStatus",
    "SkillUsage",
]
