"""Pure SpendQuota arithmetic: windows, which quotas cover a Run, reserve, settle, summarise.

Everything here takes ``now`` as an argument (the clock is injected), and works on the
quota's ``status.entries``: one entry per Run uid, ``reserved`` while the Run runs (its cap),
``spent`` once it ended (its actual usage). Keying by uid makes every step idempotent: a
reservation retried after an operator restart finds its entry and changes nothing, and a
Run settled twice is counted once. Reserved entries always count (the Run still runs);
spent entries count while they are inside the window (dropped from status once outside).
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from swarmkit_api.conditions import (
    BUDGET_WARNING,
    READY,
    REASON_BELOW_THRESHOLD,
    REASON_IN_FORCE,
    REASON_THRESHOLD_REACHED,
)
from swarmkit_api.review import REVIEW_KIND_LABEL
from swarmkit_api.run import RunSpec
from swarmkit_api.spend import SpendQuotaSpec, format_money, parse_money
from swarmkit_api.workspace import Governance, WorkspaceSpec

from ..conditions import set_condition
from .job import (
    MANAGED_BY_LABELS,
    RUN_API_VERSION,
    RUN_UID_LABEL,
    RunRef,
    job_name,
    owner_reference,
)
from .run_status import rfc3339


@dataclass(frozen=True)
class Cap:
    """What a Run may spend at most: what it reserves."""

    cost: int | None  # micro-units of ``currency``
    tokens: int
    currency: str | None


@dataclass(frozen=True)
class Decision:
    """The outcome of a reservation attempt on one quota."""

    fits: bool
    #: The entries to write (None: nothing changes, e.g. already reserved).
    entries: list[dict[str, Any]] | None = None
    message: str = ""
    #: The Run cannot ever be reserved on this quota (bad input, not a full quota).
    invalid: bool = False


def run_cap(spec: RunSpec, workspace: WorkspaceSpec) -> Cap:
    """The Run's cap: its own maxCost/maxTokens, else the Workspace's governance."""
    governance = workspace.governance or Governance()
    cost = spec.max_cost or governance.max_cost_per_run
    tokens = min(spec.max_tokens or governance.max_tokens_per_run, governance.max_tokens_per_run)
    currency = next((p.prices.currency for p in workspace.model_providers if p.prices), None)
    return Cap(parse_money(cost) if cost is not None else None, tokens, currency)


def window_start(spec: SpendQuotaSpec, now: datetime) -> datetime:
    """Start of the window ``now`` is in (UTC calendar days/months, or now - hours)."""
    now = now.astimezone(UTC)
    if spec.window == "daily":
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    if spec.window == "monthly":
        return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return now - timedelta(hours=spec.hours or 1)


def window_end(spec: SpendQuotaSpec, now: datetime) -> datetime | None:
    """When the window turns (None for a rolling window: it turns continuously)."""
    start = window_start(spec, now)
    if spec.window == "daily":
        return start + timedelta(days=1)
    if spec.window == "monthly":
        days = calendar.monthrange(start.year, start.month)[1]
        return start + timedelta(days=days)
    return None


def covers(spec: SpendQuotaSpec, target_labels: Mapping[str, str]) -> bool:
    """Whether the quota covers a Run whose Topology/Agent carries ``target_labels``."""
    if spec.selector is None:
        return True
    return all(target_labels.get(k) == v for k, v in spec.selector.match_labels.items())


def _at(entry: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(str(entry["at"]).replace("Z", "+00:00"))


def live(
    spec: SpendQuotaSpec, entries: list[dict[str, Any]], now: datetime
) -> list[dict[str, Any]]:
    """Entries that count now: every reservation, and spend inside the window."""
    start = window_start(spec, now)
    return [e for e in entries if e.get("state") == "reserved" or _at(e) >= start]


def totals(entries: list[dict[str, Any]]) -> tuple[int, int, int, int]:
    """(spent cost, reserved cost, spent tokens, reserved tokens) of ``entries``."""
    sc = rc = st = rt = 0
    for e in entries:
        cost = parse_money(str(e["cost"])) if e.get("cost") is not None else 0
        tokens = int(e.get("tokens") or 0)
        if e.get("state") == "reserved":
            rc, rt = rc + cost, rt + tokens
        else:
            sc, st = sc + cost, st + tokens
    return sc, rc, st, rt


def reserve(
    name: str,
    spec: SpendQuotaSpec,
    entries: list[dict[str, Any]],
    run: str,
    uid: str,
    cap: Cap,
    now: datetime,
    held: bool = False,
) -> Decision:
    """Reserve ``cap`` for Run ``uid`` on quota ``name`` (``held``: past the limit)."""
    if any(e.get("uid") == uid for e in entries):
        return Decision(True)  # reserved (or even settled) before: nothing to do
    if spec.cost is not None:
        if cap.cost is None:
            return Decision(
                False,
                message=f"SpendQuota {name} limits cost: the Run needs spec.maxCost or the "
                "Workspace's governance.maxCostPerRun, so that its cost can be reserved",
                invalid=True,
            )
        if cap.currency != spec.currency:
            return Decision(
                False,
                message=f"SpendQuota {name} counts {spec.currency}, the Workspace prices "
                f"its models in {cap.currency or 'nothing (no prices)'}",
                invalid=True,
            )
    counted = live(spec, entries, now)
    sc, rc, st, rt = totals(counted)
    problems = []
    if spec.cost is not None and cap.cost is not None:
        limit = parse_money(spec.cost)
        if sc + rc + cap.cost > limit:
            problems.append(
                f"cost: needs {format_money(cap.cost)} {spec.currency}, "
                f"{format_money(max(0, limit - sc - rc))} of {spec.cost} remaining"
            )
    if spec.tokens is not None and st + rt + cap.tokens > spec.tokens:
        problems.append(
            f"tokens: needs {cap.tokens}, {max(0, spec.tokens - st - rt)} of "
            f"{spec.tokens} remaining"
        )
    if problems and not held:
        return Decision(False, message=f"SpendQuota {name} cannot cover it ({'; '.join(problems)})")
    entry: dict[str, Any] = {
        "run": run,
        "uid": uid,
        "state": "reserved",
        "cost": format_money(cap.cost) if spec.cost is not None and cap.cost is not None else None,
        "tokens": cap.tokens,
        "at": rfc3339(now),
    }
    if held:
        entry["held"] = True
    return Decision(True, entries=[*counted, {k: v for k, v in entry.items() if v is not None}])


def settle(
    spec: SpendQuotaSpec,
    entries: list[dict[str, Any]],
    uid: str,
    cost: int | None,
    tokens: int | None,
    now: datetime,
) -> list[dict[str, Any]] | None:
    """Replace Run ``uid``'s reservation by what it spent (None: nothing to change).

    An unknown cost (an unpriced model, or no result at all) keeps the reserved cost, and
    unknown tokens the reserved tokens: never count them as 0.
    """
    out = []
    changed = False
    for e in entries:
        if e.get("uid") == uid and e.get("state") == "reserved":
            e = dict(e, state="spent", at=rfc3339(now))
            if tokens is not None:
                e["tokens"] = tokens
            if spec.cost is not None and cost is not None:
                e["cost"] = format_money(cost)
            changed = True
        out.append(e)
    return live(spec, out, now) if changed else None


def summary(
    spec: SpendQuotaSpec,
    entries: list[dict[str, Any]],
    now: datetime,
    conditions: list[dict[str, Any]] | None,
    generation: int,
) -> dict[str, Any]:
    """The status fields shown for ``entries`` (used, remaining, window, Warning)."""
    counted = live(spec, entries, now)
    sc, rc, st, rt = totals(counted)
    used: list[str] = []
    remaining: list[str] = []
    limits: list[str] = []
    percent = 0.0
    out: dict[str, Any] = {
        "observedGeneration": generation,
        "windowStart": rfc3339(window_start(spec, now)),
        "usedTokens": st + rt,
        "entries": counted,
    }
    if spec.cost is not None:
        limit = parse_money(spec.cost)
        left = max(0, limit - sc - rc)
        out |= {
            "used": format_money(sc + rc),
            "spent": format_money(sc),
            "reserved": format_money(rc),
            "remaining": format_money(left),
        }
        used.append(f"{format_money(sc + rc)} {spec.currency}")
        remaining.append(f"{format_money(left)} {spec.currency}")
        limits.append(f"{spec.cost} {spec.currency}")
        percent = max(percent, 100.0 * (sc + rc) / limit if limit else 100.0)
    if spec.tokens is not None:
        left_tokens = max(0, spec.tokens - st - rt)
        out["remainingTokens"] = left_tokens
        used.append(f"{st + rt} tokens")
        remaining.append(f"{left_tokens} tokens")
        limits.append(f"{spec.tokens} tokens")
        percent = max(percent, 100.0 * (st + rt) / spec.tokens if spec.tokens else 100.0)
    out |= {
        "usedDisplay": ", ".join(used),
        "remainingDisplay": ", ".join(remaining),
        "limit": ", ".join(limits),
    }
    reached = percent >= spec.warning_percent
    out["conditions"] = set_condition(
        conditions,
        type_=BUDGET_WARNING,
        status="True" if reached else "False",
        reason=REASON_THRESHOLD_REACHED if reached else REASON_BELOW_THRESHOLD,
        message=f"{percent:.0f}% used (warning at {spec.warning_percent}%)",
        generation=generation,
    )
    # Ready like every kind of ours (``kubectl wait --for=condition=Ready``, GitOps checks):
    # the operator has read this generation and holds the Runs that start to it.
    out["conditions"] = set_condition(
        out["conditions"],
        type_=READY,
        status="True",
        reason=REASON_IN_FORCE,
        message=f"in force: {out['usedDisplay'] or 'nothing'} used of {out['limit']} "
        f"since {out['windowStart']}",
        generation=generation,
    )
    return out


def hold_review_name(run_name: str, run_uid: str) -> str:
    """``<name>-<uid5>-spend``: the Review of a Run held by a quota."""
    return job_name(run_name, run_uid)[len("run-") :][: 63 - len("-spend")] + "-spend"


def build_hold_review(run: RunRef, quota_name: str, message: str, cap: Cap) -> dict[str, Any]:
    """The Review (kind spend) asking a person to let a held Run start past the limit."""
    cost = f"{format_money(cap.cost)} {cap.currency}" if cap.cost is not None else None
    wants = f"{cost} and {cap.tokens} tokens" if cost else f"{cap.tokens} tokens"
    owner = owner_reference(run)
    owner["controller"] = True
    return {
        "apiVersion": RUN_API_VERSION,
        "kind": "Review",
        "metadata": {
            "name": hold_review_name(run.name, run.uid),
            "namespace": run.namespace,
            "labels": {
                **MANAGED_BY_LABELS,
                RUN_UID_LABEL: run.uid,
                REVIEW_KIND_LABEL: "spend",
            },
            "ownerReferences": [owner],
        },
        "spec": {
            "request": {
                "kind": "spend",
                "question": f"Let Run {run.name} start past SpendQuota {quota_name}? It "
                f"reserves up to {wants}. Approve to start it now (counted past the limit), "
                "reject to fail it.",
                "runRef": {"name": run.name},
                "context": message[:4096],
            }
        },
    }


__all__ = [
    "Cap",
    "Decision",
    "build_hold_review",
    "covers",
    "hold_review_name",
    "live",
    "reserve",
    "run_cap",
    "settle",
    "summary",
    "totals",
    "window_end",
    "window_start",
]
