"""SpendQuota arithmetic (pure, clock injected): money, windows, reserve, settle, summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swarmkit_api.run import RunSpec
from swarmkit_api.spend import ModelPrices, SpendQuotaSpec, format_money, parse_money
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders import spend as quota
from swarmkit_operator.conditions import get_condition

NOW = datetime(2026, 3, 31, 23, 59, 0, tzinfo=UTC)
USD = {"currency": "USD", "input": "3", "output": "15"}


def spec(**kw: Any) -> SpendQuotaSpec:
    body: dict[str, Any] = {"cost": "1", "currency": "USD", "window": "daily"}
    body.update(kw)
    return SpendQuotaSpec.model_validate({k: v for k, v in body.items() if v is not None})


def cap(cost: str | None = "0.4", tokens: int = 1000, currency: str | None = "USD") -> quota.Cap:
    return quota.Cap(parse_money(cost) if cost else None, tokens, currency)


def test_money_is_exact_decimal_micro_units() -> None:
    assert parse_money("1.25") == 1_250_000
    assert parse_money("0.000001") == 1
    assert format_money(1_250_000) == "1.25" and format_money(3_000_000) == "3"
    # 0.1 + 0.2 is 0.3 here (it is not in binary floating point)
    assert format_money(parse_money("0.1") + parse_money("0.2")) == "0.3"
    for bad in ("-1", "1e3", "0.0000001", "1,5", ""):
        with pytest.raises(ValueError):
            parse_money(bad)


def test_prices_round_up_and_cached_input_defaults_to_the_input_price() -> None:
    prices = ModelPrices.model_validate(USD)
    # 1 token at 3 USD per million is 3 micro-USD exactly; 1 output token 15.
    assert prices.cost(1, 1) == 18
    # cached tokens without a cachedInput price cost the input price (never less)
    assert prices.cost(1000, 0, cached_input_tokens=1000) == prices.cost(1000, 0)
    cheap = ModelPrices.model_validate({**USD, "cachedInput": "0.3"})
    assert cheap.cost(1000, 0, cached_input_tokens=1000) == 300
    # a third of a micro-unit is rounded up, never down
    assert ModelPrices.model_validate({**USD, "input": "0.000001"}).cost(1, 0) == 1


def test_run_cap_is_the_runs_own_else_the_workspace_default() -> None:
    ws = WorkspaceSpec.model_validate(
        {
            "modelProviders": [{"name": "m", "type": "replay", "prices": USD}],
            "governance": {"maxCostPerRun": "2", "maxTokensPerRun": 9000},
        }
    )
    run = RunSpec.model_validate({"agentRef": {"name": "a"}})
    assert quota.run_cap(run, ws) == quota.Cap(2_000_000, 9000, "USD")
    own = RunSpec.model_validate({"agentRef": {"name": "a"}, "maxCost": "0.5", "maxTokens": 100})
    assert quota.run_cap(own, ws) == quota.Cap(500_000, 100, "USD")
    # a Run cannot raise the Workspace's token ceiling
    big = RunSpec.model_validate({"agentRef": {"name": "a"}, "maxTokens": 10**6})
    assert quota.run_cap(big, ws).tokens == 9000


def test_windows_turn_at_utc_midnight_the_first_of_the_month_or_roll() -> None:
    assert quota.window_start(spec(), NOW) == datetime(2026, 3, 31, tzinfo=UTC)
    assert quota.window_end(spec(), NOW) == datetime(2026, 4, 1, tzinfo=UTC)
    assert quota.window_start(spec(window="monthly"), NOW) == datetime(2026, 3, 1, tzinfo=UTC)
    assert quota.window_end(spec(window="monthly"), NOW) == datetime(2026, 4, 1, tzinfo=UTC)
    rolling = spec(window="rollingHours", hours=6)
    assert quota.window_start(rolling, NOW) == NOW - timedelta(hours=6)


def test_reserve_until_the_limit_then_refuse_naming_the_quota() -> None:
    s = spec()
    entries: list[dict[str, Any]] = []
    for i in range(2):
        d = quota.reserve("team", s, entries, f"r{i}", f"u{i}", cap(), NOW)
        assert d.fits and d.entries is not None
        entries = d.entries
    refused = quota.reserve("team", s, entries, "r2", "u2", cap(), NOW)
    assert not refused.fits and not refused.invalid
    assert refused.message == (
        "SpendQuota team cannot cover it (cost: needs 0.4 USD, 0.2 of 1 remaining)"
    )
    # the same Run again (a restart): nothing changes, it is not counted twice
    again = quota.reserve("team", s, entries, "r0", "u0", cap(), NOW)
    assert again.fits and again.entries is None


def test_a_token_quota_counts_the_token_cap() -> None:
    s = spec(cost=None, currency=None, tokens=2500)
    d = quota.reserve("t", s, [], "r", "u", cap(cost=None, tokens=2000), NOW)
    assert d.fits and d.entries is not None
    refused = quota.reserve("t", s, d.entries, "r2", "u2", cap(cost=None, tokens=1000), NOW)
    assert (
        refused.message
        == "SpendQuota t cannot cover it (tokens: needs 1000, 500 of 2500 remaining)"
    )


def test_bad_input_is_invalid_not_a_full_quota() -> None:
    no_cap = quota.reserve("q", spec(), [], "r", "u", cap(cost=None), NOW)
    assert no_cap.invalid and "needs spec.maxCost" in no_cap.message
    euro = quota.reserve("q", spec(), [], "r", "u", cap(currency="EUR"), NOW)
    assert euro.invalid
    assert euro.message == "SpendQuota q counts USD, the Workspace prices its models in EUR"


def test_settle_replaces_the_reservation_once_and_unknown_cost_stays_reserved() -> None:
    s = spec()
    d = quota.reserve("q", s, [], "r", "u", cap(), NOW)
    assert d.entries is not None
    spent = quota.settle(s, d.entries, "u", parse_money("0.05"), 300, NOW)
    assert spent is not None
    assert [(e["state"], e["cost"], e["tokens"]) for e in spent] == [("spent", "0.05", 300)]
    assert quota.settle(s, spent, "u", parse_money("0.05"), 300, NOW) is None  # idempotent
    unknown = quota.settle(s, d.entries, "u", None, None, NOW)
    assert unknown is not None
    assert [(e["cost"], e["tokens"]) for e in unknown] == [("0.4", 1000)]


def test_window_rollover_frees_spend_but_not_running_reservations() -> None:
    s = spec()
    d1 = quota.reserve("q", s, [], "a", "ua", cap("0.6"), NOW)
    assert d1.entries is not None
    entries = quota.settle(s, d1.entries, "ua", parse_money("0.6"), 10, NOW)
    assert entries is not None
    d2 = quota.reserve("q", s, entries, "b", "ub", cap("0.3"), NOW)
    assert d2.entries is not None
    assert not quota.reserve("q", s, d2.entries, "c", "uc", cap("0.3"), NOW).fits
    tomorrow = NOW + timedelta(minutes=2)  # 00:01 on April 1st
    d3 = quota.reserve("q", s, d2.entries, "c", "uc", cap("0.3"), tomorrow)
    assert d3.fits and d3.entries is not None
    # yesterday's spend is gone; b still runs, so its reservation still counts
    assert [(e["run"], e["state"]) for e in d3.entries] == [("b", "reserved"), ("c", "reserved")]
    shown = quota.summary(s, d3.entries, tomorrow, None, 1)
    assert shown["windowStart"] == "2026-04-01T00:00:00Z"
    assert (shown["used"], shown["remaining"]) == ("0.6", "0.4")


def test_summary_shows_columns_and_warns_at_the_threshold() -> None:
    s = spec(tokens=10_000, warningPercent=50)
    d = quota.reserve("q", s, [], "r", "u", cap("0.4", tokens=1000), NOW)
    assert d.entries is not None
    below = quota.summary(s, d.entries, NOW, None, 3)
    assert below["usedDisplay"] == "0.4 USD, 1000 tokens"
    assert below["remainingDisplay"] == "0.6 USD, 9000 tokens"
    assert below["limit"] == "1 USD, 10000 tokens"
    cond = get_condition(below["conditions"], "BudgetWarning")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "BelowThreshold")
    d2 = quota.reserve("q", s, d.entries, "r2", "u2", cap("0.2", tokens=1000), NOW)
    assert d2.entries is not None
    above = quota.summary(s, d2.entries, NOW, below["conditions"], 3)
    cond = get_condition(above["conditions"], "BudgetWarning")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "ThresholdReached",
        "60% used (warning at 50%)",
    )


def test_selector_covers_runs_of_labelled_targets_only() -> None:
    s = spec(selector={"matchLabels": {"team": "research"}})
    assert quota.covers(s, {"team": "research", "x": "y"})
    assert not quota.covers(s, {"team": "ops"})
    assert not quota.covers(s, {})
    assert quota.covers(spec(), {})
