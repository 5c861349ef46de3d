"""The GitOps path against the real operator: Argo CD's view of what it wrote.

The operator runs as ``python -m swarmkit_operator`` (a process, like in the reconcile and
Runs suites) against the session cluster. The users' manifests are applied the way Argo CD
applies them (server-side apply, one field manager). Then:

* the Argo CD health checks (deploy/argocd/health/*.lua, in a real Lua 5.1 interpreter) say
  Healthy / Degraded / Progressing / Suspended on the status the operator actually wrote;
* the operator caused no drift: spec, labels and annotations are exactly what was applied,
  no finalizers or kopf annotations were added, every field the operator manages is in
  the status subresource, and a server-side apply dry run of the same manifests changes
  nothing (``kubectl diff --server-side`` exits 0);
* a Run's pod gets no Kubernetes API access at all.

test_helm_install.py does the same install through the chart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster, free_port
from swarmkit_devcluster.testing import Kube
from tests.integration.runs_support import PLURALS, OperatorProcess
from tests.integration.test_helm_install import example_docs, example_run, until
from tests.integration.test_helm_rbac import beyond, can_i_list
from tests.unit.test_argocd_health import health

pytestmark = pytest.mark.integration

FIELD_MANAGER = "argocd-controller"


class Operator(OperatorProcess):
    """The Runs suite's operator process, on free ports (the host network is shared)."""

    def command(self) -> list[str]:
        liveness = f"--liveness=http://127.0.0.1:{free_port()}/healthz"
        return [*super().command(), f"--metrics-port={free_port()}", liveness]


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster, crds: Any) -> Iterator[Operator]:
    op = Operator(cluster.kubeconfig)
    op.start()
    yield op
    op.stop()


class Git:
    """Manifests applied to one namespace the way Argo CD applies them."""

    def __init__(self, cluster: LocalCluster, kube: Kube, ns: str, operator: Operator) -> None:
        self.cluster, self.kube, self.ns, self.operator = cluster, kube, ns, operator

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self.cluster.kubectl(
            "apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "-n", self.ns,
            "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs),
        )  # fmt: skip

    def get(self, kind: str, name: str) -> dict[str, Any]:
        obj = self.kube.custom.get_namespaced_custom_object(
            "swarmkit.dev", "v1alpha1", self.ns, PLURALS[kind], name
        )
        assert isinstance(obj, dict)
        return obj

    def reconciled(self, kind: str, name: str, condition: str = "Ready") -> dict[str, Any]:
        """The object once ``condition`` reflects its current generation."""

        def done() -> dict[str, Any] | None:
            obj = self.get(kind, name)
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c["type"] == condition and (
                    condition == "Succeeded"
                    or c.get("observedGeneration") == obj["metadata"]["generation"]
                ):
                    return obj
            return None

        return until(done, 60, lambda: f"{kind} {name} {condition}\n{self.operator.tail()}")


@pytest.fixture
def git(cluster: LocalCluster, kube: Kube, namespace: str, operator: Operator) -> Git:
    return Git(cluster, kube, namespace, operator)


def test_argo_cd_reports_the_examples_healthy(git: Git) -> None:
    git.apply(example_docs())
    for doc in example_docs():
        obj = git.reconciled(doc["kind"], doc["metadata"]["name"])
        result = health(obj)
        assert result["status"] == "Healthy", (doc["kind"], obj["status"])
        assert result["message"]  # e.g. "Rendered: rendered into ConfigMap skill-..."


def _agent(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"model": {"provider": "replay"}, "systemPrompt": "x", **spec},
    }


def test_argo_cd_health_of_what_goes_wrong(git: Git) -> None:
    workspace = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": "default"},
        "spec": {
            "modelProviders": [{"name": "replay", "type": "replay"}],
            "permissionBundles": [{"name": "worker", "permissions": ["mailbox_send"]}],
        },
    }
    no_secret = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": "needs-keys"},
        "spec": {
            "modelProviders": [
                {"name": "claude", "type": "anthropic", "apiKey": {"name": "keys", "key": "k"}}
            ]
        },
    }
    missing_agent = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "incomplete"},
        "spec": {
            "workspaceRef": {"name": "default"},
            "agents": [{"name": "lead", "agentRef": {"name": "nobody"}, "role": "root"}],
        },
    }
    git.apply(
        [
            workspace,
            no_secret,
            _agent("fine", permissionsBundle="worker"),
            _agent("bad-bundle", permissionsBundle="no-such-bundle"),
            _agent("later", skills=["arrives-later"]),
            missing_agent,
        ]
    )
    assert health(git.reconciled("Workspace", "default"))["status"] == "Healthy"
    # A Workspace holds Secret references only and the operator reads no Secret (issue 41):
    # healthy; the Run whose pod lacks the Secret says so (test_tenants.py).
    assert health(git.reconciled("Workspace", "needs-keys"))["status"] == "Healthy"
    bad = health(git.reconciled("Agent", "bad-bundle"))
    assert bad["status"] == "Degraded" and "no-such-bundle" in bad["message"], bad
    topology = health(git.reconciled("Topology", "incomplete"))
    assert topology["status"] == "Degraded" and "nobody" in topology["message"], topology
    # A grant of a skill that does not exist yet is inert: the agent is otherwise Ready,
    # and the health message says what is missing.
    later = health(git.reconciled("Agent", "later"))
    assert later["status"] == "Healthy", later
    assert "SkillsResolved=False SkillNotFound" in later["message"], later
    assert "arrives-later" in later["message"], later
    run = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": "waits"},
        "spec": {"topologyRef": {"name": "not-there"}, "input": "x"},
    }
    git.cluster.kubectl("create", "-n", git.ns, "-f", "-", input=json.dumps(run))
    pending = health(git.reconciled("Run", "waits", "Succeeded"))
    assert pending["status"] == "Progressing" and "Pending" in pending["message"], pending


def test_a_run_is_healthy_when_it_succeeds_and_its_pod_has_no_api_access(git: Git) -> None:
    git.apply(example_docs())
    git.reconciled("Topology", "review-pipeline")
    run = example_run()
    git.cluster.kubectl("create", "-n", git.ns, "-f", "-", input=json.dumps(run))
    name = run["metadata"]["name"]

    def finished() -> dict[str, Any] | None:
        obj = git.get("Run", name)
        conds = (obj.get("status") or {}).get("conditions") or []
        done = [c for c in conds if c["type"] == "Succeeded" and c["status"] != "Unknown"]
        return obj if done else None

    obj = until(finished, 120, git.operator.tail)
    assert health(obj)["status"] == "Healthy", obj["status"]
    pod = git.kube.core.read_namespaced_pod(obj["status"]["podName"], git.ns)
    assert pod.spec.automount_service_account_token is False
    mounts = [m.mount_path for c in pod.spec.containers for m in c.volume_mounts or []]
    assert not [m for m in mounts if "serviceaccount" in m], mounts
    assert not [v for v in pod.spec.volumes or [] if v.projected is not None], pod.spec.volumes
    # The identity the pod runs as can do nothing beyond what anyone authenticated can.
    baseline = can_i_list(git.cluster, f"system:serviceaccount:{git.ns}:nobody", git.ns)
    runner = f"system:serviceaccount:{git.ns}:{pod.spec.service_account_name or 'default'}"
    assert beyond(can_i_list(git.cluster, runner, git.ns), baseline) == {}


def test_the_operator_causes_no_drift(git: Git) -> None:
    manifests = example_docs()
    git.apply(manifests)
    for doc in manifests:
        live = git.reconciled(doc["kind"], doc["metadata"]["name"])
        assert live["spec"] == doc["spec"], doc["metadata"]["name"]
        meta = live["metadata"]
        assert meta.get("labels", {}) == doc["metadata"].get("labels", {})
        assert meta.get("annotations", {}) == doc["metadata"].get("annotations", {})
        assert not meta.get("finalizers"), meta.get("finalizers")
        for entry in meta["managedFields"]:
            if entry["manager"] != FIELD_MANAGER:
                assert entry.get("subresource") == "status", entry  # the operator's writes
        assert "kopf" not in json.dumps(meta)  # no kopf annotations (kopf handles no object)
    res = git.cluster.kubectl(
        "diff", "--server-side", f"--field-manager={FIELD_MANAGER}", "-n", git.ns, "-f", "-",
        input="\n---\n".join(json.dumps(d) for d in manifests), check=False,
    )  # fmt: skip
    assert res.returncode == 0, f"drift:\n{res.stdout}{res.stderr}"
