"""Fixtures for tests against the real local control plane (see hack/README.md).

* ``cluster`` (session): a :class:`swarmkit_devcluster.LocalCluster`; reuses the cluster of
  ``$SWARMKIT_KUBECONFIG`` (e.g. ``SWARMKIT_KUBECONFIG=.cluster/kubeconfig`` after
  ``make cluster-up``) or starts a private one for the session. ``KUBECONFIG`` is exported.
* ``kube`` (session): ``kubernetes`` clients (``.core``, ``.batch``, ``.apps``, ``.custom``,
  ``.rbac``, ``.apiext``, ``.api_client``).
* ``namespace`` (function): a fresh namespace, deleted after the test.
* ``crds`` (session): ``crds/*.yaml`` applied server-side and Established (list of files).
* ``operator`` (module): the operator as deployed (a subprocess under the chart's
  ServiceAccount), started once per test module. A module sets its config file and
  environment with ``pytestmark = pytest.mark.operator_settings(config={...}, env={...},
  tracing=True)`` (``tracing``: exports to the module's ``jaeger``); a module that needs
  more (a free port picked at start, another process class) defines its own ``operator``
  fixture, which takes precedence.
* ``jaeger`` (module): a Jaeger all-in-one that the operator can export traces to.
* ``real_node`` (module): the real node's name (tests marked ``real_node``); fails, never
  skips, when the cluster has none.
* ``browser`` (module): Chromium, driven through Playwright.
* ``model`` (function): a :class:`tests.support.model_server.ScriptedModelServer` with its
  defaults; a module that needs another scope or other arguments defines its own.

The private cluster's process node runs the images ``make images`` built (runtime, operator)
in their own root filesystems when their build is current; a stale one (sources changed since
the build; ``make test`` rebuilds those first) falls back to the host command, so a test
never runs old code. ``SWARMKIT_NODE_IMAGE_STORE`` set by the caller is used as is.

Every test in this directory is marked ``integration``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swarmkit_devcluster.cluster import ClusterError, LocalCluster
from swarmkit_devcluster.imagebuild import current_images_store
from swarmkit_devcluster.jaeger import Jaeger
from swarmkit_devcluster.realnode import NODE_NAME
from swarmkit_devcluster.testing import (
    POD_SECURITY_LEVEL,
    Kube,
    apply_crds,
    session_cluster,
    temp_namespace,
)
from tests.support.model_server import ScriptedModelServer

from .runs_support import CHROMIUM, OperatorProcess

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    if "SWARMKIT_NODE_IMAGE_STORE" not in os.environ:
        store = Path(tempfile.mkdtemp(prefix="swarmkit-images-"))
        current_images_store(HERE.parents[1], store)
        os.environ["SWARMKIT_NODE_IMAGE_STORE"] = str(store)
    try:
        with session_cluster() as c:
            yield c
    except ClusterError as exc:
        pytest.fail(f"local control plane: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def kube(cluster: LocalCluster) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(cluster.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace enforcing Pod Security ``restricted`` (``pod_security`` marker:
    another level, for tests whose hand-made pods exercise the node, not the operator)."""
    marker = request.node.get_closest_marker("pod_security")
    level = marker.args[0] if marker else POD_SECURITY_LEVEL
    with temp_namespace(kube, request.node.name, pod_security=level) as ns:
        yield ns


@pytest.fixture(scope="session")
def crds(cluster: LocalCluster) -> list[Path]:
    return apply_crds(cluster)


@pytest.fixture(scope="module")
def jaeger() -> Iterator[Jaeger]:
    with Jaeger() as server:
        yield server


@pytest.fixture(scope="module")
def operator(
    cluster: LocalCluster, crds: list[Path], request: pytest.FixtureRequest
) -> Iterator[OperatorProcess]:
    marker = request.node.get_closest_marker("operator_settings")
    settings = marker.kwargs if marker else {}
    env = dict(settings.get("env") or {})
    if settings.get("tracing"):
        jaeger: Jaeger = request.getfixturevalue("jaeger")
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = jaeger.otlp_http_endpoint
    op = OperatorProcess(cluster.kubeconfig, settings.get("config"), env=env)
    op.start()
    yield op
    op.stop()


@pytest.fixture(scope="module")
def real_node(cluster: LocalCluster, kube: Kube) -> Iterator[str]:
    """The real node's name; fails (not skips) when the cluster has none, with the reason."""
    try:
        node = kube.core.read_node(NODE_NAME)
    except Exception as exc:
        pytest.fail(
            f"this cluster has no real node ({exc.__class__.__name__}); start it with "
            "`REAL_NODE=1 make cluster-up` as root after `make node-binaries`",
            pytrace=False,
        )
    ready = [c for c in node.status.conditions or [] if c.type == "Ready"]
    if not ready or ready[0].status != "True":
        pytest.fail(f"the real node is not Ready: {ready}", pytrace=False)
    yield NODE_NAME


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium through Playwright (a module that uses it ``importorskip``s playwright)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: run `make venv` (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server
