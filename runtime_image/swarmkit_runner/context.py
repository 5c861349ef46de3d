"""What every part of one run shares: the bundle, paths, audit, secrets and the budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from swarmkit_api.bundle import RunBundle

from .audit import AuditLog
from .catalog import CallStats
from .errors import LimitExceeded
from .paths import RunnerPaths
from .providers import Usage
from .secrets import SecretStore

if TYPE_CHECKING:
    from .mcp_client import McpManager


@dataclass
class Budget:
    """Run-wide counters checked against the governance limits."""

    max_steps_per_run: int
    max_tokens_per_run: int
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

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


@dataclass
class RunContext:
    """Shared state of one run."""

    bundle: RunBundle
    paths: RunnerPaths
    audit: AuditLog
    secrets: SecretStore
    budget: Budget
    stats: CallStats = field(default_factory=CallStats)
    mcp: McpManager | None = None
    _http: httpx.AsyncClient | None = None
    _warned: set[str] = field(default_factory=set)

    @property
    def work_dir(self) -> Path:
        """Where native bash and file_io work (inside the scratch dir)."""
        path = self.paths.scratch / "work"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def http(self) -> httpx.AsyncClient:
        """One HTTP client for HTTP tools and web search."""
        if self._http is None:
            self._http = httpx.AsyncClient(follow_redirects=False)
        return self._http

    def warn_once(self, key: str, message: str, **fields: str | None) -> None:
        """A ``startup.warning`` audit line, once per ``key``."""
        if key in self._warned:
            return
        self._warned.add(key)
        self.audit.emit("startup.warning", message=message, **fields)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
