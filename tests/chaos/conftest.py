"""Fixtures of the reliability suite (``tests/chaos``).

The suite gets its own private control plane (package scope: started for the first chaos
test, stopped after the last), because it stops and starts kube-apiserver and etcd; the
integration tests never see a restarted cluster. ``SWARMKIT_KUBECONFIG`` reuses a running
cluster instead, as in ``tests/integration``.

Every test here is marked ``chaos`` (and ``integration`` when it uses the cluster).
``SWARMKIT_CHAOS=full`` (``make chaos``) selects the full sizes; see :mod:`tests.chaos.support`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from swarmkit_devcluster.cluster import ClusterError, LocalCluster
from swarmkit_devcluster.jaeger import Jaeger
from swarmkit_devcluster.testing import Kube, apply_crds, session_cluster, temp_namespace

from .support import LEDGER

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.chaos)
            if "cluster" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="package")
def cluster() -> Iterator[LocalCluster]:
    try:
        with session_cluster() as c:
            yield c
    except ClusterError as exc:
        pytest.fail(f"local control plane: {exc}", pytrace=False)


@pytest.fixture(scope="package")
def kube(cluster: LocalCluster) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(cluster.kubeconfig)
    yield k
    k.close()


@pytest.fixture(scope="package")
def crds(cluster: LocalCluster) -> list[Path]:
    return apply_crds(cluster)


@pytest.fixture(scope="package", autouse=True)
def jaeger() -> Iterator[Jaeger]:
    """The Jaeger the chaos Workspaces trace to; the secrets scan reads its spans."""
    with Jaeger() as server:
        LEDGER.jaeger = server
        yield server
        LEDGER.jaeger = None


@pytest.fixture(scope="package")
def kept_namespaces(kube: Kube) -> Iterator[contextlib.ExitStack]:
    """Namespaces live until the end of the package, so the secrets scan (the last module)
    sees every ConfigMap, status, Event, pod and pod log the suite produced."""
    with contextlib.ExitStack() as stack:
        yield stack


@pytest.fixture
def namespace(
    kept_namespaces: contextlib.ExitStack, kube: Kube, request: pytest.FixtureRequest
) -> str:
    ns = kept_namespaces.enter_context(temp_namespace(kube, request.node.name))
    LEDGER.namespaces.append(ns)
    return ns
