"""The performance page's headline table, its plots and the scale page's figures block:
every number is a record's, a goal's limit is bench_scale.py's own, a missing figure says
which command measures it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarmkit_codegen.docgen import blocks, goals, plots

REPO = Path(__file__).resolve().parents[3]


def _spread(median: float, worst: float) -> dict[str, float]:
    return {"min": median, "median": median, "max": worst}


def _record(results: dict[str, Any]) -> dict[str, Any]:
    return {
        "command": "python bench/bench_scale.py --json x",
        "date": "2031-01-02 03:04 UTC",
        "machine": {"cpus": 7},
        "load": {"before": [4.25, 3.5, 2.75]},
        "results": results,
    }


def _row(lines: list[str], first: str, second: str = "") -> list[str]:
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if cells[0] == first and second in cells[1]:
            return cells
    raise AssertionError(f"no row {first!r} {second!r} in:\n" + "\n".join(lines))


def test_the_goals_are_bench_scales_own() -> None:
    found = goals.scale_goals(REPO)
    assert ("xFloor", "time to Ready / a bare client's same writes", 1.15) in found
    assert ("peakRssMB", "peak RSS (MB)", 400.0) in found


def test_each_goal_shows_its_recorded_figure_worst_repeat_and_verdict() -> None:
    summary = {
        "20000": {
            "objects": 24401,
            "xFloor": _spread(1.137, 1.213),
            "peakRssMB": _spread(377.7, 391.3),
            "xMinimumWrites": _spread(1.003, 1.005),
        }
    }
    lines = goals.render(REPO, {"bench-scale": _record({"summary": summary})})
    x_floor = _row(lines, "time to Ready / a bare client's same writes", "N = 20,000")
    assert x_floor[1] == "N = 20,000 Skills (24,401 objects): 1.137 (worst 1.213)"
    assert x_floor[2:4] == ["≤ 1.15", "**no**"]
    rss = _row(lines, "peak RSS (MB)", "N = 20,000")
    assert rss[1].endswith("377.7 (worst 391.3)") and rss[3] == "yes"
    # Just over a limit of 1 reads as over it, never rounded to "1".
    writes = _row(lines, "writes until quiet / the minimum writes", "N = 20,000")
    assert writes[1].endswith("1.003 (worst 1.005)") and writes[3] == "**no**"
    # a goal this record does not carry: said, with the command that measures it
    lag = _row(lines, "restart's first reconcile / a bare LIST")
    assert "not in this record" in lag[1] and lag[4] == "`make bench-scale`"
    gateway = _row(lines, "MCP gateway call / a direct call to the same upstream, p50")
    assert gateway[1] == "not recorded" and "bench_gateway.py --json" in gateway[4]


def test_the_gateway_and_runner_ratios_come_from_their_records() -> None:
    records = {
        "bench-gateway": _record(
            {"gateway_tool_x_direct": {"p50_ms": _spread(2.94, 3.07), "p95_ms": _spread(1.4, 1.45)}}
        ),
        "bench-runner": _record({"cold_start_image": {"x_bare": _spread(1.31, 1.62)}}),
    }
    lines = goals.render(REPO, records)
    p50 = _row(lines, "MCP gateway call / a direct call to the same upstream, p50")
    assert p50[1:4] == ["2.94x (worst 3.07x)", "≤ 1.5x", "**no**"]
    p95 = _row(lines, "MCP gateway call / a direct call to the same upstream, p95")
    assert p95[1:4] == ["1.4x (worst 1.45x)", "≤ 1.5x", "yes"]
    runner = _row(lines, "runner cold start in the runtime image / a bare interpreter start in it")
    assert runner[1] == "1.31x (worst 1.62x)" and runner[3] == "**no**"
    # A record without floors lists none.
    assert not any("the floor of the goal above" in line for line in lines)


def test_each_ratio_goal_is_followed_by_the_floor_its_record_measured() -> None:
    records = {
        "bench-gateway": _record(
            {
                "gateway_tool_x_direct": {"p50_ms": _spread(2.1, 2.2), "p95_ms": _spread(2.0, 2.3)},
                "relay_x_direct": {"p50_ms": _spread(2.0, 2.05), "p95_ms": _spread(1.9, 2.4)},
            }
        ),
        "bench-runner": _record(
            {
                "cold_start_image": {
                    "x_bare": _spread(9.0, 9.4),
                    "imports_floor_x_bare": _spread(7.4, 7.7),
                }
            }
        ),
    }
    lines = goals.render(REPO, records)
    goal = lines.index(
        next(line for line in lines if "a direct call to the same upstream, p50" in line)
    )
    relay = _row(lines, "a bare relay on the same MCP SDK / the direct call, p50")
    assert relay[1:4] == ["2x (worst 2.05x)", "the floor of the goal above", ""]
    assert "a bare relay on the same MCP SDK / the direct call, p50" in lines[goal + 1]
    p95 = _row(lines, "a bare relay on the same MCP SDK / the direct call, p95")
    assert p95[1] == "1.9x (worst 2.4x)"
    imports = _row(
        lines, "the runner's imports alone in the image / a bare interpreter start in it"
    )
    assert imports[1] == "7.4x (worst 7.7x)"


def test_time_to_ready_is_followed_by_the_watched_floor_at_each_size() -> None:
    summary = {
        n: {
            "objects": objects,
            "xFloor": _spread(1.2, 1.25),
            "xWatchedFloor": _spread(watched, watched + 0.05),
        }
        for n, objects, watched in (("5000", 6101, 1.1), ("20000", 24401, 1.125))
    }
    lines = goals.render(REPO, {"bench-scale": _record({"summary": summary})})
    label = "the same writes with the run's watches open / the bare client's"
    for where, watched in (
        ("N = 20,000 Skills (24,401 objects)", "1.125x (worst 1.175x)"),
        ("N = 5,000 Skills (6,101 objects)", "1.1x (worst 1.15x)"),
    ):
        floor = _row(lines, f"{label}, {where}")
        assert floor[1:3] == [watched, "the floor of the goal above"]
        # right under the goal's row at the same size
        at = lines.index(next(line for line in lines if line.startswith(f"| {label}, {where}")))
        assert lines[at - 1].startswith("| time to Ready / a bare client's same writes")
        assert where in lines[at - 1]


def test_the_run_latency_plot_draws_every_series_run() -> None:
    run = {
        "run_created_to_job_created": {"p50_ms": 74.5, "p95_ms": 232.0, "max_ms": 357.4},
        "pod_finished_to_run_condition": {"p50_ms": 41.5, "p95_ms": 284.1, "max_ms": 764.3},
    }
    results = {"series": {"A": [{"label": "A-1", **run}], "B": [{"label": "B-7", **run}]}}
    assert plots.is_runs_record(results)
    svg = plots.latency_svg(results)
    assert ">A-1</text>" in svg and ">B-7</text>" in svg and "axis 0 to 764.3" in svg
    assert svg.count("<rect") == 2 + 4  # the legend's two, a bar per latency per run


def test_the_scale_limits_block_prints_per_object_figures_from_the_runs() -> None:
    run = {
        "n": 5000,
        "objects": 6101,
        "readySeconds": 40.0,
        "cpuSeconds": 20.0,
        "peakRssMB": 250.0,
        "operatorWrites": 16000,
        "floor": {"seconds": 32.0, "writes": 22400},
    }
    lines = blocks.scale_limits({"bench-scale": _record({"runs": [run]})})
    row = _row(lines, "5,000 (6,101)")
    assert row[1:] == ["40 s / 32 s", "0.50 cores (20 s)", "250 MB (42.0 KiB)", "400/s", "700/s"]
