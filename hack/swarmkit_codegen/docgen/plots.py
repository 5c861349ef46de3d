"""Scale results as a table and an SVG plot: time to Ready against N, beside its floor.

``bench_scale.py`` (and ``make bench``) summarise each size N as ``{objects, readySeconds,
floorSeconds, xFloor, ...}``, each figure ``{min, median, max}`` over the repeats. The plot
is plain SVG text written into the page (no plotting library, byte-for-byte deterministic,
so ``make verify`` can compare it).
"""

from __future__ import annotations

from typing import Any

from .schema import cell

WIDTH, HEIGHT, PAD = 560, 300, 48
_SERIES = (
    ("readySeconds", "time to all Ready (operator)", "#3f51b5"),
    ("floorSeconds", "floor: the same writes, bare client", "#9e9e9e"),
)


def is_scale_summary(results: Any) -> bool:
    """Whether ``results`` is a ``bench_scale`` result (``summary`` keyed by N)."""
    summary = results.get("summary") if isinstance(results, dict) else None
    return isinstance(summary, dict) and any(
        k.isdigit() and isinstance(v, dict) and "readySeconds" in v for k, v in summary.items()
    )  # keyed by N: bench_ab's summary is keyed by revision (a, b) and renders as a table


def _sizes(summary: dict[str, Any]) -> list[str]:
    return sorted(
        (k for k, v in summary.items() if isinstance(v, dict) and "objects" in v), key=int
    )


def table(summary: dict[str, Any]) -> list[str]:
    """Every figure of the summary: a row per metric, a column per N (min / median / max)."""
    sizes = _sizes(summary)
    keys = [
        k
        for k, v in summary[sizes[0]].items()
        if isinstance(v, dict) and {"min", "median", "max"} <= set(v)
    ]
    head = " | ".join(f"N={n} ({summary[n]['objects']} objects)" for n in sizes)
    out = [f"| min / median / max | {head} |", "|---|" + "---|" * len(sizes)]
    for key in keys:
        cells = " | ".join(
            "{min:g} / {median:g} / {max:g}".format(**summary[n][key]) for n in sizes
        )
        out.append(f"| {cell(key)} | {cells} |")
    if "growthExponent" in summary:
        out += [
            "",
            f"Growth exponent of the time to Ready over objects: {summary['growthExponent']}",
        ]
    return [*out, ""]


def svg(summary: dict[str, Any]) -> str:
    """Median time to Ready and its floor against the number of objects (whiskers: min-max)."""
    sizes = _sizes(summary)
    xs = [float(summary[n]["objects"]) for n in sizes]
    top = max(summary[n][key]["max"] for n in sizes for key, _, _ in _SERIES) or 1.0
    x_max = max(xs) or 1.0

    def px(x: float) -> float:
        return round(PAD + (WIDTH - 2 * PAD) * x / x_max, 1)

    def py(y: float) -> float:
        return round(HEIGHT - PAD - (HEIGHT - 2 * PAD) * y / top, 1)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-label="time to Ready against the number of objects, beside its floor">',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="currentColor"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="currentColor"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 10}" text-anchor="middle" font-size="12" '
        'fill="currentColor">objects</text>',
        f'<text x="12" y="{PAD - 14}" font-size="12" fill="currentColor">seconds '
        f"(top {top:g})</text>",
    ]
    for x in xs:
        parts.append(
            f'<text x="{px(x)}" y="{HEIGHT - PAD + 16}" text-anchor="middle" font-size="11" '
            f'fill="currentColor">{x:g}</text>'
        )
    for i, (key, label, colour) in enumerate(_SERIES):
        points = [(px(x), summary[n][key]) for x, n in zip(xs, sizes, strict=True)]
        line = " ".join(f"{x},{py(s['median'])}" for x, s in points)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, s in points:
            parts.append(
                f'<line x1="{x}" y1="{py(s["min"])}" x2="{x}" y2="{py(s["max"])}" '
                f'stroke="{colour}"/>'
            )
            parts.append(f'<circle cx="{x}" cy="{py(s["median"])}" r="3" fill="{colour}"/>')
        y = PAD + 16 * i
        parts.append(f'<rect x="{PAD + 12}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(
            f'<text x="{PAD + 28}" y="{y}" font-size="12" fill="currentColor">{label}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


#: The Run latencies a ``bench_runs`` record holds per series run: (key, label, colour).
_LATENCIES = (
    ("run_created_to_job_created", "Run created → Job created", "#3f51b5"),
    ("pod_finished_to_run_condition", "pod finished → Run condition", "#ef6c00"),
)


def is_runs_record(results: Any) -> bool:
    """Whether ``results`` is a ``bench_runs`` result (``series`` of runs with latencies)."""
    series = results.get("series") if isinstance(results, dict) else None
    return isinstance(series, dict) and any(
        isinstance(runs, list) and runs and _LATENCIES[0][0] in runs[0] for runs in series.values()
    )


def latency_svg(results: dict[str, Any]) -> str:
    """The Run latency distribution of every series run: a bar from p50 to p95 and a
    whisker to the maximum, per latency, on one linear axis in milliseconds."""
    rows = [
        (str(run.get("label", name)), key, colour, run[key])
        for name, runs in sorted(results["series"].items())
        for run in runs
        for key, _, colour in _LATENCIES
        if isinstance(run.get(key), dict) and float(run[key].get("p50_ms", -1)) >= 0
    ]
    step, top = 14, 40
    height = top + step * len(rows) + PAD
    x_max = max((float(r[3]["max_ms"]) for r in rows), default=1.0) or 1.0
    left = 90

    def px(ms: float) -> float:
        return round(left + (WIDTH - left - 24) * ms / x_max, 1)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" '
        'aria-label="Run latency distribution per benchmark run: p50 to p95, whisker to max">',
        f'<text x="{left}" y="14" font-size="12" fill="currentColor">milliseconds '
        f"(axis 0 to {x_max:g}); bar p50 to p95, whisker to max</text>",
    ]
    for i, (_, label, colour) in enumerate(_LATENCIES):
        parts.append(
            f'<rect x="{left + 250 * i}" y="22" width="10" height="10" fill="{colour}"/>'
            f'<text x="{left + 250 * i + 14}" y="31" font-size="11" '
            f'fill="currentColor">{label}</text>'
        )
    for i, (label, key, colour, stats) in enumerate(rows):
        y = top + step * i + 6
        p50, p95, most = (float(stats[k]) for k in ("p50_ms", "p95_ms", "max_ms"))
        if key == _LATENCIES[0][0]:
            parts.append(
                f'<text x="{left - 6}" y="{y + 8}" text-anchor="end" font-size="11" '
                f'fill="currentColor">{label}</text>'
            )
        parts.append(
            f'<line x1="{px(p95)}" y1="{y + 4}" x2="{px(most)}" y2="{y + 4}" stroke="{colour}"/>'
        )
        parts.append(
            f'<rect x="{px(p50)}" y="{y}" width="{max(1.0, round(px(p95) - px(p50), 1))}" '
            f'height="8" fill="{colour}"/>'
        )
    parts.append("</svg>")
    return "\n".join(parts)
