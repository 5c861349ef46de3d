"""With kopf peering (several replicas, one active) the reconcile pipeline's resources are
watched through kopf, which pauses a standby replica's watches: an operator started with
``--peering`` still reconciles everything and runs a Run."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import OperatorProcess
from .test_kopf_run import reconciles_the_examples_and_runs_one

REPO = Path(__file__).resolve().parents[2]
PEERING = "swarmkit-test-peering"


class PeeredOperator(OperatorProcess):
    def command(self) -> list[str]:
        return [sys.executable, "-m", "swarmkit_operator", "--peering", PEERING]


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster, kube: Kube, crds: Any) -> Iterator[OperatorProcess]:
    crd_file = REPO / "charts" / "swarmkit-operator" / "crds" / "kopf.dev_peerings.yaml"
    for doc in yaml.safe_load_all(crd_file.read_text()):
        if doc and doc.get("kind") == "CustomResourceDefinition":
            try:
                kube.apiext.create_custom_resource_definition(doc)
            except Exception as exc:  # created by an earlier module of the session
                if "AlreadyExists" not in str(exc):
                    raise

    def peering_created() -> bool:
        try:
            kube.custom.create_cluster_custom_object(
                "kopf.dev",
                "v1",
                "clusterkopfpeerings",
                {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
                 "metadata": {"name": PEERING}},
            )  # fmt: skip
        except Exception as exc:
            if "AlreadyExists" in str(exc):
                return True
            if "NotFound" in str(exc) or "404" in str(exc):
                return False  # the CRD is not served yet
            raise
        return True

    wait_for(peering_created, 30, message="the ClusterKopfPeering created")
    op = PeeredOperator(cluster.kubeconfig)
    op.start()
    yield op
    op.stop()


def test_a_peered_operator_watches_through_kopf_and_reconciles(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    reconciles_the_examples_and_runs_one(kube, namespace, operator, "via-peering")
    assert "watching through kopf" in operator.log_path.read_text()
