"""The performance page's headline table: each goal, the figure recorded, its ratio to the
floor measured in the same run, met or not.

The goals of the reconcile at scale are ``GOALS`` of ``bench/bench_scale.py`` (read from the
script's source, so the page and the benchmark share one table of limits); the gateway's and
the runner's are their records' own ratios (``*_x_direct``, ``x_bare``), each followed by the
floor its record measured in the same run (a bare relay on the same MCP SDK; the runner's
imports alone), when it has one. A goal a record does not carry yet is listed with the
command that measures it, never guessed.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .schema import cell

#: (figure key, what it is, limit), as bench_scale.py declares them.
Goal = tuple[str, str, float]

SCALE_RECORDS = ("bench-scale", "bench")
SCALE_COMMAND = "make bench-scale"
#: goal's figure → (the figure of a floor measured beside it, what that floor is): listed
#: under the goal at each size, when the record carries it.
SCALE_FLOORS = {
    "xFloor": (
        "xWatchedFloor",
        "the same writes with the run's watches open / the bare client's",
    ),
}


def scale_goals(root: Path) -> list[Goal]:
    """``GOALS`` of ``bench/bench_scale.py`` (a literal tuple), read without importing it."""
    tree = ast.parse((root / "bench" / "bench_scale.py").read_text())
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == "GOALS" for t in targets):
            goals = ast.literal_eval(node.value)
            return [(str(k), str(label), float(limit)) for k, label, limit in goals]
    raise ValueError("bench/bench_scale.py declares no GOALS")


def _fmt(value: float) -> str:
    # Four significant digits: 1.005 against a limit of 1 must not read "1".
    return f"{value:.4g}"


def _scale_rows(root: Path, records: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    name = next((n for n in SCALE_RECORDS if n in records), None)
    record = records[name] if name else None
    summary = ((record or {}).get("results") or {}).get("summary")
    sizes = sorted((k for k in summary or {} if k.isdigit()), key=int)
    rows = []
    for key, label, limit in scale_goals(root):
        if not sizes:
            rows.append([label, "not recorded", f"≤ {limit:g}", "", f"`{SCALE_COMMAND}`"])
            continue
        for n in sizes:
            at = summary[n] if summary else {}
            where = f"N = {int(n):,} Skills ({int(at.get('objects', 0)):,} objects)"
            rows.append(_scale_row(at.get(key), label, where, limit, f"{name}"))
            if key in SCALE_FLOORS:
                floor_key, floor_label = SCALE_FLOORS[key]
                path = ("summary", n, floor_key)
                rows.append(_floor_row(record, f"{floor_label}, {where}", path))
    return rows


def _scale_row(figure: Any, label: str, where: str, limit: float, name: str) -> list[str]:
    """One goal at one size: its median (worst) against the limit."""
    if not isinstance(figure, Mapping):
        return [label, f"{where}: not in this record", f"≤ {limit:g}", "", f"`{SCALE_COMMAND}`"]
    met = "yes" if float(figure["max"]) <= limit else "**no**"
    median, worst = _fmt(float(figure["median"])), _fmt(float(figure["max"]))
    return [
        label,
        f"{where}: {median} (worst {worst})",
        f"≤ {limit:g}",
        met,
        f"`bench/results/{name}.json`",
    ]


def _figure(record: Mapping[str, Any] | None, path: tuple[str, ...]) -> Mapping[str, Any] | None:
    """The min/median/max figure at ``path`` in a record's results, if it carries one."""
    value: Any = (record or {}).get("results")
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value if isinstance(value, Mapping) and "median" in value else None


def _ratio_row(
    record: Mapping[str, Any] | None, label: str, path: tuple[str, ...], limit: float, how: str
) -> list[str]:
    value = _figure(record, path)
    if value is None:
        return [label, "not recorded", f"≤ {limit:g}", "", f"`{how}`"]
    met = "yes" if float(value["max"]) <= limit else "**no**"
    median, worst = _fmt(float(value["median"])), _fmt(float(value["max"]))
    return [label, f"{median}x (worst {worst}x)", f"≤ {limit:g}x", met, "the record below"]


def _floor_row(record: Mapping[str, Any] | None, label: str, path: tuple[str, ...]) -> list[str]:
    """The floor under the goal above, as the same record measured it in the same run: what
    any implementation of that path costs, so the goal is out of reach when the floor is
    above it. Listed only when the record carries it."""
    value = _figure(record, path)
    if value is None:
        return []
    median, worst = _fmt(float(value["median"])), _fmt(float(value["max"]))
    return [
        label,
        f"{median}x (worst {worst}x)",
        "the floor of the goal above",
        "",
        "the record below",
    ]


def render(root: Path, records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The headline table (Markdown lines)."""
    rows = _scale_rows(root, records)
    gateway = records.get("bench-gateway")
    for q in ("p50_ms", "p95_ms"):
        rows.append(
            _ratio_row(
                gateway,
                f"MCP gateway call / a direct call to the same upstream, {q[:3]}",
                ("gateway_tool_x_direct", q),
                1.5,
                "python bench/record.py bench-gateway -- .venv/bin/python bench/bench_gateway.py "
                "--json",
            )
        )
        rows.append(
            _floor_row(
                gateway,
                f"a bare relay on the same MCP SDK / the direct call, {q[:3]}",
                ("relay_x_direct", q),
            )
        )
    runner = records.get("bench-runner")
    rows.append(
        _ratio_row(
            runner,
            "runner cold start in the runtime image / a bare interpreter start in it",
            ("cold_start_image", "x_bare"),
            1.5,
            "python bench/record.py bench-runner -- .venv/bin/python bench/bench_runner.py --json",
        )
    )
    rows.append(
        _floor_row(
            runner,
            "the runner's imports alone in the image / a bare interpreter start in it",
            ("cold_start_image", "imports_floor_x_bare"),
        )
    )
    rows = [r for r in rows if r]
    out = [
        "## Headline figures",
        "",
        "Each goal as a ratio to a floor measured in the same run (or a bound), the median "
        "and the worst repeat; *met* when the worst is within the goal.",
        "",
        "| what | figure: median (worst repeat) | goal | met | from |",
        "|---|---|---|---|---|",
    ]
    out += [
        "| " + " | ".join(cell(c) if i == 0 else c for i, c in enumerate(r)) + " |" for r in rows
    ]
    return [*out, ""]
