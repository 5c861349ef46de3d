"""Every rendered manifest of the chart, for several values combinations, is accepted by the
real kube-apiserver: server-side apply in dry-run mode with strict field validation (unknown
or duplicate fields are errors), so a typo in a template cannot reach a user's cluster.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, namespace_name, temp_namespace
from tests.unit.test_chart_render import VALUE_SETS, by_kind, render

pytestmark = pytest.mark.integration

# prometheus-operator's CRDs are not part of a plain cluster (validated structurally in
# tests/unit/test_chart_render.py instead).
NOT_IN_A_PLAIN_CLUSTER = {"monitoring.coreos.com/v1"}


def _apply(cluster: LocalCluster, docs: list[dict[str, Any]], *, dry_run: bool) -> str:
    args = ["apply", "--server-side", "--force-conflicts", "--field-manager=helm-chart-test"]
    args += ["--validate=strict", "-o", "name", "-f", "-"]
    if dry_run:
        args.insert(1, "--dry-run=server")
    text = "\n---\n".join(json.dumps(d) for d in docs)
    res = cluster.kubectl(*args, input=text, check=False)
    assert res.returncode == 0, f"the apiserver rejected the chart:\n{res.stderr}"
    return res.stdout


def _with_namespaces(values: dict[str, Any], namespaces: list[str]) -> dict[str, Any]:
    if "watchNamespaces" not in values:
        return values
    return {**values, "watchNamespaces": namespaces[: len(values["watchNamespaces"])]}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_rendered_chart_passes_server_side_dry_run(
    name: str, cluster: LocalCluster, kube: Kube
) -> None:
    with (
        temp_namespace(kube, f"rel-{name}") as release_ns,
        temp_namespace(kube, "team-a") as team_a,
        temp_namespace(kube, "team-b") as team_b,
    ):
        values = _with_namespaces(VALUE_SETS[name], [team_a, team_b])
        release = namespace_name("sk")[:20]  # unique: cluster-scoped names carry it
        docs = render(values, release=release, namespace=release_ns)
        kept = [d for d in docs if d["apiVersion"] not in NOT_IN_A_PLAIN_CLUSTER]
        out = _apply(cluster, kept, dry_run=True)
        applied = [line for line in out.splitlines() if line.strip()]
        assert len(applied) == len(kept), out
        # Nothing was created (dry run): the Deployment does not exist.
        res = cluster.kubectl("get", "deployments", "-n", release_ns, "-o", "name")
        assert res.stdout.strip() == ""


def test_dry_run_catches_what_the_schema_cannot(cluster: LocalCluster, kube: Kube) -> None:
    """The check is real: a manifest with a field the API does not know is rejected."""
    with temp_namespace(kube, "rel-bad") as ns:
        docs = render(namespace=ns, release=namespace_name("sk")[:20])
        deploy = yaml.safe_load(json.dumps(by_kind(docs, "Deployment")[0]))
        deploy["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
        text = json.dumps(deploy)
        res = cluster.kubectl(
            "apply", "--dry-run=server", "--server-side", "--validate=strict", "-f", "-",
            input=text, check=False,
        )  # fmt: skip
        assert res.returncode != 0
        assert "livenessProbes" in res.stderr
