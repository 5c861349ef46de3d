"""The operator's identity as the Helm chart deploys it, for operators the tests start.

The chart gives the operator a ServiceAccount bound to the RBAC it renders (a ClusterRole
or per-namespace Roles, and a Role for the leader-election Lease in its own namespace).
:func:`chart_operator_kubeconfig` renders the chart's RBAC with ``helm template`` (the
chart as shipped, default values), applies it to the cluster, asks the TokenRequest API
for a token of that ServiceAccount and writes a kubeconfig with it: an operator started
with that kubeconfig can do exactly what the chart lets it do, so a call the chart does
not grant fails the test that makes it (HTTP 403), as it would fail for a user.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from swarmkit_devcluster.cluster import write_kubeconfig
from swarmkit_devcluster.kubeapi import KubeClient
from swarmkit_devcluster.locks import exclusive
from swarmkit_devcluster.paths import binary, repo_root

#: The release the tests' operators stand for, and where its ServiceAccount lives.
CHART = "swarmkit-operator"
RELEASE = CHART
NAMESPACE = "swarmkit-system"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
#: Only the operator's own objects: the chart's user-facing roles are for people.
OPERATOR_ROLE_SUFFIXES = ("", "-leader-election")


def fullname(release: str) -> str:
    """The chart's ``swarmkit-operator.fullname`` of ``release`` (its ServiceAccount, its
    (Cluster)Roles and its default Lease name)."""
    return release if CHART in release else f"{release}-{CHART}"


def chart_rbac(
    values: dict[str, Any] | None = None, release: str = RELEASE
) -> list[dict[str, Any]]:
    """The operator's ServiceAccount and RBAC objects as ``helm template`` renders them.

    Default values: every namespace, with the ClusterRole. With ``watchNamespaces`` a Role
    and RoleBinding in each of them, plus the small ClusterRole every mode has (no grant on
    Namespaces: the operator follows none, issue 41)."""
    return _render(values, release)


def _render(values: dict[str, Any] | None, release: str = RELEASE) -> list[dict[str, Any]]:
    args = [str(binary("helm")), "template", release, str(repo_root() / "charts" / CHART)]
    args += ["--namespace", NAMESPACE]
    for key, value in (values or {}).items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    names = {fullname(release) + suffix for suffix in OPERATOR_ROLE_SUFFIXES}
    picked = []
    for doc in docs:
        if doc.get("kind") not in RBAC_KINDS:
            continue
        if doc["kind"] != "ServiceAccount" and doc["metadata"]["name"] not in names:
            continue
        picked.append(doc)
    return picked


def team_secret_grant(namespace: str, secret: str, release: str = RELEASE) -> list[dict[str, Any]]:
    """The Role + RoleBinding a team applies so the operator may ``get`` the one Secret a
    Workspace mailbox's webhook names (``rbac.py``'s ``team`` grant; the chart grants no verb
    on Secrets). The same manifest as docs/reference/rbac.md shows."""
    name = f"swarmkit-operator-secret-{secret}"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": [secret],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": fullname(release), "namespace": NAMESPACE}
            ],
        },
    ]


def chart_operator_kubeconfig(
    admin_kubeconfig: Path,
    *,
    refresh: bool = False,
    values: dict[str, Any] | None = None,
    release: str = RELEASE,
) -> Path:
    """A kubeconfig holding a token of the chart's operator ServiceAccount, next to the
    cluster's admin kubeconfig (cached; the RBAC is applied again when ``refresh``).

    Another ``release`` (with its ``values``, e.g. ``watchNamespaces``) is another
    ServiceAccount with only that release's grants: an operator installed per namespace."""
    admin_kubeconfig = Path(admin_kubeconfig)
    suffix = "" if release == RELEASE else f"-{release}"
    path = admin_kubeconfig.with_name(f"operator-chart{suffix}.kubeconfig")
    lock = admin_kubeconfig.with_name("operator-chart.lock")
    with exclusive(lock):
        if path.exists() and not refresh:
            return path
        docs = chart_rbac(values, release)
        kubectl = [str(binary("kubectl")), f"--kubeconfig={admin_kubeconfig}"]
        subprocess.run([*kubectl, "create", "namespace", NAMESPACE], capture_output=True)
        subprocess.run(
            [
                *kubectl,
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager=helm",
                "-f",
                "-",
            ],
            input=yaml.safe_dump_all(docs),
            capture_output=True,
            text=True,
            check=True,
        )
        sa = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 7 * 24 * 3600},
        }
        client = KubeClient.from_kubeconfig(admin_kubeconfig)
        token = client.request(
            "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{sa}/token", request
        )["status"]["token"]
        admin = yaml.safe_load(admin_kubeconfig.read_text())
        cluster = admin["clusters"][0]["cluster"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        user = f"system:serviceaccount:{NAMESPACE}:{sa}"
        write_kubeconfig(path, cluster["server"], ca, str(token), user)
        return path


def rbac_denials(log: str) -> list[str]:
    """The log lines of requests RBAC refused (``... is forbidden: User "..." cannot ...``).

    A 403 for another reason (e.g. creating in a namespace being deleted) is not one."""
    return [
        line
        for line in log.splitlines()
        if "HTTP 403" in line and "forbidden: User" in line and " cannot " in line
    ]
