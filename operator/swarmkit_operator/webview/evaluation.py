"""What the evaluation pages show: EvalRuns (their cases, verdict and the difference against
the baseline) and a Topology's or Agent's promotion history (issue 39 item 4).

Read from the same in-memory indexes as every other page (``evalrun_views``,
``topology_views``, ``agent_views``), never from the API; plain dicts for the templates,
which escape every string. :mod:`.server` checks who may see them, as for the other pages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmkit_api.conditions import PROMOTED, SUCCEEDED

from ..indexes import IndexId
from .pages import Shown, Sources, condition, rows
from .verdicts import VIEWS

#: The resource a person needs ``list`` / ``get`` on to see EvalRuns.
EVAL_RUNS = "evalruns"
#: URL segment of a promotion page → (kind, its views index): the verdict endpoint's kinds.
PROMOTABLE = VIEWS


def _target(ref: Mapping[str, Any]) -> str:
    for key, kind in (("topologyRef", "Topology"), ("agentRef", "Agent")):
        if ref.get(key):
            return f"{kind}/{ref[key].get('name', '')}"
    return ""


def evalrun_namespaces(src: Sources) -> set[str]:
    return {str(ns) for ns, _ in src.keys(IndexId.EVALRUN_VIEWS)}


def evalruns_list(src: Sources, shown: Shown = None) -> dict[str, Any]:
    keys = [k for k in src.keys(IndexId.EVALRUN_VIEWS) if shown is None or k[0] in shown]
    built, failed = rows(
        "EvalRun", keys, lambda k: _evalrun_row(src, k[0], k[1]), lambda k: f"{k[0]}/{k[1]}"
    )
    built.sort(key=lambda r: (str(r["created"]), str(r["name"])), reverse=True)
    return {"evalruns": built, "unreadable": failed}


def _evalrun_row(src: Sources, ns: str, name: str) -> dict[str, Any]:
    view = src.one(IndexId.EVALRUN_VIEWS, (ns, name)) or {}
    spec, status = view.get("spec") or {}, view.get("status") or {}
    candidate, baseline = status.get("candidate") or {}, status.get("baseline") or {}
    return {
        "namespace": ns,
        "name": name,
        "created": status.get("startTime") or "",
        "eval_set": (spec.get("evalSetRef") or {}).get("name", ""),
        "candidate": _target(spec.get("candidate") or {}),
        "verdict": status.get("verdict") or "",
        "candidate_rate": candidate.get("passRate"),
        "baseline_rate": baseline.get("passRate"),
        "succeeded": condition(status, SUCCEEDED),
    }


def evalrun_detail(src: Sources, ns: str, name: str) -> dict[str, Any] | None:
    view = src.one(IndexId.EVALRUN_VIEWS, (ns, name))
    if view is None:
        return None
    spec, status = view.get("spec") or {}, view.get("status") or {}
    return {
        **_evalrun_row(src, ns, name),
        "verdict_reason": status.get("verdictReason") or "",
        "sides": [
            {"side": side, **(status.get(side) or {})}
            for side in ("candidate", "baseline")
            if status.get(side)
        ],
        "comparison": status.get("comparison") or {},
        "regressed": list(status.get("regressed") or ()),
        "fixed": list(status.get("fixed") or ()),
        "flaky": list(status.get("flaky") or ()),
        "errored": list(status.get("errored") or ()),
        "cases": list(status.get("cases") or ()),
        "judges": list(status.get("judges") or ()),
        "total_cost": status.get("totalCost") or "",
        "currency": status.get("currency") or "",
        "spend_reservations": list(status.get("spendReservations") or ()),
        "criteria": spec.get("criteria") or {},
        "conditions": status.get("conditions") or [],
    }


def promotion_detail(src: Sources, ns: str, plural: str, name: str) -> dict[str, Any] | None:
    """A Topology's or Agent's promotion: its active version, candidate and history (newest
    first), each linked to the EvalRuns that decided it."""
    if plural not in PROMOTABLE:
        return None
    kind, index = PROMOTABLE[plural]
    view = src.one(index, (ns, name))
    if view is None:
        return None
    status = view.get("status") or {}
    promotion = status.get("promotion") or {}
    return {
        "namespace": ns,
        "name": name,
        "kind": kind,
        "plural": plural,
        "version": status.get("version") or "",
        "gated": bool((view.get("spec") or {}).get("promotion")),
        "promoted": condition(status, PROMOTED),
        "active": promotion.get("active"),
        "candidate": promotion.get("candidate"),
        "history": list(reversed(promotion.get("history") or [])),
    }
