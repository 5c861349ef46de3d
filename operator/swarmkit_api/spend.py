"""Spend: model prices, what a run spent, and the SpendQuota kind.

Money is never a float. On the wire an amount is a decimal string (``"3"``, ``"0.15"``, at
most 6 decimals, like a Kubernetes quantity is a string); in code it is an integer count of
*micro-units* of the currency (1 USD = 1,000,000 micro-USD), so sums are exact and a
reservation can be compared with a limit without rounding. A price is per million tokens,
so the cost of ``n`` tokens at ``p`` micro-units per million is ``n * p / 1e6`` micro-units,
rounded up once per model total (never down: a budget errs on the side of stopping).

A cost the runner cannot price (a model whose provider has no ``prices``) is *unknown*:
``cost`` is null and ``costUnknown`` true; it is never counted as zero.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import MAX_LABELS, Conditions, LabelValue, labels_rule

#: A non-negative decimal amount with at most 6 decimals (micro-units).
MONEY_PATTERN: Final[str] = r"^[0-9]{1,12}(\.[0-9]{1,6})?$"
_MONEY_RE = re.compile(MONEY_PATTERN)
#: ISO 4217 alphabetic code (USD, EUR) or any 3-letter unit a platform team agrees on.
CURRENCY_PATTERN: Final[str] = r"^[A-Z]{3}$"
MICROS: Final[int] = 1_000_000
TOKENS_PER_PRICE: Final[int] = 1_000_000


def parse_money(text: str) -> int:
    """``"1.25"`` → 1,250,000 micro-units; ValueError for anything else (no floats)."""
    if not _MONEY_RE.match(text):
        raise ValueError(f"{text!r} is not an amount (digits, optionally . and 1-6 decimals)")
    whole, _, frac = text.partition(".")
    return int(whole) * MICROS + int((frac or "0").ljust(6, "0"))


def format_money(micros: int) -> str:
    """1,250,000 → ``"1.25"``; 3,000,000 → ``"3"`` (the shortest exact decimal)."""
    whole, frac = divmod(micros, MICROS)
    return f"{whole}.{frac:06d}".rstrip("0").rstrip(".") if frac else str(whole)


def token_cost(tokens: int, micros_per_million: int) -> int:
    """Micro-units for ``tokens`` at a per-million price, rounded up."""
    return -(-tokens * micros_per_million // TOKENS_PER_PRICE)


class ModelPrices(ApiModel):
    """What a provider's models cost, per million tokens, in one currency."""

    currency: str = Field(
        pattern=CURRENCY_PATTERN,
        max_length=3,
        description="Currency of every price here (e.g. USD).",
    )
    input: str = Field(pattern=MONEY_PATTERN, description="Per million input tokens.")
    output: str = Field(pattern=MONEY_PATTERN, description="Per million output tokens.")
    cached_input: str | None = Field(
        default=None,
        pattern=MONEY_PATTERN,
        description="Per million input tokens read from the provider's prompt cache; "
        "defaults to the input price (never cheaper than what is known).",
    )

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> int:
        """Micro-units for a call; ``cached_input_tokens`` are part of ``input_tokens``."""
        cached = min(cached_input_tokens, input_tokens)
        cached_price = parse_money(self.cached_input or self.input)
        return (
            token_cost(input_tokens - cached, parse_money(self.input))
            + token_cost(cached, cached_price)
            + token_cost(output_tokens, parse_money(self.output))
        )


class ModelUsage(ApiModel):
    """Tokens and cost of one model during a run (child runs included)."""

    agent: str | None = Field(default=None, description="The agent that called it.")
    provider: str = Field(description="Model provider name (Workspace).")
    model: str = Field(description="Model name.")
    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens (cached included).")
    cached_input_tokens: int = Field(
        default=0, ge=0, description="Prompt tokens read from the provider's cache."
    )
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    cost: str | None = Field(
        default=None, description="Cost in the provider's currency; null when unpriced."
    )
    currency: str | None = Field(default=None, description="Currency of cost.")
    cost_unknown: bool = Field(
        default=False, description="The provider has no prices: the cost is unknown (not 0)."
    )


class SpendLimits(ApiModel):
    """A cap in cost and/or tokens (a Run's own, or a Workspace default)."""

    max_cost: str | None = Field(
        default=None,
        pattern=MONEY_PATTERN,
        description="Most the run may spend, in the Workspace providers' currency.",
    )
    max_tokens: int | None = Field(
        default=None, ge=1, description="Most input+output tokens the run may use."
    )


# --- SpendQuota ---------------------------------------------------------------------------

Window = Literal["daily", "monthly", "rollingHours"]
OnExhausted = Literal["queue", "hold", "fail"]


class LabelSelector(ApiModel):
    """Which Topologies/Agents (by their labels) a quota covers."""

    cel_rules = (labels_rule("matchLabels", "matchLabels"),)

    match_labels: dict[str, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_LABELS,
        description="Labels the Run's Topology or Agent must carry (valid label keys and values).",
    )


class SpendQuotaSpec(ApiModel):
    """How much the Runs of a namespace may spend over a window."""

    cel_rules = (
        CelRule(
            rule="has(self.cost) || has(self.tokens)",
            message="a quota needs cost and/or tokens",
            check=lambda m: m.cost is not None or m.tokens is not None,
        ),
        CelRule(
            rule="!has(self.cost) || has(self.currency)",
            message="a cost limit needs currency",
            field_path=".currency",
            check=lambda m: m.cost is None or m.currency is not None,
        ),
        CelRule(
            rule="(self.window == 'rollingHours') == has(self.hours)",
            message="hours is required by window rollingHours and only by it",
            field_path=".hours",
            check=lambda m: (m.window == "rollingHours") == (m.hours is not None),
        ),
    )

    cost: str | None = Field(
        default=None, pattern=MONEY_PATTERN, description="Most spent over the window."
    )
    currency: str | None = Field(
        default=None, pattern=CURRENCY_PATTERN, description="Currency of cost."
    )
    tokens: int | None = Field(
        default=None, ge=0, description="Most input+output tokens over the window."
    )
    window: Window = Field(
        description="daily and monthly start at 00:00 UTC (the 1st for monthly); "
        "rollingHours counts the last `hours` hours."
    )
    hours: int | None = Field(default=None, ge=1, le=8784, description="rollingHours: hours.")
    selector: LabelSelector | None = Field(
        default=None, description="Only Runs of Topologies/Agents with these labels (all: none)."
    )
    on_exhausted: OnExhausted = Field(
        default="queue",
        description="A Run that does not fit: queue (waits until it fits), hold (waits for a "
        "person to clear a Review of kind spend) or fail (ends BudgetExhausted).",
    )
    warning_percent: int = Field(
        default=80, ge=1, le=100, description="Warning condition and Event at this use."
    )


class SpendEntry(ApiModel):
    """One Run's share of a quota: reserved while it runs, spent once it ended."""

    run: str = Field(description="Run name.")
    uid: str = Field(description="Run uid (the key: a restart never counts a Run twice).")
    state: Literal["reserved", "spent"] = Field(description="reserved or spent.")
    cost: str | None = Field(default=None, description="Reserved or spent cost.")
    tokens: int = Field(default=0, ge=0, description="Reserved or spent tokens.")
    at: datetime = Field(description="When reserved (spent: when the Run ended).")
    held: bool = Field(default=False, description="Admitted past the limit by a cleared hold.")


class SpendQuotaStatus(ApiModel):
    """Use of the quota in the current window."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    window_start: datetime | None = Field(default=None, description="Start of the window.")
    used: str | None = Field(default=None, description="Cost spent + reserved.")
    spent: str | None = Field(default=None, description="Cost of ended Runs.")
    reserved: str | None = Field(default=None, description="Cost reserved by running Runs.")
    remaining: str | None = Field(default=None, description="Cost left.")
    used_tokens: int = Field(default=0, ge=0, description="Tokens spent + reserved.")
    remaining_tokens: int | None = Field(default=None, description="Tokens left.")
    limit: str | None = Field(default=None, description="cost (currency) and/or tokens.")
    used_display: str | None = Field(default=None, description="Use for printing.")
    remaining_display: str | None = Field(default=None, description="What is left, printed.")
    entries: list[SpendEntry] = Field(
        default_factory=list, description="Runs counted in this window, by uid."
    )
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


__all__ = [
    "CURRENCY_PATTERN",
    "MICROS",
    "MONEY_PATTERN",
    "LabelSelector",
    "ModelPrices",
    "ModelUsage",
    "SpendEntry",
    "SpendLimits",
    "SpendQuotaSpec",
    "SpendQuotaStatus",
    "format_money",
    "parse_money",
    "token_cost",
]
