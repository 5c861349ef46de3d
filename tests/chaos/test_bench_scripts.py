"""``make bench`` works: its script, at tiny sizes, on the suite's control plane.

The numbers of a tiny run mean nothing (``make bench`` measures); this proves the command
runs end to end, prints its one table and writes its results file, and that what it
measured is self-consistent (every Run succeeded, the fan-out touched only the grantees, a
restart rewrote nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_make_bench_tiny_prints_one_table_and_writes_results(
    cluster: LocalCluster, crds: Any, tmp_path: Path
) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench.py"), "--tiny", "--out", str(out)],
        env={**os.environ, "SWARMKIT_KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "reconcile at scale (min / median / max)" in proc.stdout
    assert "10 Runs created at once" in proc.stdout
    assert "growth exponent" in proc.stdout
    data = json.loads(out.read_text())
    assert data["machine"]["tiny"] is True
    runs = data["reconcile"]["runs"]
    assert [r["n"] for r in runs] == [20, 40]
    for r in runs:
        assert r["xFloor"] > 0 and r["floor"]["writes"] > r["objects"], r
        assert r["fanoutAgentStatusWrites"] >= r["fanoutAgents"] > 0
        assert r["fanoutAgentsTouchedBeyondGrantees"] == 0
        assert r["fanoutFloorSeconds"] > 0 and r["fanoutFloorWrites"] >= 2 * r["fanoutAgents"]
        assert 0 < r["fanoutMinimumSeconds"] <= r["fanoutFloorSeconds"] * 2
        assert r["restartStatusWrites"] == 0, (r["restartWritesBy"], r["log"])
        assert r["libraryWriteFailures"] == 0
    [burst] = data["runs"]["runs"]
    assert burst["outcomes"] == {"Succeeded": 10}
    assert burst["floorPodsDoneSeconds"] > 0
