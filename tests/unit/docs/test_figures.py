"""The prose pages' figures blocks: every number comes from a record, and drift is caught.

The renderers are pure (record dicts → Markdown), so each is fed a record written here
with numbers no page could carry by chance and must print those numbers, in their rows;
the page machinery must rewrite only its block, refuse a page without one, and say when a
record is missing instead of printing a figure. Then, on a copy of the tree, a committed
record changed without `make generate` must make `verify` fail naming the page.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from swarmkit_codegen import chart_values
from swarmkit_codegen.docgen import blocks, figures, render_all, verify

REPO = Path(__file__).resolve().parents[3]


def _record(name: str, results: dict[str, Any]) -> dict[str, Any]:
    return {
        "benchmark": name,
        "command": f"python bench/{name}.py --json",
        "date": "2031-01-02 03:04 UTC",
        "duration_s": 41.7,
        "machine": {"cpus": 7, "memory_gib": 3.5, "python": "3.99.1", "system": "Linux 9"},
        "load": {"before": [4.25, 3.5, 2.75], "after": [1.5, 1.25, 1.0]},
        "results": results,
    }


def _row(lines: list[str], first_cell: str) -> list[str]:
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if cells[0].startswith(first_cell):
            return cells
    raise AssertionError(f"no row {first_cell!r} in:\n" + "\n".join(lines))


FAILOVER = {
    "replicas": 3,
    "objects": 1234,
    "runs": 17,
    "kills": 2,
    "lease": "12s/8s/2s",
    "failovers": [
        {"leaseAcquired": 12.31, "firstWrite": 12.47},
        {"leaseAcquired": 13.09, "firstWrite": 13.61},
    ],
    "firstWriteSeconds": {"min": 12.47, "median": 13.04, "max": 13.61},
    "scheduledTicks": 5,
}


def test_provenance_names_the_command_date_machine_load_and_raw_file() -> None:
    line = blocks.provenance("bench-x", _record("bench-x", {}))
    for part in (
        "2031-01-02 03:04 UTC",
        "`python bench/bench-x.py --json`",
        "(41.7 s)",
        "7 cores",
        "3.5 GiB",
        "4.25 / 3.5 / 2.75 before",
        "1.5 / 1.25 / 1 after",
        "`bench/results/bench-x.json`",
    ):
        assert part in line, part


def test_failover_rows_are_the_recorded_takeovers_and_the_goal_is_judged() -> None:
    record = _record("chaos", {"seed": 11, "full": False, "leader_failover": FAILOVER})
    lines = blocks.ha_failover({"chaos": record})
    assert _row(lines, "leader killed → a standby")[1:4] == ["12.31 s", "12.7 s", "13.09 s"]
    assert _row(lines, "leader killed → the new")[1:] == [
        "12.47 s",
        "13.04 s",
        "13.61 s",
        "&lt; 15 s: met",
    ]
    text = "\n".join(lines)
    assert "reduced size" in text and "1,234 objects" in text and "17 Runs" in text
    slow = {**FAILOVER, "firstWriteSeconds": {"min": 12.0, "median": 14.0, "max": 15.2}}
    lines = blocks.ha_failover({"chaos": _record("chaos", {"full": True, "leader_failover": slow})})
    assert _row(lines, "leader killed → the new")[-1] == "&lt; 15 s: NOT met"
    assert "full size" in "\n".join(lines)


def test_chaos_table_has_a_row_per_recorded_test_with_its_load() -> None:
    results = {
        "seed": 11,
        "full": False,
        "operator_killed": {
            "objects": 65,
            "runs": 6,
            "kills": 3,
            "killAfterSeconds": [2.38, 0.23, 1.5],
            "skillsEditedWhileDown": 4,
            "convergedSecondsAfterLastChunk": 10.7,
            "totalSeconds": 88.4,
        },
        "restart_etcd": {
            "outageSeconds": 4,
            "componentHealthyAfterStartSeconds": 4.1,
            "convergedSecondsAfterRestart": 61.2,
            "objects": 46,
            "runs": 10,
            "operatorRestarts": 1,
        },
        "bad_input": {
            "cases": 300,
            "rejectedAtAdmission": {"Skill": 150, "Agent": 63},
            "admittedAndConditioned": 87,
            "stormSeconds": 21.9,
            "allConditionedSecondsAfterStorm": 2.2,
            "canaryReadySeconds": 0.44,
            "idleApiRequestsPerSecond": 0.0,
        },
        "secrets_scan": {"secrets": 4, "scanned": {"configMaps": 10, "events": 5}, "hits": 0},
        "loadavg": {"operator_killed": [5.5, 4.0, 3.0]},
        "something_new": {"x": 1},
    }
    lines = blocks.chaos({"chaos": _record("chaos", results)})
    killed = _row(lines, "operator SIGKILLed")
    assert "kills at 2.38, 0.23, 1.5 s" in killed[1] and "converged 10.7 s" in killed[1]
    assert killed[2] == "5.5 / 4 / 3"
    etcd = _row(lines, "etcd restarted")
    assert "healthy 4.1 s" in etcd[1] and "converged 61.2 s" in etcd[1]
    assert etcd[2] == "not recorded"
    assert "213 (Skill 150, Agent 63) rejected at admission" in _row(lines, "bad input")[1]
    assert "scanned 15 (configMaps 10, events 5); 0 hits" in _row(lines, "secrets scan")[1]
    assert "something_new" not in "\n".join(lines)  # a test this renderer does not know


def _runs(p50: float, writes: float, segments: bool) -> dict[str, Any]:
    stats = {"p50_ms": p50, "p95_ms": p50 * 2, "max_ms": p50 * 3}
    run: dict[str, Any] = {
        "runs": 40,
        "rate_per_s": 2.0,
        "run_created_to_job_created": stats,
        "api_writes_per_run": writes,
    }
    if segments:
        run["segments"] = {
            "operator: egress plan (resolve + render)": {
                "p50_ms": 0.3,
                "p95_ms": 0.7,
                "max_ms": 2.5,
            },
            "operator: NetworkPolicy POSTed": {"p50_ms": 5.7, "p95_ms": 24.5, "max_ms": 80.4},
        }
    return run


def test_egress_overhead_prints_each_repeat_of_both_policies() -> None:
    declared = _record("d", {"series": {"A": [_runs(18.5, 26.3, True), _runs(13.25, 26.4, True)]}})
    none = _record("n", {"series": {"A": [_runs(10.6, 25.2, False), _runs(11.3, 25.1, False)]}})
    lines = blocks.egress_overhead(
        {"isolation-egress-declared": declared, "isolation-egress-none": none}
    )
    assert _row(lines, "NetworkPolicy POST")[1:] == ["5.7 / 5.7", "24.5 / 24.5", "80.4 / 80.4"]
    assert _row(lines, "Run created → Job created, `declared`")[1] == "18.5 / 13.25"
    assert _row(lines, "Run created → Job created, `none`")[2] == "21.2 / 22.6"
    text = "\n".join(lines)
    assert "`declared` 26.3 / 26.4, `none` 25.2 / 25.1" in text
    assert "40 Runs at 2/s, 2 repeats each" in text


def test_client_install_and_image_build_print_their_records() -> None:
    clients = _record(
        "bench-clients",
        {"cold": {"seconds": 66.2, "parts": {"a2a-go-client": 57.9}}, "warm": {"seconds": 0.3}},
    )
    lines = blocks.client_install({"bench-clients": clients})
    assert _row(lines, "cold")[1] == "66.2 s (the A2A Go client built 57.9 s)"
    assert _row(lines, "warm")[1] == "0.3 s"
    images = _record(
        "bench-images",
        {
            "coldSeconds": 231.4,
            "warmSeconds": 0.8,
            "warmRebuilt": [],
            "basesSeconds": 102.5,
            "images": {"runtime": {"reference": "r:1", "buildSeconds": 72.1, "rootfsMiB": 452}},
            "builder": ["buildah version 1.28.2"],
        },
    )
    lines = blocks.image_build({"bench-images": images})
    assert _row(lines, "runtime image")[1:] == ["72.1 s", "452 MiB root filesystem"]
    assert _row(lines, "cold `make images` total")[1] == "231.4 s"
    assert _row(lines, "warm `make images` (inputs unchanged: nothing rebuilt)")[1] == "0.8 s"
    assert _row(lines, "Debian tree")[1] == "102.5 s"
    images["results"]["warmRebuilt"] = ["operator"]
    lines = blocks.image_build({"bench-images": images})
    assert _row(lines, "warm `make images`: rebuilt operator")[1] == "0.8 s"


def test_runtime_ab_puts_both_revisions_side_by_side_and_computes_the_difference() -> None:
    def summary(ready: float, x: float) -> dict[str, Any]:
        one = {"min": 1.0, "median": 1.0, "max": 1.0}
        return {
            "readySeconds": {"min": ready - 1, "median": ready, "max": ready + 2},
            "floorSeconds": one,
            "xFloor": {"min": x, "median": x, "max": x},
            "fanoutSeconds": one,
            "restartFirstReconcileSeconds": one,
            "restartStatusWrites": {"min": 0, "median": 0, "max": 0},
        }

    record = _record(
        "bench-ab",
        {
            "size": 1000,
            "repeat": 3,
            "objects": 1221,
            "revisions": {
                "a": {"rev": "f610011", "commit": "f610011"},
                "b": {"rev": "HEAD", "commit": "3886b86"},
            },
            "summary": {"a": summary(8.0, 1.03), "b": summary(8.8, 1.13)},
            "runs": {"a": [{"load": "0.3 0.2 0.1"}], "b": [{"load": "2.1 1.0 0.5"}]},
        },
    )
    lines = blocks.runtime_ab({"bench-ab": record})
    assert _row(lines, "time to all Ready")[1:] == ["7.8 / 8.8 / 10.8 s", "7 / 8 / 10 s"]
    text = "\n".join(lines)
    assert "`3886b86`" in text and "`f610011`" in text and "1,221 objects" in text
    assert "time to Ready +10% for B against A" in text and "1.13x against 1.03x" in text
    assert "B: `3886b86` (HEAD)" in text and "A: `f610011` |" in text
    assert "B 2.1 1.0 0.5; A 0.3 0.2 0.1" in text


def test_a_page_block_is_rewritten_in_place_and_a_missing_block_or_record_is_said(
    tmp_path: Path,
) -> None:
    page = figures.BLOCKS["client-install"].page
    (tmp_path / page).parent.mkdir(parents=True)
    (tmp_path / page).write_text(
        "before\n<!-- figures:client-install: stale -->\nold 1.0 s\n"
        "<!-- /figures:client-install -->\nafter\n"
    )
    text = figures.render_page(tmp_path, page)  # no record in this tree
    assert text.startswith("before\n" + figures.begin("client-install")) and text.endswith(
        figures.end("client-install") + "\nafter\n"
    )
    assert "old 1.0 s" not in text and "*Not recorded yet*" in text
    assert "bench_clients.py --json" in text  # how to produce it
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    shutil.copy(REPO / "bench/results/bench-clients.json", results)
    text = figures.render_page(tmp_path, page)
    cold = json.loads((results / "bench-clients.json").read_text())["results"]["cold"]
    assert f"{cold['seconds']} s" in text and "Not recorded" not in text
    (tmp_path / page).write_text("no block here\n")
    with pytest.raises(ValueError, match="no figures block 'client-install'"):
        figures.render_page(tmp_path, page)


def test_every_block_of_every_page_renders_from_a_committed_record() -> None:
    for name, block in figures.BLOCKS.items():
        text = (REPO / block.page).read_text()
        assert figures.begin(name) in text and figures.end(name) in text, name
        for record in block.records:
            path = REPO / "bench/results" / f"{record}.json"
            assert path.exists(), f"{name}: {path.name} is not committed"
            assert json.loads(path.read_text())["date"] in text, name


def test_verify_fails_when_a_record_changes_without_regeneration(tmp_path: Path) -> None:
    inputs = [
        Path("Makefile"),
        Path("deploy/argocd/argocd-cm.yaml"),
        chart_values.CHART_DIR / "Chart.yaml",
        chart_values.CHART_DIR / "values.yaml",
        *(p.relative_to(REPO) for p in (REPO / "bench" / "results").glob("*.json")),
        *(p.relative_to(REPO) for p in (REPO / "bench").glob("*.py")),
    ]
    for rel in [*render_all(REPO), *inputs]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    assert verify(tmp_path) == []
    path = tmp_path / "bench/results/isolation-egress-none.json"
    record = json.loads(path.read_text())
    record["results"]["series"]["A"][0]["api_writes_per_run"] = 98765.4
    path.write_text(json.dumps(record))
    problems = "\n".join(verify(tmp_path))
    assert "docs/isolation.md" in problems
    assert re.search(r"^\+.*98,765\.4", problems, re.M), problems
