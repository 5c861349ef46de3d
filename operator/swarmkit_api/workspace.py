"""The Workspace resource: everything agents share in one namespace.

MCP servers, HTTP/MCP/builtin tools (Swarm's tool classes), permission bundles, named
credentials (Secret references only, never literals), model providers, command packs,
flow reference data, runtime defaults for Run Jobs, and governance limits.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, StringConstraints

from .base import ApiModel, CelRule
from .common import (
    ENV_NAME,
    KEBAB,
    Conditions,
    ConfigMapKeyRef,
    Effects,
    EnvVar,
    HeaderFromSecret,
    JsonSchema,
    PermissionTier,
    ResourceRequirements,
    SecretKeyRef,
)
from .egress import EgressSpec
from .model_provider import AwsSettings, AzureSettings, ModelProvider
from .spend import MONEY_PATTERN
from .tracing import TracingSpec

#: Pack id reserved for the synthesized topology-<name> skills.
RESERVED_PACK_ID = "workspace"
#: Platform builtin tools and the permission that gates each (None = universal).
PLATFORM_BUILTINS: dict[str, str | None] = {
    "human_task_request": "human_task_request",
    "human_task_decide": "human_task_decide",
    "schedule": "schedule",
    "agent_message": None,
    "mailbox_send": None,
    # Let a Run this run started start past a SpendQuota hold (docs/concepts/budgets.md).
    "approve_spend": "approve_spend",
}


class ToolOverride(ApiModel):
    """Per-tool permission tier and effects on an MCP server."""

    tool: str = Field(min_length=1, description="Tool name on the server (without prefix).")
    permission: PermissionTier | None = Field(default=None, description="Tier for this tool.")
    effects: Effects | None = Field(default=None, description="read | write | unknown.")
    approved: bool = Field(
        default=False, description="Explicit approval; required to call a strict-tier tool."
    )


class McpServer(ApiModel):
    """An MCP server, declared once and shared by every agent that lists its tools."""

    cel_rules = (
        CelRule(
            rule="self.transport != 'stdio' || (has(self.command) && size(self.command) > 0)",
            message="stdio servers need command (argv list)",
            field_path=".command",
            check=lambda m: m.transport != "stdio" or bool(m.command),
        ),
        CelRule(
            rule="self.transport != 'http' || has(self.url)",
            message="http servers need url",
            field_path=".url",
            check=lambda m: m.transport != "http" or m.url is not None,
        ),
    )

    id: str = Field(pattern=KEBAB, max_length=63, description="Server id, lowercase-kebab.")
    transport: Literal["stdio", "http"] = Field(
        description="stdio (a subprocess) or http (streamable HTTP)."
    )
    command: list[str] | None = Field(
        default=None, description="stdio: argv of the server process (no shell)."
    )
    url: str | None = Field(
        default=None, pattern=r"^https?://", description="http: the server's MCP endpoint URL."
    )
    prefix: str | None = Field(
        default=None,
        pattern=r"^[a-z][a-z0-9_]*$",
        description="Tool namespace: tools are named <prefix>.<tool>. Defaults to the id "
        "with dashes turned into underscores.",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        description="stdio: the ONLY environment the server gets (values or Secret keys).",
    )
    headers: list[HeaderFromSecret] = Field(
        default_factory=list, description="http: headers whose values come from Secrets."
    )
    permission: PermissionTier = Field(
        default="cautious", description="Default tier of the server's tools."
    )
    tool_overrides: list[ToolOverride] = Field(
        default_factory=list, description="Per-tool tier, effects and approval."
    )
    timeout_seconds: int = Field(default=30, ge=1, le=3600, description="Per-call timeout.")
    retries: int = Field(default=1, ge=0, le=10, description="Retries of a failed call.")

    @property
    def tool_prefix(self) -> str:
        return self.prefix or self.id.replace("-", "_")


class HttpSpec(ApiModel):
    """Where and how an HTTP tool is called."""

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = Field(
        default="POST", description="HTTP method."
    )
    url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="URL template; {name} placeholders are filled from the inputs.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Literal (non-secret) headers."
    )
    timeout_seconds: int = Field(default=30, ge=1, le=3600, description="Request timeout.")


class ToolCredentials(ApiModel):
    """A Secret-backed credential sent as an HTTP header."""

    secret_key_ref: SecretKeyRef = Field(description="Secret key holding the credential.")
    header: str = Field(default="Authorization", description="Header to send it in.")
    prefix: str = Field(default="Bearer ", description="Text placed before the secret value.")


class Tool(ApiModel):
    """A custom tool (Swarm tool classes: platform_builtin | mcp | http)."""

    cel_rules = (
        CelRule(
            rule="!has(self.endpoint)",
            message="endpoint is not accepted: use http.url",
            field_path=".endpoint",
            check=lambda m: m.endpoint is None,
        ),
        CelRule(
            rule="!has(self.type)",
            message="type is not accepted: use handlerType",
            field_path=".type",
            check=lambda m: m.type is None,
        ),
        CelRule(
            rule="(has(self.handlerType) && self.handlerType != 'http') || "
            "(has(self.http) && has(self.http.url))",
            message="http tools (the default handlerType) need http.url",
            field_path=".http",
            check=lambda m: m.handler_type != "http" or (m.http is not None and m.http.url),
        ),
    )

    name: str = Field(
        pattern=r"^[a-z][a-z0-9_]*$", max_length=64, description="Tool name, snake_case."
    )
    description: str = Field(min_length=1, description="What the tool does (shown to the model).")
    handler_type: Literal["platform_builtin", "mcp", "http"] = Field(
        default="http", description="platform_builtin | mcp | http (the default)."
    )
    input_schema: JsonSchema | None = Field(default=None, description="JSON Schema of inputs.")
    output_schema: JsonSchema | None = Field(default=None, description="JSON Schema of output.")
    http: HttpSpec | None = Field(default=None, description="http: method and URL.")
    response_mapping: dict[str, str] = Field(
        default_factory=dict,
        description="http: output field → dotted path into the JSON response body.",
    )
    credentials: ToolCredentials | None = Field(default=None, description="http: credential.")
    permission: PermissionTier = Field(default="cautious", description="Permission tier.")
    effects: Effects | None = Field(
        default=None, description="read | write | unknown (undeclared = write)."
    )
    endpoint: str | None = Field(default=None, description="Not accepted: use http.url.")
    type: str | None = Field(default=None, description="Not accepted: use handlerType.")


class PermissionBundle(ApiModel):
    """A named set of platform permissions agents can reference."""

    name: str = Field(pattern=KEBAB, max_length=63, description="Bundle name.")
    description: str = Field(default="", description="What the bundle is for.")
    permissions: list[str] = Field(description="Permission verbs, e.g. mailbox_send.")


class MailboxWebhook(ApiModel):
    """Where a mailbox's items are also posted (Slack-compatible ``{"text": ...}``)."""

    url_secret_ref: SecretKeyRef = Field(
        description="The Secret key holding the webhook URL (a URL is a credential: it never "
        "appears in status, Events or logs)."
    )


class Mailbox(ApiModel):
    """A named mailbox agents may write to (``mailbox_send``) and people read."""

    name: str = Field(pattern=KEBAB, max_length=63, description="Mailbox name.")
    description: str = Field(default="", description="What goes in it, who reads it.")
    webhook: MailboxWebhook | None = Field(
        default=None,
        description="Also post each item to this webhook (retried with backoff; the delivery "
        "is recorded in the item's status).",
    )


#: An ``allowedHosts`` entry: a host name or IP, optionally ``*.`` (any subdomain) and
#: ``:port``.
ALLOWED_HOST = r"^(\*\.)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]{1,5})?$"
AllowedHost = Annotated[str, StringConstraints(pattern=ALLOWED_HOST, max_length=261)]


def host_allowed(allowed: list[str], url: str) -> bool:
    """Whether ``url``'s host is one of ``allowed`` (see :class:`Credential`)."""
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return False
    # Userinfo and backslashes are where URL parsers disagree on the host: refused.
    if not host or "\\" in url or "@" in parts.netloc:
        return False
    for entry in allowed:
        name, _, entry_port = entry.lower().partition(":")
        if entry_port and (port or _DEFAULT_PORTS.get(parts.scheme)) != int(entry_port):
            continue
        if name.startswith("*."):
            if host.endswith(name[1:]) and host != name[2:]:
                return True
        elif host == name:
            return True
    return False


_DEFAULT_PORTS = {"http": 80, "https": 443}


# ``allowedHosts`` is the Workspace admin's word on where a credential may go: a Skill (an
# editor's object) that would send it to any other host is refused at reconcile (its
# granting Agents get Accepted=False CredentialNotAllowed) and the runner refuses to send
# it. Absent or empty, the credential goes nowhere: it is sent only where someone who may
# edit the Workspace said it may be.
class Credential(ApiModel):
    """A named credential: a Secret key, sent only to the hosts its allowedHosts lists."""

    name: str = Field(pattern=KEBAB, max_length=63, description="Credential name.")
    secret_key_ref: SecretKeyRef = Field(description="Where the value lives.")
    allowed_hosts: list[AllowedHost] = Field(
        default_factory=list,
        max_length=64,
        description="Hosts the credential may be sent to: 'api.example.com', "
        "'*.example.com' (any subdomain, not the domain itself), with ':port' to allow one "
        "port only (else any). Absent or empty: sent nowhere; every Skill naming it is "
        "refused.",
    )

    def allows(self, url: str) -> bool:
        """Whether this credential may be sent to ``url``."""
        return host_allowed(self.allowed_hosts, url)


def credential_refused(credentials: list[Credential], ref: SecretKeyRef, url: str) -> str | None:
    """The name of a credential holding the Secret key ``ref`` that may not go to ``url``.

    A Workspace tool or MCP server that sends the same Secret key as a named credential is
    held to that credential's ``allowedHosts`` too: the key is the secret, whoever sends it.
    """
    for credential in credentials:
        if credential.secret_key_ref == ref and not credential.allows(url):
            return credential.name
    return None


class PackCommand(ApiModel):
    """One command of a command pack: an argv template, never a shell line."""

    name: str = Field(pattern=KEBAB, max_length=63, description="Command name.")
    description: str = Field(min_length=1, description="What it does (shown to the model).")
    argv: list[str] = Field(
        min_length=1, description="argv template; {name} placeholders filled from inputs."
    )
    inputs: JsonSchema | None = Field(default=None, description="JSON Schema of the inputs.")
    effects: Literal["read", "write"] | None = Field(
        default=None, description="read | write; undeclared counts as write."
    )
    output: Literal["text", "json", "lines"] = Field(default="text", description="Output parse.")
    timeout_seconds: int = Field(default=60, ge=1, le=3600, description="Timeout.")
    max_output_bytes: int = Field(
        default=65536, ge=1, le=10 * 1024 * 1024, description="Output cap."
    )


class CommandPack(ApiModel):
    """A set of commands granted together with pack:<id> (read commands only)."""

    cel_rules = (
        CelRule(
            rule="self.id != 'workspace'",
            message="'workspace' is a reserved pack id",
            field_path=".id",
            check=lambda m: m.id != RESERVED_PACK_ID,
        ),
    )

    id: str = Field(pattern=KEBAB, max_length=63, description="Pack id.")
    description: str = Field(default="", description="What the pack is for.")
    requires: list[str] = Field(
        default_factory=list, description="Binaries that must exist in the runtime image."
    )
    commands: list[PackCommand] = Field(min_length=1, description="The pack's commands.")


class FlowDataFile(ApiModel):
    """A read-only reference file agents may list in flowDataAccess."""

    cel_rules = (
        CelRule(
            rule="has(self.content) != has(self.configMapRef)",
            message="exactly one of content or configMapRef must be set",
            check=lambda m: (m.content is None) != (m.config_map_ref is None),
        ),
    )

    path: str = Field(
        pattern=r"^[A-Za-z0-9._-][A-Za-z0-9._/-]*$",
        max_length=255,
        description="Relative path agents name, e.g. exclusions.yaml.",
    )
    content: str | None = Field(default=None, description="Inline content.")
    config_map_ref: ConfigMapKeyRef | None = Field(default=None, description="Or a ConfigMap key.")


class SearchProvider(ApiModel):
    """The provider behind the native web_search tool."""

    url: str = Field(pattern=r"^https?://", description="Search endpoint (GET ?q=...).")
    api_key: SecretKeyRef | None = Field(default=None, description="Secret key with the API key.")


class RuntimeDefaults(ApiModel):
    """How Run Jobs are built."""

    image: str | None = Field(
        default=None, description="Runtime image; defaults to the operator's configured image."
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Image pull policy."
    )
    runtime_class_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        max_length=253,
        description="RuntimeClass of every pod built for the Workspace (e.g. gvisor, kata); "
        "an Agent's runtimeClassName overrides it.",
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Runner container resources."
    )
    service_account_name: str | None = Field(
        default=None, description="Service account of Run pods (its token is never mounted)."
    )
    job_ttl_seconds_after_finished: int = Field(
        default=3600, ge=0, description="ttlSecondsAfterFinished of Run Jobs."
    )
    run_ttl_seconds_after_finished: int | None = Field(
        default=None, ge=0, description="Delete finished Runs after this many seconds."
    )
    backoff_limit: int = Field(default=0, ge=0, le=10, description="Job backoffLimit.")
    default_timeout_seconds: int = Field(
        default=900, ge=1, le=86400, description="Run timeout when the Run names none."
    )


class ScriptDeny(ApiModel):
    """A script this workspace refuses to run even if the operator approved it."""

    skill: str = Field(description="Skill name.")
    path: str | None = Field(default=None, description="Script path; omitted = every script.")


class ProvenancePolicy(ApiModel):
    """Which skill provenances are callable in this workspace."""

    imported_from_registry: Literal["allow", "deny"] = Field(
        default="allow", description="Skills imported from a community registry."
    )
    vendor_published: Literal["allow", "deny"] = Field(
        default="allow", description="Skills published by a vendor."
    )
    derived_from_template: Literal["allow", "deny"] = Field(
        default="allow", description="Skills generated from a template."
    )


class Governance(ApiModel):
    """Limits that bound every run in the workspace."""

    max_steps_per_agent: int = Field(default=20, ge=1, le=1000, description="Model turns/agent.")
    max_steps_per_run: int = Field(default=100, ge=1, le=10000, description="Model turns/run.")
    max_tokens_per_run: int = Field(
        default=200000, ge=1, description="Input+output tokens per run."
    )
    max_cost_per_run: str | None = Field(
        default=None,
        pattern=MONEY_PATTERN,
        description="Default spend cap of a Run (its spec.maxCost overrides it), in the "
        "currency of the providers' prices.",
    )
    allow_script_execution: bool = Field(
        default=True,
        description="Set false to forbid every skill script here. Can only narrow the "
        "operator's approval list, never widen it.",
    )
    denied_scripts: list[ScriptDeny] = Field(
        default_factory=list, description="Scripts refused here despite operator approval."
    )
    provenance: ProvenancePolicy | None = Field(default=None, description="Provenance policy.")
    max_output_bytes: int = Field(
        default=2048, ge=64, le=3072, description="Run output kept in the result and status."
    )
    review_timeout_seconds: int = Field(
        default=86400,
        ge=1,
        le=2592000,
        description="How long a parked run's review may wait for a person before it expires "
        "and the run takes the skill's failure path (a skill's "
        "constraints.reviewTimeoutSeconds overrides it).",
    )
    # Effects (schedule, agent_message, mailbox_send): see swarmkit_api.effects.
    max_effects_per_run: int = Field(
        default=10,
        ge=0,
        le=100,
        description="How many effects (schedule, agent_message, mailbox_send calls) one run "
        "may record; 0 turns the three tools into errors.",
    )
    max_message_bytes: int = Field(
        default=4096,
        ge=1,
        le=65536,
        description="Longest agent_message / mailbox_send message and schedule input (UTF-8 "
        "bytes).",
    )
    schedule_min_delay_seconds: int = Field(
        default=1,
        ge=0,
        description="The earliest a schedule call may fire, in seconds after the call.",
    )
    schedule_max_delay_seconds: int = Field(
        default=604800,
        ge=1,
        le=31536000,
        description="The latest a schedule call may fire, in seconds after the call "
        "(default 7 days).",
    )


class WorkspaceSpec(ApiModel):
    """Shared configuration of a namespace's agents."""

    cel_rules = (
        CelRule(
            rule="!has(self.mcpServers) || self.mcpServers.all(s, "
            "self.mcpServers.exists_one(t, t.id == s.id))",
            message="MCP server ids must be unique",
            field_path=".mcpServers",
            check=lambda m: len({s.id for s in m.mcp_servers}) == len(m.mcp_servers),
        ),
        CelRule(
            rule="!has(self.modelProviders) || self.modelProviders.all(p, !has(p.prices) || "
            "self.modelProviders.all(q, !has(q.prices) || "
            "q.prices.currency == p.prices.currency))",
            message="every priced model provider must use the same currency (a run's cost "
            "and caps are in one currency)",
            field_path=".modelProviders",
            check=lambda m: len({p.prices.currency for p in m.model_providers if p.prices}) <= 1,
        ),
        CelRule(
            rule="!has(self.tools) || "
            "self.tools.all(s, self.tools.exists_one(t, t.name == s.name))",
            message="tool names must be unique",
            field_path=".tools",
            check=lambda m: len({t.name for t in m.tools}) == len(m.tools),
        ),
    )

    description: str = Field(default="", description="What this workspace is for.")
    mcp_servers: list[McpServer] = Field(
        default_factory=list, max_length=64, description="MCP servers."
    )
    tools: list[Tool] = Field(default_factory=list, max_length=256, description="Custom tools.")
    permission_bundles: list[PermissionBundle] = Field(
        default_factory=list, description="Named permission sets."
    )
    credentials: list[Credential] = Field(
        default_factory=list, description="Named Secret-backed credentials."
    )
    mailboxes: list[Mailbox] = Field(
        default_factory=list,
        max_length=256,
        description="Mailboxes agents may post to with mailbox_send (default-deny: a name not "
        "declared here is a tool error).",
    )
    model_providers: list[ModelProvider] = Field(
        # bounded so that the apiserver can afford the currency rule (CEL cost budget)
        default_factory=list,
        max_length=32,
        description="Model APIs; the first is the default.",
    )
    command_packs: list[CommandPack] = Field(default_factory=list, description="Command packs.")
    flow_data: list[FlowDataFile] = Field(
        default_factory=list, description="Read-only reference files (read_flow_data)."
    )
    search_provider: SearchProvider | None = Field(
        default=None, description="Backs native web_search; without it web_search is an error."
    )
    runtime: RuntimeDefaults | None = Field(default=None, description="Run Job defaults.")
    governance: Governance | None = Field(default=None, description="Run limits.")
    egress: EgressSpec | None = Field(
        default=None,
        description="Where Run, served-topology and gateway pods may connect (default: "
        "DNS and the declared destinations only).",
    )
    tracing: TracingSpec | None = Field(
        default=None,
        description="OpenTelemetry traces of this workspace's Runs (OTLP/HTTP); off when unset.",
    )


class WorkspaceStatus(ApiModel):
    """Observed state of a Workspace."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    version: str | None = Field(default=None, description="Short hash of the rendered spec.")
    rendered_config_map: str | None = Field(default=None, description="Rendered ConfigMap.")
    problems: list[str] = Field(default_factory=list, description="Problems found.")
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


__all__ = [
    "ENV_NAME",
    "PLATFORM_BUILTINS",
    "RESERVED_PACK_ID",
    "AwsSettings",
    "AzureSettings",
    "CommandPack",
    "Credential",
    "EgressSpec",
    "FlowDataFile",
    "Governance",
    "Mailbox",
    "MailboxWebhook",
    "McpServer",
    "ModelProvider",
    "PackCommand",
    "PermissionBundle",
    "RuntimeDefaults",
    "Tool",
    "WorkspaceSpec",
    "WorkspaceStatus",
]
