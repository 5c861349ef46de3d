"""What every part of one run shares: the bundle, paths, audit, secrets and the budget."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from swarmkit_api.bundle import ReviewItem, RunBundle
from swarmkit_api.review import ResumeDecision

from .audit import AuditLog
from .catalog import CallStats
from .errors import LimitExceeded
from .journal import Journal
from .paths import RunnerPaths
from .position import AgentPosition
from .providers import ProviderPool, Usage
from .secrets import SecretStore
from .spend import SpendMeter
from .usage import SkillUsage

if TYPE_CHECKING:
    import httpx

    from .mcp_client import McpManager


@dataclass
class Budget:
    """Run-wide counters checked against the governance limits."""

    max_steps_per_run: int
    max_tokens_per_run: int
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: Tokens and cost per model, and the run's own cap (:mod:`.spend`).
    spend: SpendMeter = field(default_factory=SpendMeter)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def remaining_tokens(self) -> int:
        return max(0, self.max_tokens_per_run - self.tokens)

    def before_step(self, audit: AuditLog, agent: str) -> None:
        """Raise :class:`LimitExceeded` when no further model turn is allowed."""
        if self.steps >= self.max_steps_per_run:
            self._exceeded(
                audit,
                agent,
                "maxStepsPerRun",
                self.max_steps_per_run,
                f"run reached maxStepsPerRun ({self.max_steps_per_run}) "
                f"while agent {agent} was still working",
            )
        if self.tokens >= self.max_tokens_per_run:
            self._tokens_exceeded(audit, agent)

    def after_step(self, audit: AuditLog, agent: str, usage: Usage) -> None:
        self.steps += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        if self.tokens > self.max_tokens_per_run:
            self._tokens_exceeded(audit, agent)

    def _tokens_exceeded(self, audit: AuditLog, agent: str) -> None:
        self._exceeded(
            audit,
            agent,
            "maxTokensPerRun",
            self.max_tokens_per_run,
            f"run used {self.tokens} tokens, over maxTokensPerRun ({self.max_tokens_per_run})",
        )

    @staticmethod
    def _exceeded(audit: AuditLog, agent: str, limit: str, value: int, message: str) -> None:
        audit.emit(
            "limit.exceeded",
            agent=agent,
            limit=limit,
            value=value,
            outcome="LimitExceeded",
            message=message,
        )
        raise LimitExceeded(message)


class AgentLoop(Protocol):
    """Runs agents on one (child) run context: :class:`.loop.AgentRunner`."""

    async def run_agent(
        self,
        position: AgentPosition,
        task: str,
        depth: int = 0,
        output_schema: dict[str, Any] | None = None,
        output_retries: int = ...,
        for_skill: str | None = None,
    ) -> str: ...


@dataclass
class Shared:
    """What the run and all its child runs share (one process, one of each)."""

    http: httpx.AsyncClient | None = None
    warned: set[str] = field(default_factory=set)
    #: A2A Agent Cards by URL (fetched once per run).
    a2a_cards: dict[str, Any] = field(default_factory=dict)
    #: Remote A2A tasks waiting for an answer, by task id.
    a2a_tasks: dict[str, Any] = field(default_factory=dict)
    providers: ProviderPool | None = None
    #: Skills loaded, files read and scripts run, per agent (the result's ``skills``).
    usage: SkillUsage = field(default_factory=SkillUsage)
    #: Makes the agent loop for a (child) context. The loop installs itself here, so the
    #: executors it imports (an ``agent`` skill's child run) start child runs without
    #: importing the loop back.
    loop_factory: Callable[[RunContext], AgentLoop] | None = None
    #: Asks the caller a question and waits for the answer (serve mode: the A2A task goes
    #: input-required). None (a Run): a question parks the run for a person instead.
    ask: AskHook | None = None
    #: Runs a harness node (:mod:`.harness.node`; installed by :func:`.runner.execute`, so
    #: the loop never imports the harness package, which imports the gateway, which
    #: imports the loop). None: this process cannot run harness nodes.
    harness: HarnessHook | None = None


#: Runs a Topology harness node on a task and returns its final answer.
HarnessHook = Callable[["RunContext", AgentPosition, str, int], Awaitable[str]]
#: Takes the question (a review item) and returns the caller's answer.
AskHook = Callable[[ReviewItem], Awaitable[str]]
#: Opens a Review for the question and waits for a person's decision (an MCP gateway
#: session: :mod:`.gateway_review`); raises ``ReviewUnavailable`` when none can be opened.
Reviewer = Callable[[ReviewItem], Awaitable[ResumeDecision]]


@dataclass
class RunContext:
    """Shared state of one run (or of one child run: see :meth:`child`)."""

    bundle: RunBundle
    paths: RunnerPaths
    audit: AuditLog
    secrets: SecretStore
    budget: Budget
    stats: CallStats = field(default_factory=CallStats)
    mcp: McpManager | None = None
    #: This (child) run's id: the Run's uid for the run itself, a fresh id for a child run.
    run_id: str = ""
    parent_run_id: str | None = None
    #: The topology this context runs (None for a single-agent run).
    topology: str | None = None
    #: Topologies nested so far (1 for a Topology run, 0 for an Agent run; +1 per child).
    topology_depth: int = 0
    shared: Shared = field(default_factory=Shared)
    owner: bool = True
    #: What every effect returned so far (resume after a review; shared with child runs).
    journal: Journal = field(default_factory=Journal)
    #: Whether this context can park for a person (a Run can; a gateway session cannot,
    #: so there a question becomes a refusal).
    can_park: bool = True
    #: Where nothing can park (a gateway session), a question waits here for a person
    #: instead (None: it is refused).
    reviewer: Reviewer | None = None

    def __post_init__(self) -> None:
        if not self.run_id:
            self.run_id = self.bundle.run.uid
        if self.shared.providers is None:
            self.shared.providers = ProviderPool(self.secrets)

    @property
    def providers(self) -> ProviderPool:
        assert self.shared.providers is not None
        return self.shared.providers

    def child(self, run_id: str, topology: str) -> RunContext:
        """The context of a child run of ``topology``: own run id and audit stream; the
        budget, MCP servers, HTTP client, providers and caches are the parent's."""
        return RunContext(
            bundle=self.bundle,
            paths=self.paths,
            audit=self.audit.child(run_id),
            secrets=self.secrets,
            budget=self.budget,
            stats=self.stats,
            mcp=self.mcp,
            run_id=run_id,
            parent_run_id=self.run_id,
            topology=topology,
            topology_depth=self.topology_depth + 1,
            shared=self.shared,
            owner=False,
            journal=self.journal,
            can_park=self.can_park,
            reviewer=self.reviewer,
        )

    def agent_loop(self) -> AgentLoop:
        """The agent loop for this context (a child run's own loop on its context)."""
        factory = self.shared.loop_factory
        if factory is None:
            raise RuntimeError("no agent loop installed on this run context")
        return factory(self)

    @property
    def work_dir(self) -> Path:
        """Where native bash and file_io work (inside the scratch dir)."""
        path = self.paths.scratch / "work"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def http(self) -> httpx.AsyncClient:
        """One HTTP client for HTTP tools, web search and A2A (created on first use)."""
        if self.shared.http is None:
            import httpx  # a run without HTTP never imports it (runner start-up cost)

            from . import egress

            self.shared.http = httpx.AsyncClient(follow_redirects=False, **egress.client_kwargs())
        return self.shared.http

    def warn_once(self, key: str, message: str, **fields: str | None) -> None:
        """A ``startup.warning`` audit line, once per ``key``."""
        if key in self.shared.warned:
            return
        self.shared.warned.add(key)
        self.audit.emit("startup.warning", message=message, **fields)

    async def aclose(self) -> None:
        if not self.owner:
            return
        if self.shared.http is not None:
            await self.shared.http.aclose()
            self.shared.http = None
        await self.providers.aclose()
