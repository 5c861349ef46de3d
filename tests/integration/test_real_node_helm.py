"""The operator from its image as the chart installs it, and `make demo`, on the real node
(issue 38 item 3).

`helm install` places the chart's Deployment on ``realnode`` with the chart's own
``nodeSelector`` and ``tolerations`` values, as a user pins an operator to a node pool. The
operator then runs in the operator image under containerd + runc, in its own network
namespace: its only way to the API is the ``kubernetes`` Service (kube-proxy's DNAT to the
apiserver's bridge address) with the projected service-account token, and the chart's own
NetworkPolicy (``networkPolicy.enabled``) is enforced by kube-router around it. Both
namespaces enforce Pod Security ``restricted``; the team namespace sends its pods (the Runs')
to the real node too. The CRDs come from the session (``crds.install=false``), and the
release watches only its team namespace, so it shares the cluster with the other real-node
tests without touching their namespaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.paths import binary
from swarmkit_devcluster.realnode import BRIDGE_IP, NODE_NAME, TAINT_KEY, namespace_annotations
from swarmkit_devcluster.testing import Kube, temp_namespace, wait_for

from .runs_support import REPO, RUNTIME, examples, get, succeeded
from .test_real_node import require_image

pytestmark = pytest.mark.real_node

CHART = REPO / "charts" / "swarmkit-operator"
RELEASE = "rn"
OPERATOR_IMAGE = "ghcr.io/swarmkit-operator/swarmkit-operator:0.1.0"


class Installed:
    def __init__(self, cluster: LocalCluster, kube: Kube, system: str, team: str) -> None:
        self.cluster, self.kube, self.system, self.team = cluster, kube, system, team

    def helm(self, *args: str) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        res = subprocess.run(
            [str(binary("helm")), *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert res.returncode == 0, f"helm {' '.join(args)}:\n{res.stderr}\n{self.log()}"
        return res.stdout

    def operator_pod(self) -> Any:
        pods = self.kube.core.list_namespaced_pod(
            self.system, label_selector=f"app.kubernetes.io/instance={RELEASE}"
        ).items
        return pods[0] if len(pods) == 1 else None

    def full_log(self) -> str:
        pod = self.operator_pod()
        if pod is None:
            return "no operator pod"
        res = self.cluster.kubectl("logs", "-n", self.system, pod.metadata.name, check=False)
        return res.stdout

    def log(self) -> str:
        return "--- operator log (tail) ---\n" + "\n".join(self.full_log().splitlines()[-25:])


@pytest.fixture(scope="module")
def installed(real_node: str, cluster: LocalCluster, kube: Kube, crds: Any) -> Iterator[Installed]:
    require_image(cluster, OPERATOR_IMAGE)
    require_image(cluster, RUNTIME)
    api_port = int(cluster.server.rsplit(":", 1)[1])
    with temp_namespace(kube, "rn-system") as system, temp_namespace(kube, "rn-team") as team:
        kube.core.patch_namespace(team, {"metadata": {"annotations": namespace_annotations()}})
        rel = Installed(cluster, kube, system, team)
        values = {
            "crds": {"install": False},
            "watchNamespaces": [team],
            "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
            "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            # The chart's policy, enforced here: the API only (its Service port and the
            # endpoint it is translated to), and DNS.
            "networkPolicy": {
                "enabled": True,
                "apiServerCidrs": [f"{BRIDGE_IP}/32"],
                "apiServerPorts": [443, api_port],
            },
        }
        path = Path(tempfile.mkdtemp(prefix="sk-values-")) / "values.json"
        path.write_text(json.dumps(values))
        rel.helm("install", RELEASE, str(CHART), "-n", system, "-f", str(path),
                 "--wait", "--timeout", "3m")  # fmt: skip
        try:
            yield rel
        finally:
            subprocess.run(
                [str(binary("helm")), "uninstall", RELEASE, "-n", system, "--wait"],
                env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
                capture_output=True,
                check=False,
            )


def test_the_chart_runs_the_operator_as_a_pod_on_the_real_node(installed: Installed) -> None:
    pod = installed.operator_pod()
    assert pod is not None and pod.status.phase == "Running", installed.log()
    assert pod.spec.node_name == NODE_NAME
    assert pod.spec.containers[0].image == OPERATOR_IMAGE
    assert pod.spec.service_account_name == f"{RELEASE}-swarmkit-operator"
    env = {e.name for c in pod.spec.containers for e in c.env or []}
    assert "KUBECONFIG" not in env  # in-cluster config: the Service and the projected token
    (status,) = pod.status.container_statuses
    assert status.ready and status.restart_count == 0, installed.log()


def test_the_operator_pod_reconciles_examples_and_a_run_through_the_service(
    installed: Installed, kube: Kube, cluster: LocalCluster
) -> None:
    team = installed.team
    # Runs and EvalRuns start Runs (the test makes its own); the rest must all be Ready.
    docs = [d for d in examples() if d["kind"] not in ("Run", "EvalRun")]
    manifests = "\n---\n".join(json.dumps(d) for d in docs)
    cluster.kubectl("apply", "--server-side", "-n", team, "-f", "-", input=manifests)

    def ready(doc: dict[str, Any]) -> bool:
        obj = get(kube, team, doc["kind"], doc["metadata"]["name"]) or {}
        conds = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    for doc in docs:
        wait_for(lambda d=doc: ready(d), 120, message=installed.log)
    (run,) = [d for d in examples() if d["kind"] == "Run"]

    def created() -> bool:
        # The chart's MutatingAdmissionPolicy may answer 503 "Kind=Run not found" for a few
        # seconds after the install (as in test_helm_install.py).
        res = cluster.kubectl("create", "-n", team, "-f", "-", input=json.dumps(run), check=False)
        assert res.returncode == 0 or "Kind=Run not found" in res.stderr, res.stderr
        return res.returncode == 0

    wait_for(created, 60, message=installed.log)
    name = run["metadata"]["name"]

    def finished() -> dict[str, Any] | None:
        obj = get(kube, team, "Run", name)
        cond = succeeded(obj)
        return obj if cond and cond["status"] != "Unknown" else None

    obj = wait_for(finished, 180, message=installed.log)
    assert (succeeded(obj) or {}).get("reason") == "Succeeded", obj["status"]
    run_pod = kube.core.read_namespaced_pod(obj["status"]["podName"], team)
    assert run_pod.spec.node_name == NODE_NAME
    log = installed.full_log()
    assert "Forbidden" not in log, installed.log()


def test_make_demo_runs_its_run_in_the_runtime_image_on_the_real_node(
    real_node: str, cluster: LocalCluster, kube: Kube, crds: Any
) -> None:
    """What `REAL_NODE=1 make demo` does (``run_demo``), in a namespace of its own: the
    background operator, the examples, the Run, whose pod runs on the real node."""
    import io

    from swarmkit_devcluster.demo import run_demo

    require_image(cluster, RUNTIME)
    out = io.StringIO()
    started = not cluster.operator_running()
    with temp_namespace(kube, "rn-demo") as ns:
        try:
            code = run_demo(cluster, namespace=ns, timeout=180, out=out)
        finally:
            if started:
                cluster.stop_operator()
        text = out.getvalue()
        assert code == 0, text
        assert f"real node: the Run's pod goes to {NODE_NAME}" in text, text
        assert (
            f"pod ran on node {NODE_NAME}, image ghcr.io/swarmkit-operator/swarmkit-runtime:"
            in (text)
        ), text
