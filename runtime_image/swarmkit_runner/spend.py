"""What a run spends per agent and model, and its spend cap (``maxCost`` / ``maxTokens``).

One :class:`SpendMeter` per run, shared with its child runs (an agent skill's child run
counts toward the parent's cap, like the step and token budget). Before every model call
:meth:`SpendMeter.check` asks whether the call could cross the cap in the worst case: the
call's ``max_tokens`` as output, and as input the prompt of the same agent's previous call
(a conversation only grows; the first call of an agent is estimated at 0 input tokens, so
the cap is exact for output and a lower bound for input). A call that could cross it is not
made: the run ends ``BudgetExceeded`` with a ``limit.exceeded`` audit line naming the call.
After the call :meth:`SpendMeter.record` adds the provider-reported tokens.

Costs are integer micro-units of the prices' currency (:mod:`swarmkit_api.spend`); a model
whose provider has no prices has an unknown cost, reported as such, never as 0. Under a
``maxCost`` cap, a call to an unpriced model is refused (its cost could not be bounded).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from swarmkit_api.run import TokenUsage
from swarmkit_api.spend import ModelPrices, ModelUsage, format_money, parse_money
from swarmkit_api.workspace import ModelProvider

from .audit import AuditLog
from .errors import BudgetExceeded
from .providers.base import Usage


@dataclass
class _ModelSpend:
    agent: str
    provider: str
    model: str
    prices: ModelPrices | None
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0

    @property
    def cost(self) -> int | None:
        if self.prices is None:
            # No tokens cost nothing whatever the price; any token of an unpriced model
            # makes the cost unknown.
            return 0 if self.input_tokens == self.output_tokens == 0 else None
        return self.prices.cost(self.input_tokens, self.output_tokens, self.cached_input_tokens)


@dataclass
class SpendMeter:
    """Tokens and cost per model of one run; its optional cap."""

    #: Cap in micro-units of ``currency`` (None: no cost cap).
    max_cost: int | None = None
    max_tokens: int | None = None
    currency: str | None = None
    models: dict[tuple[str, str, str], _ModelSpend] = field(default_factory=dict)
    #: Input tokens of each agent's latest call (the next prompt is at least as long).
    last_input: dict[str, int] = field(default_factory=dict)
    calls: int = 0

    @classmethod
    def for_run(
        cls, max_cost: str | None, max_tokens: int | None, currency: str | None
    ) -> SpendMeter:
        return cls(
            max_cost=parse_money(max_cost) if max_cost is not None else None,
            max_tokens=max_tokens,
            currency=currency,
        )

    @property
    def tokens(self) -> int:
        return sum(m.input_tokens + m.output_tokens for m in self.models.values())

    @property
    def cost(self) -> int | None:
        """Total micro-units; None when any model used is unpriced."""
        total = 0
        for m in self.models.values():
            cost = m.cost
            if cost is None:
                return None
            total += cost
        return total

    def check(
        self, audit: AuditLog, agent: str, config: ModelProvider, model: str, max_tokens: int
    ) -> None:
        """Raise :class:`BudgetExceeded` (audited) when the next call could cross the cap."""
        if self.max_cost is None and self.max_tokens is None:
            return
        prompt = self.last_input.get(agent, 0)
        call = {"agent": agent, "provider": config.name, "model": model, "call": self.calls + 1}
        if self.max_tokens is not None:
            worst = self.tokens + prompt + max_tokens
            if worst > self.max_tokens:
                self._exceeded(
                    audit,
                    call,
                    "maxTokens",
                    str(self.max_tokens),
                    f"model call {self.calls + 1} (agent {agent}, {config.name}/{model}, "
                    f"maxTokens {max_tokens}) could bring the run to {worst} tokens, over "
                    f"its maxTokens ({self.max_tokens}); {self.tokens} used so far",
                )
        if self.max_cost is not None:
            cap = format_money(self.max_cost)
            if config.prices is None:
                self._exceeded(
                    audit,
                    call,
                    "maxCost",
                    cap,
                    f"model call {self.calls + 1} (agent {agent}) goes to provider "
                    f"{config.name}, which has no prices: its cost cannot be bounded by "
                    f"maxCost ({cap} {self.currency or ''})".rstrip(),
                )
            assert config.prices is not None
            spent = self.cost or 0
            worst_cost = spent + config.prices.cost(prompt, max_tokens)
            if worst_cost > self.max_cost:
                unit = config.prices.currency
                self._exceeded(
                    audit,
                    call,
                    "maxCost",
                    cap,
                    f"model call {self.calls + 1} (agent {agent}, {config.name}/{model}, "
                    f"maxTokens {max_tokens}) could bring the run's cost to "
                    f"{format_money(worst_cost)} {unit}, over its maxCost ({cap} {unit}); "
                    f"{format_money(spent)} {unit} spent so far",
                )

    def record(self, agent: str, config: ModelProvider, model: str, usage: Usage) -> None:
        """Add a call's reported tokens (every attempt's: retried ones are billed too)."""
        self.calls += 1
        entry = self.models.setdefault(
            (agent, config.name, model), _ModelSpend(agent, config.name, model, config.prices)
        )
        entry.input_tokens += usage.input_tokens
        entry.cached_input_tokens += usage.cached_input_tokens
        entry.output_tokens += usage.output_tokens
        self.last_input[agent] = usage.input_tokens

    def report(self) -> TokenUsage:
        """The result's ``usage``: totals, per model, cost (or unknown)."""
        models = []
        for m in self.models.values():
            cost = m.cost
            models.append(
                ModelUsage(
                    agent=m.agent,
                    provider=m.provider,
                    model=m.model,
                    input_tokens=m.input_tokens,
                    cached_input_tokens=m.cached_input_tokens,
                    output_tokens=m.output_tokens,
                    cost=format_money(cost) if cost is not None else None,
                    currency=m.prices.currency if m.prices else None,
                    cost_unknown=cost is None,
                )
            )
        total = self.cost
        currencies = {m.prices.currency for m in self.models.values() if m.prices}
        return TokenUsage(
            input_tokens=sum(m.input_tokens for m in self.models.values()),
            output_tokens=sum(m.output_tokens for m in self.models.values()),
            cached_input_tokens=sum(m.cached_input_tokens for m in self.models.values()),
            models=models,
            cost=format_money(total) if total is not None else None,
            currency=next(iter(currencies)) if len(currencies) == 1 else self.currency,
            cost_unknown=total is None,
        )

    @staticmethod
    def _exceeded(
        audit: AuditLog, call: dict[str, object], limit: str, value: str, message: str
    ) -> None:
        audit.emit(
            "limit.exceeded",
            limit=limit,
            value=value,
            outcome="BudgetExceeded",
            message=message,
            **call,
        )
        raise BudgetExceeded(message)


def run_currency(providers: list[ModelProvider]) -> str | None:
    """The one currency of the Workspace's priced providers (the API rejects a mix)."""
    return next((p.prices.currency for p in providers if p.prices is not None), None)
