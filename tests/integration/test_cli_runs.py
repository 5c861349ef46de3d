"""``kubectl swarmkit logs`` and ``status`` against real Runs: the example workspace run by
the real operator and runner, its audit lines read back from the pod like ``kubectl logs``."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube

from .runs_support import (
    CLI,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    cli,
    cli_env,
    create,
    debug,
    finished,
    get,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)


@pytest.fixture
def finished_run(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> tuple[str, dict[str, Any]]:
    apply_examples(kube, namespace)
    wait_ready(kube, namespace, "Topology", "review-pipeline")
    create(kube, namespace, run_manifest("review-logs", correlationId="pr-7"))
    run = wait_run(kube, namespace, "review-logs", finished, operator=operator)
    cond = succeeded(run)
    assert cond and cond["status"] == "True", debug(kube, namespace, operator)
    return namespace, run


def test_logs_of_a_finished_run_are_human_readable(
    cluster: LocalCluster, finished_run: tuple[str, dict[str, Any]]
) -> None:
    ns, _ = finished_run
    res = cli(cluster, "logs", "run/review-logs", "-n", ns)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["TIME", "AGENT", "EVENT", "TOOL", "OUTCOME", "DURATION", "DETAIL"]
    text = "\n".join(lines)
    assert " run.start " in text and " run.end " in text
    end = next(line for line in lines if " run.end " in line)
    assert "Succeeded" in end and "steps=" in end
    # the coordinator's delegation to the reviewer, with its duration
    delegate = next(
        line for line in lines if "delegate_to_reviewer" in line and "tool.call" in line
    )
    cells = delegate.split()
    assert cells[1] == "coordinator" and cells[3] == "delegate_to_reviewer"
    assert cells[5].endswith(("ms", "s"))
    assert any(" model.call " in line and " reviewer " in line for line in lines)
    assert "\033[" not in res.stdout  # NO_COLOR and a pipe


def test_logs_json_are_the_raw_audit_lines(
    cluster: LocalCluster, finished_run: tuple[str, dict[str, Any]]
) -> None:
    ns, run = finished_run
    res = cli(cluster, "logs", "review-logs", "-n", ns, "-o", "json")
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in res.stdout.splitlines()]
    assert records[0]["event"] == "run.start" and records[-1]["event"] == "run.end"
    assert {r["run_id"] for r in records if "parent_run_id" not in r} == {run["metadata"]["uid"]}
    assert {r["correlation_id"] for r in records} == {"pr-7"}


def test_logs_follow_streams_a_running_run_until_it_ends(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    apply_examples(kube, ns)
    sleep = {"name": "bash", "arguments": {"command": "sleep 8", "timeout_seconds": 60}}
    apply(kube, ns, agent_with("napper", [{"toolCalls": [sleep]}, {"text": "rested"}], bash=True))
    wait_ready(kube, ns, "Agent", "napper")
    create(kube, ns, run_manifest("nap", agent="napper"))
    proc = subprocess.Popen(
        [CLI, "logs", "run/nap", "-n", ns, "-f"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=cli_env(cluster),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        seen_while_running = False
        lines = []
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            lines.append(line)
            if " run.start " in line:
                cond = succeeded(get(kube, ns, "Run", "nap"))
                seen_while_running = cond is None or cond["status"] == "Unknown"
            assert time.monotonic() < deadline, "logs -f did not end"
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert seen_while_running, "".join(lines)
    text = "".join(lines)
    assert " tool.call " in text and " bash " in text
    assert " run.end " in text  # followed to the end: the command returned when the pod did


def test_logs_of_an_unknown_run_is_a_clear_error(cluster: LocalCluster, namespace: str) -> None:
    res = cli(cluster, "logs", "run/ghost", "-n", namespace)
    assert res.returncode == 1
    assert res.stderr.strip() == f"error: Run 'ghost' not found in namespace '{namespace}'"
    assert cli(cluster, "logs", "pod/x", "-n", namespace).returncode == 2


def test_status_counts_runs_of_the_last_day_by_outcome(
    cluster: LocalCluster, kube: Kube, finished_run: tuple[str, dict[str, Any]],
    operator: OperatorProcess,
) -> None:  # fmt: skip
    ns, _ = finished_run
    create(kube, ns, run_manifest("never-ready", topology="no-such-topology"))
    wait_run(kube, ns, "never-ready", lambda r: succeeded(r) is not None, operator=operator)
    res = cli(cluster, "status", "-n", ns, "-o", "json")
    summary = json.loads(res.stdout)
    assert summary["runsLast24h"] == {"Succeeded": 1, "Pending": 1}
    text = cli(cluster, "status", "-n", ns)
    assert "Runs (last 24 h): 2: 1 Pending, 1 Succeeded" in text.stdout
    assert res.returncode == text.returncode == 0, text.stdout  # a pending Run is no failure
