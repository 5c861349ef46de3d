"""The Agent resource: a model, a system prompt and exactly what it may use (default-deny).

An agent sees only its granted skills (``skills``, including ``pack:`` grants), its listed
``tools``, enabled ``nativeTools``, ``read_flow_data`` for ``flowDataAccess`` files, and the
delegate tools of its topology children. Its ``status.version`` folds in the content hash of
every granted skill.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from . import model_rules
from .base import ApiModel, CelRule
from .common import (
    BoundedJson,
    Conditions,
    JsonSchema,
    LocalObjectReference,
    ResourceRequirements,
    SecretKeyRef,
)
from .promotion import PromotionSpec, PromotionStatus

GRANT_PATTERN = r"^(pack:[a-z0-9]([-a-z0-9]*[a-z0-9])?|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"
DEFAULT_WORKSPACE = "default"
TOKEN_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: Port the gateway listens on when ``spec.gateway.port`` is omitted.
DEFAULT_GATEWAY_PORT = 8080
Grant = Annotated[str, StringConstraints(pattern=GRANT_PATTERN, max_length=80)]


class ModelSelection(ApiModel):
    """Which model the agent talks to."""

    cel_rules = (
        CelRule(
            rule=f"!has(self.temperature) || !has(self.name) || "
            f"!self.name.matches('{model_rules.OPENAI_REASONING_PATTERN}')",
            message="OpenAI reasoning models (o-series, gpt-5) take only the default "
            "temperature: unset temperature",
            field_path=".temperature",
            check=lambda m: m.temperature is None or not model_rules.openai_reasoning(m.name),
        ),
        CelRule(
            rule=f"!has(self.temperature) || !has(self.name) || "
            f"!self.name.matches('{model_rules.CLAUDE_PATTERN}') || self.temperature <= 1.0",
            message="Claude models take a temperature from 0 to 1",
            field_path=".temperature",
            check=lambda m: (
                m.temperature is None or not model_rules.claude(m.name) or m.temperature <= 1
            ),
        ),
    )

    provider: str | None = Field(
        default=None, description="A Workspace modelProviders name; omitted = the first one."
    )
    name: str | None = Field(
        default=None, max_length=256, description="Model name; omitted = provider default."
    )
    max_tokens: int = Field(default=4096, ge=1, le=200000, description="Max output tokens/turn.")
    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="Sampling temperature (0-2; Claude models 0-1; not taken by anthropic "
        "providers or OpenAI reasoning models).",
    )
    max_continuations: int = Field(
        default=0,
        ge=0,
        le=10,
        description="A final answer cut off at maxTokens is continued this many times (one "
        "model turn each, the parts joined); past that the run fails as Truncated.",
    )


class NativeTools(ApiModel):
    """Host capabilities, all off by default. Enabling one is the whole grant."""

    bash: bool = Field(default=False, description="Run shell commands in the scratch dir.")
    web_search: bool = Field(
        default=False, description="Search the web (needs the Workspace searchProvider)."
    )
    file_io: bool = Field(default=False, description="Read/write files in the scratch dir.")


class ReplayToolCall(ApiModel):
    """A tool call the replay provider makes."""

    name: str = Field(min_length=1, description="Tool name as the agent sees it.")
    arguments: BoundedJson = Field(
        default_factory=dict,
        description="Tool arguments.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class ReplayUsage(ApiModel):
    """Tokens a scripted turn reports (spend tests and demos price them like a real call)."""

    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens (cached included).")
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    cached_input_tokens: int = Field(default=0, ge=0, description="Cached prompt tokens.")


class ReplayTurn(ApiModel):
    """One scripted model turn for the replay provider."""

    cel_rules = (
        CelRule(
            rule="has(self.text) || (has(self.toolCalls) && size(self.toolCalls) > 0)",
            message="a replay turn needs text or toolCalls",
            check=lambda m: m.text is not None or bool(m.tool_calls),
        ),
    )

    text: str | None = Field(default=None, description="Assistant text of the turn.")
    tool_calls: list[ReplayToolCall] = Field(
        default_factory=list, max_length=32, description="Tool calls of the turn."
    )
    usage: ReplayUsage | None = Field(
        default=None, description="Tokens the turn reports (as a model API would); none: 0."
    )


class GatewayToken(ApiModel):
    """One bearer token of the gateway: its identity and where its value lives."""

    name: str = Field(
        pattern=TOKEN_NAME_PATTERN,
        max_length=63,
        description="The identity recorded in the audit for calls made with this token.",
    )
    secret_key_ref: SecretKeyRef = Field(
        description="The Secret key holding the token (never copied; injected as env)."
    )


class GatewayAuth(ApiModel):
    """Who may call the gateway: bearer tokens, each with its own identity."""

    cel_rules = (
        CelRule(
            rule="self.tokens.all(t, self.tokens.exists_one(u, u.name == t.name))",
            message="token names must be unique (each is an identity in the audit)",
            field_path=".tokens",
            check=lambda m: len({t.name for t in m.tokens}) == len(m.tokens),
        ),
    )

    tokens: list[GatewayToken] = Field(
        min_length=1,
        max_length=32,
        description="Accepted bearer tokens; a request with any other token gets 401.",
    )


#: Default wait of a gateway call for a person (below the MCP Python SDK's 300 s read timeout).
DEFAULT_GATEWAY_REVIEW_SECONDS = 240


class GatewaySpec(ApiModel):
    """The agent's catalog served over MCP (streamable HTTP) to harnesses.

    The operator runs ``python -m swarmkit_runner gateway`` in a Deployment (+ Service)
    pinned to the agent's version; every call goes through the same pipeline and audit as
    in a Run.
    """

    cel_rules = (
        CelRule(
            rule="!has(self.enabled) || !self.enabled || has(self.auth)",
            message="an enabled gateway needs auth.tokens (it never serves without a token)",
            field_path=".auth",
            check=lambda m: not m.enabled or m.auth is not None,
        ),
    )

    enabled: bool = Field(default=False, description="Serve the agent's catalog over MCP.")
    replicas: int = Field(default=1, ge=0, le=20, description="Gateway pods.")
    port: int = Field(
        default=DEFAULT_GATEWAY_PORT,
        ge=1024,
        le=65535,
        description="Container port of the MCP endpoint (path /mcp).",
    )
    auth: GatewayAuth | None = Field(default=None, description="Bearer tokens (required).")
    resources: ResourceRequirements | None = Field(
        default=None, description="Gateway container resources (default: the Workspace's)."
    )
    review_timeout_seconds: int = Field(
        default=DEFAULT_GATEWAY_REVIEW_SECONDS,
        ge=5,
        le=3600,
        description="How long a call that needs a person (a strict tier, an escalation) "
        "waits for a decision on its Review before it fails and the Review expires (the "
        "skill's or Workspace's review timeout caps it). Keep it below your MCP client's "
        "request timeout (the Python SDK reads for 300 s).",
    )


class AgentSpec(ApiModel):
    """An agent: model, system prompt and grants."""

    cel_rules = (
        CelRule(
            rule="!has(self.skills) || self.skills.all(s, self.skills.exists_one(t, t == s))",
            message="skill grants must be unique",
            field_path=".skills",
            check=lambda m: len(set(m.skills)) == len(m.skills),
        ),
    )

    workspace_ref: LocalObjectReference | None = Field(
        default=None, description="The Workspace whose tools and policy apply (default: default)."
    )
    description: str = Field(default="", description="What the agent does.")
    model: ModelSelection | None = Field(default=None, description="Model selection.")
    system_prompt: str = Field(default="", description="The agent's system prompt (soul).")
    skills: list[Grant] = Field(
        default_factory=list,
        max_length=256,
        description="Granted skills by name, or pack:<command-pack> / pack:workspace.",
    )
    tools: list[str] = Field(
        default_factory=list,
        description="Tools by name: Workspace tools, MCP tools as <prefix>.<tool>, builtins.",
    )
    native_tools: NativeTools | None = Field(default=None, description="Host capabilities.")
    permissions_bundle: str | None = Field(
        default=None, description="A Workspace permissionBundles name."
    )
    permissions: list[str] = Field(
        default_factory=list, description="Permissions added on top of the bundle."
    )
    flow_data_access: list[str] = Field(
        default_factory=list, description="Workspace flowData paths this agent may read."
    )
    scopes: list[str] = Field(
        default_factory=list, description="IAM scopes held (checked against skills' iam)."
    )
    output_schema: JsonSchema | None = Field(
        default=None, description="JSON Schema the agent's final answer must match."
    )
    max_steps: int | None = Field(
        default=None, ge=1, le=1000, description="Model turns; capped by governance."
    )
    replay: list[ReplayTurn] = Field(
        default_factory=list,
        max_length=200,
        description="Scripted turns used when the model provider is of type replay.",
    )
    gateway: GatewaySpec | None = Field(
        default=None,
        description="Serve this agent's catalog over MCP to harnesses (not part of the "
        "agent's version: editing it never re-versions the agent).",
    )
    runtime_class_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        max_length=253,
        description="RuntimeClass of the pods that run this agent as the root (a Run of it "
        "or of a Topology rooted in it, its gateway); overrides the Workspace's "
        "runtime.runtimeClassName.",
    )
    promotion: PromotionSpec | None = Field(
        default=None,
        description="Promote a new version only once it passes an evaluation against the "
        "active one: until then Runs, Topologies and the gateway keep the active version "
        "(not part of the agent's version).",
    )

    @property
    def workspace_name(self) -> str:
        return self.workspace_ref.name if self.workspace_ref else DEFAULT_WORKSPACE


class ResolvedSkill(ApiModel):
    """A granted skill as resolved for the agent's version."""

    name: str = Field(description="Skill name.")
    content_hash: str = Field(description="The skill's content hash.")
    rendered_config_map: str = Field(description="The skill's rendered ConfigMap.")


class AgentStatus(ApiModel):
    """Observed state of an Agent."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    version: str | None = Field(
        default=None, description="sha256[:12] over the spec and every granted skill's content."
    )
    rendered_config_map: str | None = Field(default=None, description="Rendered ConfigMap.")
    rendered_sha256: str | None = Field(
        default=None,
        description="sha256 of the rendered ConfigMap's content: a Run uses a ConfigMap "
        "under that name only when its content has this digest (TamperedObject otherwise).",
    )
    resolved_skills: list[ResolvedSkill] = Field(
        default_factory=list, description="Granted skills found."
    )
    missing_skills: list[str] = Field(
        default_factory=list, description="Granted skills not found (inert until they appear)."
    )
    gateway_url: str | None = Field(
        default=None, description="In-cluster URL of the MCP gateway (spec.gateway)."
    )
    gateway_version: str | None = Field(
        default=None, description="The agent version the gateway serves."
    )
    created_uids: dict[str, str] = Field(
        default_factory=dict,
        description="<Kind>/<name> → uid of each gateway object the operator created "
        "(Deployment, Service, NetworkPolicy, ServiceAccount, Role, RoleBinding): an object "
        "under one of those names that is not the one recorded is never used (TamperedObject).",
    )
    promotion: PromotionStatus | None = Field(
        default=None, description="Active and candidate versions (spec.promotion)."
    )
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


__all__ = [
    "DEFAULT_GATEWAY_PORT",
    "DEFAULT_WORKSPACE",
    "GRANT_PATTERN",
    "AgentSpec",
    "AgentStatus",
    "GatewayAuth",
    "GatewaySpec",
    "GatewayToken",
    "ModelSelection",
    "NativeTools",
    "ReplayToolCall",
    "ReplayTurn",
    "ReplayUsage",
    "ResolvedSkill",
]
