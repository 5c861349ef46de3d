"""`kopf run -m swarmkit_operator.handlers` works as well as `python -m swarmkit_operator`:
the handlers package carries everything (settings, login, indexes, controllers)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube

from .runs_support import (
    OperatorProcess,
    apply_examples,
    create,
    finished,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)


class KopfRun(OperatorProcess):
    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces",
            "-m", "swarmkit_operator.handlers",
        ]  # fmt: skip


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster, crds: Any) -> Iterator[OperatorProcess]:
    op = KopfRun(cluster.kubeconfig)
    op.start()
    yield op
    op.stop()


def reconciles_the_examples_and_runs_one(
    kube: Kube, namespace: str, operator: OperatorProcess, run_name: str
) -> None:
    """The examples become Ready and a Run of them succeeds with the expected output."""
    apply_examples(kube, namespace)
    wait_ready(kube, namespace, "Topology", "review-pipeline")
    create(kube, namespace, run_manifest(run_name))
    run = wait_run(kube, namespace, run_name, finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Succeeded")
    assert "verdict is pass" in run["status"]["output"]


def test_kopf_run_reconciles_the_examples_and_runs_them(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    reconciles_the_examples_and_runs_one(kube, namespace, operator, "via-kopf-run")
