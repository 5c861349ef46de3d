"""``kubectl swarmkit import`` end to end: each fixture workspace (a SwarmKit workspace, a
Swarm bundle and an Agent Skills collection, written to upstream's formats) imported with
the installed console script, applied with the import how-to's command (``kubectl apply
--server-side -k``) to the real apiserver, and Ready under the real operator; then ``pin``
on an imported skill directory, fed to the operator's configuration, turns its script
Approved; ``status`` reports the workspace, reached with kubectl's global flags placed
before the subcommand and a KUBECONFIG of two files."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.paths import binary
from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import CLI, PLURALS, OperatorProcess, cli, debug, get

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import_tree"
INCIDENT_TRIAGE = FIXTURES / "vectorstep" / "skills" / "incident-triage"


def import_and_apply(
    cluster: LocalCluster, namespace: str, source: Path, out: Path
) -> list[dict[str, Any]]:
    """``source`` imported into ``out``, applied server-side, its Secret filled."""
    t0 = time.perf_counter()
    res = cli(cluster, "import", str(source), "-n", namespace, "-o", str(out))
    print(f"[import] {source.name}: {time.perf_counter() - t0:.2f}s (process, incl. start-up)")
    assert res.returncode == 0, res.stderr
    assert f"kubectl apply --server-side -k {out}" in res.stderr
    cluster.kubectl("apply", "--server-side", "-k", str(out))
    for template in out.glob("secret-*.template.yaml"):
        secret = yaml.safe_load(template.read_text())
        secret["stringData"] = {k: f"test-{k.lower()}" for k in secret["stringData"]}
        cluster.kubectl("apply", "-f", "-", input=json.dumps(secret))
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    return [yaml.safe_load((out / r).read_text()) for r in kustomization["resources"]]


@pytest.fixture
def imported(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> tuple[str, list[dict[str, Any]]]:
    """The Agent Skills collection imported and applied."""
    return namespace, import_and_apply(cluster, namespace, FIXTURES / "vectorstep", tmp_path)


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


def test_a_swarmkit_workspace_becomes_ready(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    docs = import_and_apply(cluster, namespace, FIXTURES / "swarmkit", tmp_path)
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert names == {
        ("Workspace", "incident-desk"),
        ("Skill", "search-web"),
        ("Skill", "code-quality-review"),
        ("Skill", "summarize-findings"),
        ("Skill", "research-and-review"),
        ("Agent", "coordinator"),
        ("Agent", "researcher"),
        ("Agent", "triage-researcher"),
        ("Agent", "triage-reviewer"),
        ("Agent", "deep-research-planner"),
        ("Topology", "triage"),
        ("Topology", "deep-research"),
    }
    for doc in docs:
        _wait_ready(kube, namespace, doc, operator)
    ws = get(kube, namespace, "Workspace", "incident-desk")
    assert ws is not None
    servers = {s["id"]: s for s in ws["spec"]["mcpServers"]}
    assert servers["review-server"]["url"] == "https://review.internal/mcp"
    providers = {p["name"]: p for p in ws["spec"]["modelProviders"]}
    assert providers["openrouter"]["baseUrl"] == "https://openrouter.ai/api/v1"
    coordinator = get(kube, namespace, "Agent", "coordinator")
    assert coordinator is not None
    # the abstract {decision, quality} entry, bound as SwarmKit binds it
    assert coordinator["spec"]["skills"] == ["research-and-review", "code-quality-review"]
    assert coordinator["spec"]["systemPrompt"].startswith("You coordinate incident response.")
    topo = get(kube, namespace, "Topology", "triage")
    assert topo is not None
    assert set(topo["status"]["agentVersions"]) == {
        "coordinator",
        "triage-researcher",
        "triage-reviewer",
    }


def test_a_swarm_bundle_becomes_ready(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    docs = import_and_apply(cluster, namespace, FIXTURES / "swarm", tmp_path)
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert names == {
        ("Workspace", "support-desk"),
        ("Agent", "triage-agent"),
        ("Agent", "analysis-agent"),
        ("Agent", "escalation-agent"),
    }
    for doc in docs:
        _wait_ready(kube, namespace, doc, operator)
    triage = get(kube, namespace, "Agent", "triage-agent")
    assert triage is not None
    # the intent file is the prompt, byte for byte
    intent = (FIXTURES / "swarm" / "prompts" / "triage.md").read_text()
    assert triage["spec"]["systemPrompt"] == intent
    assert triage["spec"]["permissionsBundle"] == "coordinator"
    esc = get(kube, namespace, "Agent", "escalation-agent")
    assert esc is not None and esc["spec"]["tools"] == ["escalation_knowledge_base_search"]
    ws = get(kube, namespace, "Workspace", "support-desk")
    assert ws is not None
    tools = {t["name"]: t for t in ws["spec"]["tools"]}
    assert (
        tools["refund_order"]["http"]["url"] == "https://billing.internal/orders/{order_id}/refund"
    )


def test_an_agent_skills_collection_becomes_ready(
    kube: Kube, imported: tuple[str, list[dict[str, Any]]], operator: OperatorProcess
) -> None:
    ns, docs = imported
    assert {(d["kind"], d["metadata"]["name"]) for d in docs} == {
        ("ConfigMap", "release-notes-files"),
        ("Skill", "incident-triage"),
        ("Skill", "release-notes"),
    }
    for doc in docs:
        if doc["kind"] == "Skill":
            _wait_ready(kube, ns, doc, operator)
    notes = get(kube, ns, "Skill", "release-notes")
    assert notes is not None
    assert notes["metadata"]["annotations"]["agentskills.io/metadata.author"] == "docs-team"
    # the binary logo came through its ConfigMap, hashed like any file
    assert "2 file(s)" in next(
        c["message"] for c in notes["status"]["conditions"] if c["type"] == "Ready"
    )


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
    tmp_path: Path,
) -> None:
    ns, docs = imported
    for doc in docs:
        if doc["kind"] == "Skill":
            _wait_ready(kube, ns, doc, operator)
    # through kubectl's plugin mechanism (kubectl-swarmkit found on PATH), the global flag
    # before the subcommand, and KUBECONFIG naming two files: one with another context
    # only, then the cluster's (kubectl's merge: its current-context is the one used)
    other = tmp_path / "other-kubeconfig"
    other.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "elsewhere", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "nobody", "user": {"token": "x"}}],
                "contexts": [
                    {"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "nobody"}}
                ],
            }
        )
    )
    env = {
        **os.environ,
        "KUBECONFIG": f"{other}{os.pathsep}{cluster.kubeconfig}",
        "NO_COLOR": "1",
        "PATH": f"{Path(CLI).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    res = subprocess.run(
        [str(binary("kubectl")), "swarmkit", "-n", ns, "status"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert any(line.split()[:3] == ["Skill", "2", "2"] for line in lines), res.stdout
    assert "Ready=False" not in res.stdout
    summary = json.loads(cli(cluster, "status", "-n", ns, "-o", "json").stdout)
    # the only thing worth attention: the script, unless an earlier test approved it
    assert {(p["name"], p["condition"]) for p in summary["problems"]} <= {
        ("incident-triage", "ScriptsApproved")
    }
    assert "\033[" not in res.stdout  # NO_COLOR and a pipe
    # An agent naming a Workspace that does not exist fails.
    bad = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "lost-agent", "namespace": ns},
        "spec": {"workspaceRef": {"name": "no-such-workspace"}},
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
    assert problem["status"] == "False" and "no-such-workspace" in problem["message"]
    assert summary["objects"]["Agent"]["False"] == 1
