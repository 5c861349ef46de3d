"""checkov (a third-party Kubernetes scanner) over the chart and over every object the
operator creates for a Run, a served Topology and an Agent gateway.

Every failed check must be one docs/isolation.md justifies (the ``JUSTIFIED`` table names
them, and the document must list each id), and a justified check that passes again is
dropped from the table (no stale excuses). checkov lives in its own virtualenv under
``~/.cache/swarmkit-operator`` (``make checkov``): its pins (packaging<24, boto3==1.35.49,
networkx<2.7) conflict with the project's.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from swarmkit_devcluster.paths import binary
from swarmkit_operator.builders import gateway as gw
from swarmkit_operator.builders import netpol
from swarmkit_operator.builders.bundle import build_bundle_config_map
from swarmkit_operator.builders.job import (
    RUN_UID_LABEL,
    build_job,
    bundle_config_map_name,
    job_name,
    owner_reference,
)
from swarmkit_operator.config import OperatorConfig

from .fixtures import example_bundle
from .test_gateway_builder import AGENT, gateway_spec, manifests, rendered
from .test_serve_builders import serve_spec, workload

REPO = Path(__file__).resolve().parents[3]
CHECKOV_VERSION = "3.3.30"
CHECKOV = Path.home() / ".cache" / "swarmkit-operator" / f"checkov-{CHECKOV_VERSION}"

#: check id → (the objects it fails on, why that is accepted; docs/isolation.md says more).
JUSTIFIED: dict[str, tuple[set[str], str]] = {
    "CKV_K8S_11": ({"operator"}, "no CPU limit on the operator: CFS throttling stalls its "
                   "watches and lease renewals; requests are set, limits are a values choice"),
    "CKV_K8S_15": ({"operator", "run", "serve", "gateway"}, "imagePullPolicy "
                   "IfNotPresent by default: tags are immutable releases (or digests); "
                   "image.pullPolicy / runtime.imagePullPolicy choose Always"),
    "CKV_K8S_35": ({"serve", "gateway"}, "bearer tokens (and a Run's credentials) arrive "
                   "as env from secretKeyRef; the runner masks them in its /proc environ block and "
                   "starts every script and MCP server with an explicit environment"),
    "CKV_K8S_38": ({"operator", "gateway"}, "the operator, and a gateway opening Reviews, "
                   "talk to the apiserver with their own service account token"),
    "CKV_K8S_43": ({"operator", "run", "serve", "gateway"}, "images by tag by default; "
                   "image.digest / runtime.image take a digest"),
    "CKV2_K8S_6": ({"operator"}, "the operator's pod has no NetworkPolicy: it must reach "
                   "the apiserver, whose address a chart cannot know"),
}  # fmt: skip


def _run_objects() -> list[dict[str, Any]]:
    run, r = example_bundle()
    plan = netpol.plan(r.bundle, None, lambda h: ["203.0.113.7"])
    assert plan is not None
    bundle = r.bundle.model_copy(update={"egress": plan})
    r = r.__class__(**{**r.__dict__, "bundle": bundle, "bundle_json": bundle.to_json()})
    cm = build_bundle_config_map(run.ref, r)
    job = build_job(
        run=run.ref,
        bundle=bundle,
        skill_mounts=r.skill_mounts,
        config=OperatorConfig(),
        bundle_config_map=bundle_config_map_name(run.name, run.uid),
        flow_data_keys=r.flow_data_keys,
    )
    policy = netpol.build_network_policy(
        name=job_name(run.name, run.uid),
        namespace=run.ref.namespace,
        owner=owner_reference(run.ref),
        pod_selector={RUN_UID_LABEL: run.uid},
        labels={},
        egress_plan=plan,
    )
    return [cm, job, policy]


def _workload_policy(dep: dict[str, Any], bundle: Any, port: int) -> dict[str, Any]:
    plan = netpol.plan(bundle, None, lambda h: ["203.0.113.7"])
    assert plan is not None
    meta = dep["metadata"]
    return netpol.build_network_policy(
        name=meta["name"],
        namespace=meta["namespace"],
        owner=meta["ownerReferences"][0],
        pod_selector=dep["spec"]["selector"]["matchLabels"],
        labels={},
        egress_plan=plan,
        ingress_ports=[port],
    )


def _serve_objects() -> list[dict[str, Any]]:
    _, r = example_bundle()
    cm, dep, svc = workload()
    return [cm, dep, svc, _workload_policy(dep, r.bundle, serve_spec().port)]


def _gateway_objects() -> list[dict[str, Any]]:
    spec = gateway_spec()
    render = rendered()
    cm, dep, svc = manifests(spec, render)
    rbac = gw.review_rbac(AGENT, gw.service_account(AGENT.name, render))
    return [cm, dep, svc, *rbac, _workload_policy(dep, render.bundle, spec.port)]


def _chart(*values: str) -> list[dict[str, Any]]:
    sets = [arg for value in values for arg in ("--set", value)]
    out = subprocess.run(
        [str(binary("helm")), "template", "sk", str(REPO / "charts" / "swarmkit-operator"),
         "-n", "sk-system", *sets],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return [d for d in yaml.safe_load_all(out) if d]


def _failed(docs: Iterable[dict[str, Any]], tmp: Path) -> dict[str, set[str]]:
    """check id → the resources it failed on."""
    python = CHECKOV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"checkov {CHECKOV_VERSION} is not installed: run `make checkov`")
    path = tmp / "objects.yaml"
    path.write_text(yaml.safe_dump_all(list(docs)))
    proc = subprocess.run(
        [str(python), "-m", "checkov.main", "-f", str(path), "--framework", "kubernetes",
         "-o", "json", "--quiet", "--skip-download"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: some check failed
    reports = json.loads(proc.stdout)
    out: dict[str, set[str]] = {}
    for report in reports if isinstance(reports, list) else [reports]:
        assert report["summary"]["parsing_errors"] == 0
        assert report["summary"]["passed"] > 0
        for check in report["results"]["failed_checks"]:
            out.setdefault(check["check_id"], set()).add(check["resource"])
    return out


@pytest.fixture(scope="module")
def failures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[str]]]:
    tmp = tmp_path_factory.mktemp("checkov")
    sets = {
        "operator": _chart(),
        "run": _run_objects(),
        "serve": _serve_objects(),
        "gateway": _gateway_objects(),
    }
    out = {}
    for name, docs in sets.items():
        (tmp / name).mkdir()
        out[name] = _failed(docs, tmp / name)
    return out


def test_every_failed_check_is_justified(failures: dict[str, dict[str, set[str]]]) -> None:
    unjustified = {
        f"{check} on {what}: {sorted(resources)}"
        for what, failed in failures.items()
        for check, resources in failed.items()
        if what not in JUSTIFIED.get(check, (set(), ""))[0]
    }
    assert not unjustified, "\n".join(sorted(unjustified))


def test_no_stale_justification(failures: dict[str, dict[str, set[str]]]) -> None:
    stale = {
        f"{check} on {what}"
        for check, (whats, _) in JUSTIFIED.items()
        for what in whats
        if check not in failures[what]
    }
    assert not stale, f"these checks pass now; drop them from JUSTIFIED and the docs: {stale}"


def test_run_serve_and_gateway_pods_have_their_network_policy(
    failures: dict[str, dict[str, set[str]]],
) -> None:
    # the scanner's finding that started issue 29: pods without a NetworkPolicy
    for what in ("run", "serve", "gateway"):
        assert "CKV2_K8S_6" not in failures[what], failures[what]["CKV2_K8S_6"]


def test_docs_justify_every_accepted_check() -> None:
    text = (REPO / "docs" / "isolation.md").read_text()
    missing = [check for check in JUSTIFIED if check not in text]
    assert not missing, f"docs/isolation.md does not justify {missing}"


def _results(docs: Iterable[dict[str, Any]], tmp: Path, check: str) -> dict[str, set[str]]:
    """The resources ``check`` passed ("passed") and failed ("failed") on."""
    path = tmp / "objects.yaml"
    path.write_text(yaml.safe_dump_all(list(docs)))
    proc = subprocess.run(
        [str(CHECKOV / "bin" / "python"), "-m", "checkov.main", "-f", str(path),
         "--framework", "kubernetes", "-o", "json", "--skip-download", "--check", check],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    reports = json.loads(proc.stdout)
    out: dict[str, set[str]] = {"passed": set(), "failed": set()}
    for report in reports if isinstance(reports, list) else [reports]:
        for state in ("passed", "failed"):
            out[state] |= {c["resource"] for c in report["results"][f"{state}_checks"]}
    return out


def _one_rule_per_role(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each (Cluster)Role split into one role per rule, each bound like the original.

    CKV2_K8S_5 matches a role's ``rules`` as a whole and misses one rule among many: the
    chart before issue 41 (``list``/``watch`` on Secrets in a 30-rule ClusterRole) passed
    it. One rule per role lets it see every rule (that chart then fails it)."""
    split: dict[tuple[str, str], list[str]] = {}
    out: list[dict[str, Any]] = []
    for doc in docs:
        rules = doc.get("rules") or []
        if doc["kind"] not in ("ClusterRole", "Role") or len(rules) < 2:
            out.append(doc)
            continue
        name = doc["metadata"]["name"]
        names = [f"{name}-rule{i}" for i in range(len(rules))]
        split[(doc["kind"], name)] = names
        out += [
            {**doc, "metadata": {**doc["metadata"], "name": n}, "rules": [rule]}
            for n, rule in zip(names, rules, strict=True)
        ]
    bound: list[dict[str, Any]] = []
    for doc in out:
        ref = doc.get("roleRef") or {}
        names = split.get((ref.get("kind", ""), ref.get("name", "")), [])
        if doc["kind"] not in ("ClusterRoleBinding", "RoleBinding") or not names:
            bound.append(doc)
            continue
        bound += [
            {**doc, "metadata": {**doc["metadata"], "name": n}, "roleRef": {**ref, "name": n}}
            for n in names
        ]
    return bound


def test_checkov_finds_no_secret_read_in_either_install_mode(tmp_path: Path) -> None:
    """Issue 41: CKV2_K8S_5 ("No ServiceAccount/Node should be able to read all secrets")
    passes on every binding of the chart, cluster-wide and with watchNamespaces, each
    rule looked at on its own; the same chart with a `list` on Secrets added fails it."""
    if not (CHECKOV / "bin" / "python").exists():
        pytest.fail(f"checkov {CHECKOV_VERSION} is not installed: run `make checkov`")
    modes = {"cluster-wide": _chart(), "namespaced": _chart("watchNamespaces={team-a,team-b}")}
    for mode, docs in modes.items():
        split = _one_rule_per_role(docs)
        (tmp_path / mode).mkdir()
        found = _results(split, tmp_path / mode, "CKV2_K8S_5")
        bindings = [d for d in split if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
        assert found["failed"] == set(), (mode, found["failed"])
        assert len(found["passed"]) == len(bindings) > 20, (mode, found)
    widened = _chart()
    for doc in widened:
        if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "sk-swarmkit-operator":
            doc["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]})
    (tmp_path / "widened").mkdir()
    found = _results(_one_rule_per_role(widened), tmp_path / "widened", "CKV2_K8S_5")
    assert len(found["failed"]) == 1, found["failed"]
