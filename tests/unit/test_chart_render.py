"""`helm lint` and `helm template` of charts/swarmkit-operator with several values combinations.

No cluster: the real helm binary (built by `make cluster-binaries`) renders the chart and the
tests inspect the manifests. tests/integration/test_helm_*.py validate the same renders
against the real apiserver (server-side dry-run) and install them. The helpers here
(``helm``, ``render``, ``by_kind``) are imported by those integration tests too.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from swarmkit_api import KINDS
from swarmkit_devcluster.paths import OAUTH2_PROXY_VERSION
from swarmkit_operator.config import parse_config

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "swarmkit-operator"
RELEASE = "sk"
NAMESPACE = "swarmkit-system"
PIN = hashlib.sha256(b"print('hi')\n").hexdigest()
PLURALS = sorted(k.plural for k in KINDS)


def helm_binary() -> Path:
    from swarmkit_devcluster.paths import binary

    path = binary("helm")
    if not path.exists():
        pytest.fail(f"helm is not built ({path}); run `make cluster-binaries`", pytrace=False)
    return path


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=120, check=False
    )
    if check and res.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{res.stderr}")
    return res


def _values_args(values: dict[str, Any] | None, tmp: Path) -> list[str]:
    if not values:
        return []
    path = tmp / "values.json"
    path.write_text(json.dumps(values))
    return ["-f", str(path)]


def render_text(
    values: dict[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    extra: Sequence[str] = (),
) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        res = helm(
            "template",
            release,
            str(CHART),
            "--namespace",
            namespace,
            "--include-crds",
            *_values_args(values, Path(tmp)),
            *extra,
        )
    return res.stdout


def render(
    values: dict[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    extra: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The chart's manifests (templates and crds/) for these values."""
    text = render_text(values, release=release, namespace=namespace, extra=extra)
    return [d for d in yaml.safe_load_all(text) if d]


def render_error(values: dict[str, Any]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        res = helm("template", RELEASE, str(CHART), *_values_args(values, Path(tmp)), check=False)
    assert res.returncode != 0, f"helm accepted values {values}"
    return res.stderr


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    return dict(c)


def operator_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    cm = one(docs, "ConfigMap", f"{RELEASE}-swarmkit-operator-config")
    data = yaml.safe_load(cm["data"]["config.yaml"])
    assert isinstance(data, dict)
    return data


# -- lint -------------------------------------------------------------------------------------

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "namespaced": {"watchNamespaces": ["team-a", "team-b"]},
    "peered": {"replicaCount": 3},
    "peered-namespaced": {"replicaCount": 2, "watchNamespaces": ["team-a"]},
    "everything-on": {
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
        "networkPolicy": {"enabled": True, "apiServerCidrs": ["10.0.0.1/32"]},
        "podDisruptionBudget": {"enabled": True},
        "replicaCount": 2,
        "config": {
            "security": {
                "skills": {
                    "allowScriptExecution": True,
                    "allowed": [{"skill": "triage", "path": "scripts/a.py", "sha256": PIN}],
                }
            }
        },
    },
    "minimal": {
        "crds": {"install": False},
        "metrics": {"enabled": False},
        "rbac": {"aggregateToUserRoles": False},
    },
    "digest-images": {
        "image": {"digest": "sha256:" + "a" * 64},
        "runtimeImage": {"tag": "9.9.9"},
    },
}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_helm_lint(name: str, tmp_path: Path) -> None:
    res = helm("lint", "--strict", str(CHART), *_values_args(VALUE_SETS[name], tmp_path))
    assert "0 chart(s) failed" in res.stdout


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_value_set_renders_labelled_namespaced_objects(name: str) -> None:
    docs = render(VALUE_SETS[name])
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
    cluster_scoped.add("ClusterKopfPeering")
    cluster_scoped |= {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] in cluster_scoped:
            assert "namespace" not in meta, doc["kind"]
        else:
            assert meta.get("namespace"), f"{doc['kind']} {meta['name']} has no namespace"
        if doc["kind"] != "CustomResourceDefinition" or doc["spec"]["group"] != "kopf.dev":
            assert meta["labels"]["app.kubernetes.io/part-of"] == "swarmkit-operator"


# -- the Deployment ---------------------------------------------------------------------------


def test_defaults_one_replica_leader_elected_all_namespaces() -> None:
    docs = render()
    deploy = one(docs, "Deployment")
    assert deploy["spec"]["replicas"] == 1
    # Leader election is always on: a rollout's new pod stands by until the old one hands
    # the Lease over, so the rollout can surge without two writers.
    assert deploy["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    # All namespaces is the entry point's default (no watchNamespaces in the configuration).
    assert container(docs)["args"] == [
        "--liveness=http://0.0.0.0:8080/healthz",
        "--metrics-port=9090",
        "--leader-elect",
        f"--leader-election-id={RELEASE}-swarmkit-operator",
        "--lease-duration=12",
        "--renew-deadline=8",
        "--retry-period=2",
        "--log-format=json",
    ]
    assert operator_config(docs)["watchNamespaces"] == []
    crds = {d["metadata"]["name"] for d in by_kind(docs, "CustomResourceDefinition")}
    assert not {c for c in crds if c.endswith("kopf.dev")}  # no kopf peering any more


def test_image_is_the_operator_entry_point_without_a_command_override() -> None:
    c = container(render())
    # The image's entry point is `python -m swarmkit_operator`; the process node maps the
    # repository suffix `swarmkit-operator` to exactly that, so the chart sets args only.
    assert "command" not in c
    assert c["image"] == "ghcr.io/swarmkit-operator/swarmkit-operator:0.1.0"
    digest = "sha256:" + "b" * 64
    c = container(render({"image": {"digest": digest, "tag": "ignored"}}))
    assert c["image"] == f"ghcr.io/swarmkit-operator/swarmkit-operator@{digest}"


def test_restricted_security_context_probes_and_resources() -> None:
    docs = render()
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    c = container(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in sc
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"health": 8080, "metrics": 9090}
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert c["resources"]["limits"] == {"memory": "512Mi"}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/etc/swarmkit-operator"]["readOnly"] is True
    assert "/tmp" in mounts  # writable scratch on a read-only root
    env = {e["name"]: e for e in c["env"]}
    assert env["SWARMKIT_OPERATOR_CONFIG"]["value"] == "/etc/swarmkit-operator/config.yaml"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert pod["automountServiceAccountToken"] is True
    sa = one(docs, "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == sa["metadata"]["name"]


def test_replicas_above_one_share_one_lease_in_the_release_namespace() -> None:
    docs = render({"replicaCount": 3, "leaderElection": {"leaseName": "ops-lease"}})
    deploy = one(docs, "Deployment")
    assert deploy["spec"]["replicas"] == 3
    args = container(docs)["args"]
    assert "--leader-elect" in args and "--leader-election-id=ops-lease" in args
    role = one(docs, "Role", f"{RELEASE}-swarmkit-operator-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["ops-lease"],
            "verbs": ["get", "update"],
        },
    ]
    binding = one(docs, "RoleBinding", f"{RELEASE}-swarmkit-operator-leader-election")
    assert binding["subjects"][0]["name"] == one(docs, "ServiceAccount")["metadata"]["name"]
    env = {e["name"]: e for e in container(docs)["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_lease_timings_must_be_ordered() -> None:
    error = render_error({"leaderElection": {"leaseDurationSeconds": 8, "renewDeadlineSeconds": 8}})
    assert "leaseDurationSeconds > renewDeadlineSeconds" in error


# -- configuration and rollout ----------------------------------------------------------------


def _approvals(*entries: dict[str, str], allow: bool = True) -> dict[str, Any]:
    return {
        "config": {
            "security": {"skills": {"allowScriptExecution": allow, "allowed": list(entries)}}
        }
    }


def test_operator_config_is_what_config_py_reads() -> None:
    entry = {"skill": "incident-triage", "path": "scripts/classify.py", "sha256": PIN.upper()}
    scoped = {**entry, "namespace": "team-a", "skill": "other"}
    docs = render(
        {
            **_approvals(entry, scoped),
            "watchNamespaces": ["team-a"],
            "runtimeImage": {"tag": "1.2.3"},
        }
    )
    config = parse_config(operator_config(docs))
    assert config.allow_script_execution is True
    assert config.runtime_image == "ghcr.io/swarmkit-operator/swarmkit-runtime:1.2.3"
    assert config.watch_namespaces == ("team-a",)
    assert config.max_job_recreations == 2
    pin = config.pin_for("anywhere", "incident-triage", "scripts/classify.py")
    assert pin is not None and pin.sha256 == PIN  # normalized to lower case
    assert config.pin_for("team-b", "other", "scripts/classify.py") is None
    assert config.pin_for("team-a", "other", "scripts/classify.py") is not None


def test_default_config_approves_nothing() -> None:
    config = parse_config(operator_config(render()))
    assert config.allow_script_execution is False
    assert config.allowed_scripts == ()
    assert config.runtime_image == "ghcr.io/swarmkit-operator/swarmkit-runtime:0.1.0"


def _checksum(docs: list[dict[str, Any]]) -> str:
    meta = one(docs, "Deployment")["spec"]["template"]["metadata"]
    return str(meta["annotations"]["checksum/config"])


def test_changing_an_approval_changes_the_pod_template() -> None:
    entry = {"skill": "incident-triage", "path": "scripts/classify.py", "sha256": PIN}
    base = _checksum(render(_approvals(entry)))
    assert base == _checksum(render(_approvals(entry)))  # deterministic
    other = {**entry, "sha256": hashlib.sha256(b"tampered").hexdigest()}
    assert _checksum(render(_approvals(other))) != base
    assert _checksum(render(_approvals(entry, allow=False))) != base
    assert _checksum(render({**_approvals(entry), "logging": {"verbose": True}})) == base


# -- CRDs -------------------------------------------------------------------------------------


def _swarmkit_crds(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d for d in by_kind(docs, "CustomResourceDefinition") if d["spec"]["group"] == "swarmkit.dev"
    ]


def test_crds_installed_and_kept_by_default() -> None:
    crds = _swarmkit_crds(render())
    assert sorted(c["spec"]["names"]["plural"] for c in crds) == PLURALS
    for crd in crds:
        annotations = crd["metadata"]["annotations"]
        assert annotations["helm.sh/resource-policy"] == "keep"
        assert annotations["argocd.argoproj.io/sync-wave"] == "-10"


def test_crds_install_and_keep_switches() -> None:
    assert not _swarmkit_crds(render({"crds": {"install": False}}))
    for crd in _swarmkit_crds(render({"crds": {"keep": False}})):
        assert "helm.sh/resource-policy" not in crd["metadata"]["annotations"]


# -- optional objects -------------------------------------------------------------------------


def test_metrics_service_and_service_monitor() -> None:
    docs = render()
    svc = one(docs, "Service")
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert svc["spec"]["selector"] == one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert not by_kind(docs, "ServiceMonitor")
    sm = one(render(VALUE_SETS["everything-on"]), "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    off = render({"metrics": {"enabled": False}})
    assert not by_kind(off, "Service")
    assert "--metrics-port=0" in container(off)["args"]  # the entry point's default is 8080


def test_web_view_is_off_by_default_and_on_behind_a_cluster_ip_service() -> None:
    docs = render()
    assert not any(a.startswith("--web-view") for a in container(docs)["args"])
    assert not [d for d in by_kind(docs, "Service") if d["metadata"]["name"].endswith("-web")]
    assert parse_config(operator_config(docs)).skill_history_limit == 10

    single = {"webView": {"enabled": True, "singleUser": True}}
    on = render({**single, "config": {"skillLibrary": {"historyLimit": 3}}})
    assert "--web-view=0.0.0.0:8082" in container(on)["args"]
    assert "--web-view-single-user" in container(on)["args"]
    assert {"name": "web", "containerPort": 8082, "protocol": "TCP"} in container(on)["ports"]
    assert len(one(on, "Deployment")["spec"]["template"]["spec"]["containers"]) == 1
    svc = one(on, "Service", f"{RELEASE}-swarmkit-operator-web")
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [
        {"name": "web", "port": 8082, "targetPort": "web", "protocol": "TCP"}
    ]
    assert parse_config(operator_config(on)).skill_history_limit == 3
    assert "webView.port must differ" in render_error(
        {"webView": {"enabled": True, "singleUser": True, "port": 8080}}
    )


def test_a_per_user_web_view_listens_on_loopback_behind_the_proxy_container() -> None:
    docs = render(
        {
            "webView": {
                "enabled": True,
                "proxy": {"args": ["--provider=oidc"], "envFromSecret": "web-oidc"},
            }
        }
    )
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    operator, proxy = pod["containers"]
    assert (operator["name"], proxy["name"]) == ("operator", "web-proxy")
    assert "--web-view=127.0.0.1:8083" in operator["args"]
    assert "--web-view-single-user" not in operator["args"]
    assert not [p for p in operator["ports"] if p["name"] == "web"]
    # the version tests/integration/test_webview_users.py signs people in through
    assert proxy["image"] == f"quay.io/oauth2-proxy/oauth2-proxy:{OAUTH2_PROXY_VERSION}"
    assert proxy["args"] == [
        "--http-address=0.0.0.0:8082",
        "--upstream=http://127.0.0.1:8083/",
        "--pass-user-headers=true",
        "--skip-auth-strip-headers=true",
        "--provider=oidc",
    ]
    assert proxy["envFrom"] == [{"secretRef": {"name": "web-oidc"}}]
    assert proxy["ports"] == [{"name": "web", "containerPort": 8082, "protocol": "TCP"}]
    assert proxy["securityContext"]["readOnlyRootFilesystem"] is True
    svc = one(docs, "Service", f"{RELEASE}-swarmkit-operator-web")
    assert svc["spec"]["ports"][0]["targetPort"] == "web"
    assert "webView.localPort must differ" in render_error(
        {"webView": {"enabled": True, "localPort": 8082}}
    )


def test_network_policy_allows_only_the_apiserver_dns_and_metrics() -> None:
    docs = render(VALUE_SETS["everything-on"])
    np = one(docs, "NetworkPolicy")
    assert np["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert np["spec"]["ingress"] == [{"ports": [{"port": "metrics", "protocol": "TCP"}]}]
    api, dns = np["spec"]["egress"]
    assert api["to"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]
    assert sorted(p["port"] for p in api["ports"]) == [443, 6443]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert not by_kind(render(), "NetworkPolicy")


def test_pod_disruption_budget() -> None:
    pdb = one(render(VALUE_SETS["everything-on"]), "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
    pdb = one(
        render({"podDisruptionBudget": {"enabled": True, "minAvailable": 1, "maxUnavailable": ""}}),
        "PodDisruptionBudget",
    )
    assert pdb["spec"]["minAvailable"] == 1 and "maxUnavailable" not in pdb["spec"]
    assert not by_kind(render(), "PodDisruptionBudget")


def test_notes_tell_the_user_what_to_apply_next() -> None:
    res = helm("install", RELEASE, str(CHART), "--dry-run=client", "-n", NAMESPACE)
    notes = res.stdout.split("NOTES:", 1)[1]
    assert "rollout status deployment/sk-swarmkit-operator" in notes
    assert "examples/00-workspace.yaml" in notes and "examples/40-run.yaml" in notes
    assert "argocd.argoproj.io/sync-wave" in notes
    assert "config.security.skills.allowed[0].sha256" in notes


def test_reviewer_role_and_admission_policy() -> None:
    docs = render()
    reviewer = next(d for d in docs if d["metadata"]["name"] == "swarmkit-reviewer")
    selector = reviewer["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]
    assert selector == {"swarmkit.dev/aggregate-to-reviewer": "true"}
    rules = next(d for d in docs if d["metadata"]["name"] == "swarmkit-reviewer-reviews")
    assert rules["metadata"]["labels"]["swarmkit.dev/aggregate-to-reviewer"] == "true"
    # the built-in edit and admin get no write verb on Reviews
    for doc in docs:
        labels = doc["metadata"].get("labels", {})
        if doc["kind"] == "ClusterRole" and any(
            "aggregate-to-edit" in k or "aggregate-to-admin" in k for k in labels
        ):
            for rule in doc["rules"]:
                assert "reviews" not in rule["resources"], doc["metadata"]["name"]
    kinds = {d["kind"] for d in docs}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds
    off = render({"reviews": {"admissionPolicy": False}, "rbac": {"reviewerRole": False}})
    assert not {d["kind"] for d in off} & {"ValidatingAdmissionPolicy"}
    assert not [d for d in off if d["metadata"]["name"].startswith("swarmkit-reviewer")]
