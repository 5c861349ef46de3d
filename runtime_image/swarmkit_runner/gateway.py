"""``python -m swarmkit_runner gateway``: an agent's catalog served over MCP (streamable HTTP).

A harness (Claude Code, opencode, any MCP client) connects to ``http://<host>:<port>/mcp``
with ``Authorization: Bearer <token>`` and sees exactly the agent's catalog, built by the
same code a Run uses (:func:`.toolset.agent_catalog`): granted skills (a decision skill
with its ``outputs`` as the tool's ``outputSchema`` and its validated answer as
``structuredContent``), ``<prefix>.<tool>`` MCP tools, Workspace HTTP tools, permitted
builtins, enabled native tools, ``read_flow_data``, ``load_skill`` / ``read_skill_file``
(``run_skill_script`` only for approved, pin-verified scripts) and ``pack:`` commands.
Agent skills are listed as ``agent__<skill>``. Nothing else: a call to any other name is
refused (``ToolNotGranted``) and audited as ``tool.refused``.

Every call runs the pipeline of a Run (:mod:`.pipeline`): provenance, scopes, tiers (a
``strict`` call without a standing approval, like an ``escalate_to_human`` failure, waits
for a person: the gateway opens a Review with its pod's service account and blocks that
call until it is decided, see :mod:`.gateway_review`; where no Review can be opened it is
refused with ``NotApproved`` and the reason), constraints, output validation with
re-asks, and the audit stream. Each MCP session gets its own correlation id, budget
(``maxStepsPerRun`` / ``maxTokensPerRun`` of the Workspace) and audit stream; every line
of it carries ``session`` (the MCP session id) and ``identity`` (the name of the bearer
token). A call that would end a Run (``onFailure: fail``, an escalation, a budget limit)
ends only that call, as a tool error naming the outcome.

Auth: the bundle's ``gateway.tokens`` name Secret keys whose values arrive as env vars
(:func:`swarmkit_api.bundle.secret_env_name`). A missing or wrong token is a 401 (and an
``auth.refused`` audit line); a session is bound to the token that opened it (another
token gets 404 for it). ``GET /healthz`` (unauthenticated) answers once the MCP servers
are started. Every session writes to the one pod log, which whoever may ``get pods/log``
in the namespace reads; the token values, every other secret of the pod and the pod's own
service-account token (as the kubelet rotates it) are scrubbed from it
(:meth:`~.secrets.SecretStore.watch_file`).

Upstream MCP servers are started once per gateway process and shared by every session,
with the per-call timeouts, retries and the ``mcp.unavailable`` warning of a Run
(:mod:`.mcp_client`). The listening socket sets ``SO_REUSEPORT`` so that a rolling
update on a node whose pods share a network namespace can start the new pod beside the
old one. On SIGTERM the server stops accepting, lets in-flight calls finish (bounded),
then closes the sessions and the MCP servers. A request for a session this process does
not know (the pod was replaced by a new version) gets a 404 whose JSON-RPC error says so:
the client starts a new session. The HTTP side is :mod:`.gateway_app`.
"""

from __future__ import annotations

import hmac
import json
import os
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swarmkit_api.bundle import BundleAgent, RunBundle
from swarmkit_api.review import GatewaySessionRef

from .audit import AuditLog
from .catalog import CallStats, ToolCatalog, ToolEntry
from .commands import check_command_packs
from .context import Budget, RunContext
from .decision import outputs_schema
from .errors import BundleError, RunEnded
from .gateway_review import ReviewClient, SessionReviewer
from .kube import SA_DIR
from .loop import AgentRunner
from .mcp_client import McpManager
from .paths import RunnerPaths
from .providers import ToolCall
from .secrets import MissingSecret, SecretStore
from .toolset import agent_catalog, needed_servers

if TYPE_CHECKING:
    import mcp_types

#: Prefix of agent skills in the gateway's listing (the SwarmKit document's ``agent__<skill>``).
AGENT_SKILL_PREFIX = "agent__"
#: Sessions remembered at once (the oldest are forgotten first; the SDK caps sessions too).
MAX_SESSIONS = 1000


def listed_name(entry: ToolEntry, bundle: RunBundle) -> str:
    """The name a harness sees: ``agent__<skill>`` for agent skills, else the tool's own."""
    if entry.kind == "skill" and entry.skill is not None:
        skill = bundle.skills.get(entry.skill)
        impl = skill.spec.implementation if skill is not None else None
        if impl is not None and impl.type == "agent":
            return AGENT_SKILL_PREFIX + entry.name
    return entry.name


def output_schema(entry: ToolEntry, bundle: RunBundle) -> dict[str, Any] | None:
    """A decision skill's ``outputs`` (an object schema: MCP requires ``type: object``)."""
    if entry.kind != "skill" or entry.skill is None or entry.skill not in bundle.skills:
        return None
    schema = outputs_schema(bundle.skills[entry.skill])
    if schema is None or schema.get("type") != "object":
        return None
    return schema


def input_schema(entry: ToolEntry) -> dict[str, Any]:
    schema = dict(entry.input_schema)
    schema.setdefault("type", "object")
    return schema


@dataclass
class Session:
    """One MCP session: its identity, correlation id, context and catalog."""

    session_id: str
    identity: str
    correlation_id: str
    ctx: RunContext
    catalog: ToolCatalog
    #: Listed name → catalog entry (the only names a call may use).
    tools: dict[str, ToolEntry] = field(default_factory=dict)


class Gateway:
    """The served agent: its MCP servers (shared) and one :class:`Session` per session."""

    def __init__(
        self,
        bundle: RunBundle,
        paths: RunnerPaths,
        audit: AuditLog,
        secrets: SecretStore,
        service_account_dir: Path = SA_DIR,
    ) -> None:
        if bundle.target_kind != "Agent":
            raise BundleError("a gateway bundle must target an Agent")
        if bundle.gateway is None or not bundle.gateway.tokens:
            raise BundleError("a gateway bundle needs gateway.tokens")
        self.bundle = bundle
        self.agent: BundleAgent = bundle.agents[bundle.target]
        self.paths = paths
        self.audit = audit
        self.secrets = secrets
        # The one pod that mounts its service-account token (to follow its Reviews): any
        # tool of any session can read that file, so its value (as the kubelet rotates it)
        # is scrubbed like the env secrets from the pod log, shared by every identity.
        secrets.watch_file(service_account_dir / "token")
        self.mcp = McpManager(needed_servers(bundle), secrets, audit, bundle.workspace.credentials)
        self.root = self._context(audit)
        self.root.mcp = self.mcp
        # Agent skills running a local topology start child runs through this loop (the
        # loop's import also registers every skill executor).
        self.root.shared.loop_factory = AgentRunner
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        #: Follows the Reviews the operator opens for waiting calls (get/watch; lazily).
        self.reviews = ReviewClient(bundle.run.namespace)
        self.ready = False
        #: Why start-up failed (reported by :func:`serve`).
        self.failed: BaseException | None = None
        self._tokens = self._load_tokens()

    def _load_tokens(self) -> list[tuple[str, str]]:
        assert self.bundle.gateway is not None
        tokens: list[tuple[str, str]] = []
        for token in self.bundle.gateway.tokens:
            try:
                tokens.append((token.name, self.secrets.get(token.secret_key_ref)))
            except MissingSecret as exc:
                raise BundleError(f"gateway token {token.name}: {exc}") from None
        return tokens

    def identity(self, presented: str) -> str | None:
        """The name of the token ``presented`` is (constant-time), or None."""
        found: str | None = None
        for name, value in self._tokens:
            if hmac.compare_digest(presented.encode(), value.encode()):
                found = name
        return found

    def _context(self, audit: AuditLog) -> RunContext:
        governance = self.bundle.governance
        return RunContext(
            bundle=self.bundle,
            paths=self.paths,
            audit=audit,
            secrets=self.secrets,
            budget=Budget(governance.max_steps_per_run, governance.max_tokens_per_run),
            stats=CallStats(),
            run_id=self.bundle.run.uid,
            can_park=False,  # no Run to park: a session's reviewer waits on a Review instead
        )

    async def start(self) -> None:
        """Start the MCP servers (once, for every session) and check the catalog builds."""
        check_command_packs(self.bundle)
        await self.mcp.start()
        catalog, _skills, _prompt = agent_catalog(self.root, self.agent)
        listed = sorted(listed_name(e, self.bundle) for e in catalog.entries())
        self.audit.emit(
            "gateway.start",
            agent=self.agent.name,
            version=self.agent.version,
            tools=listed,
            identities=[name for name, _ in self._tokens],
            outcome="ok",
        )
        self.ready = True

    def session(self, session_id: str, identity: str, client: str | None = None) -> Session:
        """The session ``session_id`` (created on first use, bound to ``identity``)."""
        found = self.sessions.get(session_id)
        if found is not None:
            self.sessions.move_to_end(session_id)
            return found
        correlation = str(uuid.uuid4())
        audit = self.audit.session(correlation, session=session_id, identity=identity)
        ctx = self._context(audit)
        ctx.mcp = self.mcp
        ctx.shared = self.root.shared  # one HTTP client, provider pool and warning set
        ctx.owner = False
        ref = GatewaySessionRef(
            agent=self.agent.name,
            correlation_id=correlation,
            session=session_id,
            identity=identity,
            pod=os.environ.get("HOSTNAME", ""),
        )
        ctx.reviewer = SessionReviewer(self.reviews, ref, audit)
        catalog, _skills, _prompt = agent_catalog(ctx, self.agent)
        tools = {listed_name(e, self.bundle): e for e in catalog.entries()}
        created = Session(session_id, identity, correlation, ctx, catalog, tools)
        self.sessions[session_id] = created
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        audit.emit(
            "session.start",
            agent=self.agent.name,
            version=self.agent.version,
            client=client,
            tools=len(tools),
            outcome="ok",
        )
        return created

    def list_tools(self, session: Session) -> list[mcp_types.Tool]:
        import mcp_types

        tools: list[mcp_types.Tool] = []
        for name, entry in session.tools.items():
            read_only = entry.gate is not None and entry.gate.effects == "read"
            tools.append(
                mcp_types.Tool(
                    name=name,
                    description=entry.description,
                    input_schema=input_schema(entry),
                    output_schema=output_schema(entry, self.bundle),
                    annotations=mcp_types.ToolAnnotations(read_only_hint=read_only or None),
                )
            )
        return tools

    async def call_tool(
        self, session: Session, name: str, arguments: dict[str, Any] | None
    ) -> mcp_types.CallToolResult:
        """One governed call: refused unless listed, then the catalog's call path."""
        import mcp_types

        args = dict(arguments or {})
        entry = session.tools.get(name)
        if entry is None:
            session.ctx.stats.tool_calls += 1
            session.ctx.stats.refused += 1
            session.ctx.audit.emit(
                "tool.refused",
                agent=self.agent.name,
                tool=name,
                outcome="refused",
                reason="not granted",
            )
            return _error(
                f"ToolNotGranted: tool {name!r} is not in agent {self.agent.name!r}'s catalog"
            )
        call_id = uuid.uuid4().hex[:12]
        started = time.monotonic()
        try:
            result = await session.catalog.call(ToolCall(call_id, entry.name, args))
        except RunEnded as exc:
            # What would end a Run ends only this call here (the session goes on).
            self.run_ended(exc)
            session.ctx.audit.emit(
                "tool.call",
                agent=self.agent.name,
                skill=entry.skill,
                tool=entry.name,
                kind=entry.kind,
                duration_ms=round((time.monotonic() - started) * 1000, 2),
                outcome=exc.outcome,
                error=exc.message,
            )
            return _error(f"{exc.outcome}: {exc.message}")
        if result.is_error:
            return _error(result.content)
        schema = output_schema(entry, self.bundle)
        if schema is None:
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(type="text", text=result.content)]
            )
        try:
            structured = json.loads(result.content)
        except ValueError:
            return _error(f"OutputInvalid: the answer of {name} is not JSON")
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=result.content)],
            structured_content=structured,
        )

    def run_ended(self, exc: RunEnded) -> None:
        """A call raised what would end a Run (here: only that call); a gateway inside a
        Run's pod ends its harness node with it (:mod:`.harness.gateway`)."""

    async def aclose(self) -> None:
        await self.mcp.aclose()
        await self.reviews.aclose()
        await self.root.aclose()


def _error(text: str) -> mcp_types.CallToolResult:
    import mcp_types

    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], is_error=True
    )


__all__ = [
    "AGENT_SKILL_PREFIX",
    "Gateway",
    "listed_name",
]
