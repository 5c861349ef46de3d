"""``kubectl swarmkit import`` end to end: the fixture tree (the source documents' own
examples) imported with the installed console script, applied with ``kubectl apply -k`` to
the real apiserver, and Ready under the real operator; then ``pin`` on the imported skill
directory, fed to the operator's configuration, turns its script Approved; ``status``
reports the workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.paths import binary
from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import PLURALS, OperatorProcess, debug, get

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import_tree"
INCIDENT_TRIAGE = FIXTURES / "vectorstep" / "skills" / "incident-triage"
CLI = str(Path(sys.executable).parent / "kubectl-swarmkit")


def cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NO_COLOR": "1"}
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster, crds: Any) -> Iterator[OperatorProcess]:
    op = OperatorProcess(cluster.kubeconfig)
    op.start()
    yield op
    op.stop()


@pytest.fixture
def imported(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> tuple[str, list[dict[str, Any]]]:
    """The fixture tree imported into ``tmp_path/out`` and applied with its Secret filled."""
    out = tmp_path / "out"
    t0 = time.perf_counter()
    res = cli(cluster, "import", str(FIXTURES), "-n", namespace, "-o", str(out))
    print(f"[import] fixture tree: {time.perf_counter() - t0:.2f}s (process, incl. start-up)")
    assert res.returncode == 0, res.stderr
    cluster.kubectl("apply", "-k", str(out))
    (template,) = out.glob("secret-*.template.yaml")
    secret = yaml.safe_load(template.read_text())
    secret["stringData"] = {k: f"test-{k.lower()}" for k in secret["stringData"]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(secret))
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    docs = [yaml.safe_load((out / r).read_text()) for r in kustomization["resources"]]
    return namespace, docs


def _ready(kube: Kube, ns: str, doc: dict[str, Any]) -> bool:
    obj = get(kube, ns, doc["kind"], doc["metadata"]["name"])
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return bool(
                c["status"] == "True"
                and c.get("observedGeneration") == obj["metadata"]["generation"]  # type: ignore[index]
            )
    return False


def _wait_ready(kube: Kube, ns: str, doc: dict[str, Any], operator: OperatorProcess) -> None:
    wait_for(
        lambda: _ready(kube, ns, doc),
        120,
        message=lambda: (
            f"{doc['kind']} {doc['metadata']['name']} Ready\n" + debug(kube, ns, operator)
        ),
    )


def test_imported_fixture_tree_becomes_ready(
    kube: Kube, imported: tuple[str, list[dict[str, Any]]], operator: OperatorProcess
) -> None:
    ns, docs = imported
    kinds = {d["kind"] for d in docs}
    assert kinds == {"Workspace", "Skill", "Agent", "Topology"}
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    # every seed example is there under its own name
    for expected in [
        ("Skill", "search-web"),
        ("Skill", "code-quality-review"),
        ("Skill", "ask-deep-research"),
        ("Skill", "ask-remote-research"),
        ("Skill", "incident-triage"),
        ("Agent", "analysis-agent"),
        ("Topology", "deep-research"),
    ]:
        assert expected in names
    for doc in docs:
        _wait_ready(kube, ns, doc, operator)
    ws = get(kube, ns, "Workspace", "default")
    assert ws is not None
    pg = next(s for s in ws["spec"]["mcpServers"] if s["id"] == "postgres")
    assert pg["prefix"] == "pg"
    agent = get(kube, ns, "Agent", "analysis-agent")
    assert agent is not None and agent["spec"]["permissionsBundle"] == "worker"
    topo = get(kube, ns, "Topology", "triage")
    assert topo is not None and set(topo["status"]["agentVersions"]) >= {"coordinator"}
    skill = get(kube, ns, "Skill", "code-quality-review")
    assert skill is not None
    assert skill["spec"]["outputs"]["required"] == ["verdict", "confidence", "reasoning"]


def test_pin_of_the_skill_directory_approves_the_imported_script(
    cluster: LocalCluster,
    kube: Kube,
    imported: tuple[str, list[dict[str, Any]]],
    operator: OperatorProcess,
) -> None:
    ns, _ = imported
    _wait_ready(kube, ns, {"kind": "Skill", "metadata": {"name": "incident-triage"}}, operator)
    skill = get(kube, ns, "Skill", "incident-triage")
    assert skill is not None
    (script,) = skill["status"]["scripts"]
    assert script["approved"] is False
    res = cli(cluster, "pin", str(INCIDENT_TRIAGE))
    assert res.returncode == 0, res.stderr
    values = yaml.safe_load(res.stdout)
    (entry,) = values["config"]["security"]["skills"]["allowed"]
    assert entry["sha256"] == script["sha256"]  # the operator hashed the same bytes
    # The chart's `config` is the operator's configuration file; a restart reads it.
    operator.stop()
    operator.config_path.write_text(yaml.safe_dump(values["config"]))
    operator.start()

    def approved() -> bool:
        obj = get(kube, ns, "Skill", "incident-triage") or {}
        scripts = (obj.get("status") or {}).get("scripts") or []
        return bool(scripts and scripts[0]["approved"] and scripts[0]["reason"] == "Approved")

    wait_for(approved, 60, message=lambda: debug(kube, ns, operator))


def test_status_reports_the_imported_workspace_then_a_failure(
    cluster: LocalCluster,
    kube: Kube,
    imported: tuple[str, list[dict[str, Any]]],
    operator: OperatorProcess,
) -> None:
    ns, docs = imported
    for doc in docs:
        _wait_ready(kube, ns, doc, operator)
    # through kubectl's plugin mechanism: kubectl-swarmkit found on PATH
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "NO_COLOR": "1",
        "PATH": f"{Path(CLI).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    res = subprocess.run(
        [str(binary("kubectl")), "swarmkit", "status", "-n", ns],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert any(line.split()[:3] == ["Skill", "5", "5"] for line in lines), res.stdout
    assert "Ready=False" not in res.stdout
    summary = json.loads(cli(cluster, "status", "-n", ns, "-o", "json").stdout)
    # the only thing worth attention: the script, unless an earlier test approved it
    assert {(p["name"], p["condition"]) for p in summary["problems"]} <= {
        ("incident-triage", "ScriptsApproved")
    }
    assert "\033[" not in res.stdout  # NO_COLOR and a pipe
    # An agent naming a permission bundle the workspace does not define fails.
    bad = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "lost-agent", "namespace": ns},
        "spec": {"permissionsBundle": "no-such-bundle"},
    }
    kube.custom.create_namespaced_custom_object(
        "swarmkit.dev", "v1alpha1", ns, PLURALS["Agent"], bad
    )

    def failing() -> subprocess.CompletedProcess[str] | None:
        r = cli(cluster, "status", "-n", ns, "-o", "json")
        return r if r.returncode == 1 else None

    res = wait_for(failing, 60, message=lambda: debug(kube, ns, operator))
    summary = json.loads(res.stdout)
    (problem,) = [p for p in summary["problems"] if p["name"] == "lost-agent"]
    assert problem["status"] == "False" and "no-such-bundle" in problem["message"]
    assert summary["objects"]["Agent"]["False"] == 1
