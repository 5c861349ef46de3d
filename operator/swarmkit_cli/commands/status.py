"""``kubectl swarmkit status``: the workspace at a glance.

Objects of each kind counted by their ``Ready`` condition, every object that is not Ready
with its reason and message (the Skill's ``ScriptsApproved`` too: an unapproved script is
worth knowing), and the Runs of the last 24 hours by outcome. Exit 1 when anything is
failing (``Ready=False``), so it can gate a script; ``-o json`` for machines.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from swarmkit_api.conditions import (
    READY,
    REASON_FAILED,
    REASON_SUCCEEDED,
    SCRIPTS_APPROVED,
    SUCCEEDED,
)

from ..console import Console
from ..plugin import EXIT_FINDINGS, EXIT_OK, add_command, add_namespace_flag

KINDS = ("Workspace", "Skill", "Agent", "Topology")
WINDOW = timedelta(hours=24)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "status",
        run,
        help="the workspace at a glance: objects by condition, failures, runs of the last 24 h",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    add_namespace_flag(parser)
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


@dataclass(frozen=True)
class Problem:
    kind: str
    name: str
    condition: str
    status: str
    reason: str
    message: str


@dataclass
class Summary:
    namespace: str
    counts: dict[str, dict[str, int]]
    problems: list[Problem]
    runs: dict[str, int]

    @property
    def failing(self) -> bool:
        return any(p.status == "False" for p in self.problems if p.condition == READY)

    def as_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "objects": self.counts,
            "problems": [p.__dict__ for p in self.problems],
            "runsLast24h": self.runs,
        }


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def ready_state(obj: dict[str, Any]) -> str:
    """True / False / Unknown, or Pending while the operator has not looked at it."""
    cond = _conditions(obj).get(READY)
    return str(cond.get("status", "Unknown")) if cond else "Pending"


def run_outcome(run: dict[str, Any]) -> str:
    """Succeeded, a failure reason (Failed, TimedOut, ...), or Running / Pending / ..."""
    cond = _conditions(run).get(SUCCEEDED)
    if not cond:
        return "Pending"
    if cond.get("status") == "True":
        return REASON_SUCCEEDED
    return str(
        cond.get("reason") or (REASON_FAILED if cond.get("status") == "False" else "Unknown")
    )


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def summarize(namespace: str, objects: dict[str, list[dict[str, Any]]], now: datetime) -> Summary:
    counts: dict[str, dict[str, int]] = {}
    problems: list[Problem] = []
    for kind in KINDS:
        items = objects.get(kind, [])
        counts[kind] = dict(Counter(ready_state(o) for o in items))
        for o in sorted(items, key=lambda x: x["metadata"]["name"]):
            name = o["metadata"]["name"]
            conds = _conditions(o)
            ready = conds.get(READY)
            if ready is None:
                problems.append(
                    Problem(
                        kind,
                        name,
                        READY,
                        "Pending",
                        "NotReconciled",
                        "the operator has not reported on it yet",
                    )
                )
            elif ready.get("status") != "True":
                problems.append(
                    Problem(
                        kind,
                        name,
                        READY,
                        str(ready.get("status")),
                        str(ready.get("reason", "")),
                        str(ready.get("message", "")),
                    )
                )
            scripts = conds.get(SCRIPTS_APPROVED)
            if kind == "Skill" and scripts is not None and scripts.get("status") == "False":
                problems.append(
                    Problem(
                        kind,
                        name,
                        SCRIPTS_APPROVED,
                        "False",
                        str(scripts.get("reason", "")),
                        str(scripts.get("message", "")),
                    )
                )
    runs: Counter[str] = Counter()
    for r in objects.get("Run", []):
        created = _parse_time(r["metadata"].get("creationTimestamp"))
        done = _parse_time((r.get("status") or {}).get("completionTime"))
        latest = max(t for t in (created, done, now - WINDOW * 2) if t is not None)
        if latest >= now - WINDOW:
            runs[run_outcome(r)] += 1
    return Summary(namespace, counts, problems, dict(runs))


def run(args: argparse.Namespace, console: Console) -> int:
    from ..kube import connect

    kube = connect(
        args.kubeconfig,
        args.namespace,
        context=args.context,
        as_user=args.as_user,
        as_group=args.as_group,
    )
    try:
        objects = {kind: kube.list(kind) for kind in (*KINDS, "Run")}
    finally:
        kube.close()
    summary = summarize(kube.namespace, objects, datetime.now(UTC))
    if args.output == "json":
        console.print(json.dumps(summary.as_json(), indent=2))
    else:
        render(summary, console)
    return EXIT_FINDINGS if summary.failing else EXIT_OK


STATE_STYLES = {"True": "green", "False": "red", "Unknown": "yellow", "Pending": "yellow"}


def render(summary: Summary, console: Console) -> None:
    console.print(console.style(f"Namespace {summary.namespace}", "bold"))
    rows = []
    for kind in KINDS:
        c = summary.counts.get(kind, {})
        rows.append(
            [
                kind,
                str(sum(c.values())),
                str(c.get("True", 0)),
                str(c.get("False", 0)),
                str(c.get("Unknown", 0) + c.get("Pending", 0)),
            ]
        )
    console.table(
        ["kind", "total", "ready", "not ready", "unknown"],
        rows,
        ["red" if r[3] != "0" else None for r in rows],
    )
    console.print()
    if summary.problems:
        console.print(console.style("Needs attention", "bold"))
        console.table(
            ["object", "condition", "reason", "message"],
            [
                [
                    f"{p.kind.lower()}/{p.name}",
                    f"{p.condition}={p.status}",
                    p.reason,
                    p.message[:120],
                ]
                for p in summary.problems
            ],
            [STATE_STYLES.get(p.status) for p in summary.problems],
        )
    else:
        console.print(console.style("Everything is Ready.", "green"))
    console.print()
    total = sum(summary.runs.values())
    if total:
        parts = ", ".join(
            f"{n} {k}" for k, n in sorted(summary.runs.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        console.print(f"Runs (last 24 h): {total}: {parts}")
    else:
        console.print("Runs (last 24 h): none")
