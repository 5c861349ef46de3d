"""Least privilege, checked by the real RBAC authorizer.

The chart's RBAC objects are applied for real; ``kubectl auth can-i --list`` as the
operator's ServiceAccount must show exactly the declared set (:data:`OPERATOR_RULES`) on
top of what every authenticated identity gets, in cluster-wide and in namespaced mode. The
ClusterRoles aggregated into view/edit/admin give skill authors edit on Skills, Agents,
Topologies and Runs but not on Workspaces, and nobody status. That Run pods get no API
access at all is asserted on a real Run pod in test_helm_install.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, namespace_name, temp_namespace, wait_for
from tests.unit.test_chart_render import render

pytestmark = pytest.mark.integration

Grants = dict[str, frozenset[str]]

# What the operator may do in a namespace it watches: resource → verbs, as the real
# authorizer reports it. The chart's rules come from operator/swarmkit_operator/rbac.py
# (tests/unit/operator/test_rbac_table.py ties them to the code's calls); widening them
# means widening this table too, in review.
OPERATOR_RULES: Grants = {
    "workspaces.swarmkit.dev": frozenset({"list", "watch"}),
    "skills.swarmkit.dev": frozenset({"get", "list", "watch"}),
    # get: the labels of a Run's Topology or Agent, against a SpendQuota's selector
    "agents.swarmkit.dev": frozenset({"get", "list", "watch"}),
    "topologies.swarmkit.dev": frozenset({"get", "list", "watch"}),
    "funnels.swarmkit.dev": frozenset({"list", "watch"}),
    "runs.swarmkit.dev": frozenset({"get", "list", "watch", "create", "delete"}),
    "workspaces.swarmkit.dev/status": frozenset({"patch"}),
    "skills.swarmkit.dev/status": frozenset({"patch"}),
    "agents.swarmkit.dev/status": frozenset({"patch"}),
    "topologies.swarmkit.dev/status": frozenset({"patch"}),
    "funnels.swarmkit.dev/status": frozenset({"patch"}),
    "runs.swarmkit.dev/status": frozenset({"patch"}),
    "reviews.swarmkit.dev": frozenset({"create", "get", "list", "watch"}),
    "reviews.swarmkit.dev/status": frozenset({"patch"}),
    # watch: the web view's mailboxes page keeps an index of the items
    "mailboxmessages.swarmkit.dev": frozenset({"create", "list", "watch", "patch"}),
    "mailboxmessages.swarmkit.dev/status": frozenset({"patch"}),
    # reserve a Run's cap, settle its spend (resourceVersion-guarded status patches)
    "spendquotas.swarmkit.dev": frozenset({"get", "list", "watch"}),
    "spendquotas.swarmkit.dev/status": frozenset({"patch"}),
    # an EvalSet's cases are checked (status); an EvalRun is graded (status), and a
    # promotion's gate creates the EvalRuns of its candidate (issue 39)
    "evalsets.swarmkit.dev": frozenset({"list", "watch"}),
    "evalsets.swarmkit.dev/status": frozenset({"patch"}),
    "evalruns.swarmkit.dev": frozenset({"create", "get", "list", "watch"}),
    "evalruns.swarmkit.dev/status": frozenset({"patch"}),
    "workspaces.swarmkit.dev/finalizers": frozenset({"update"}),
    "skills.swarmkit.dev/finalizers": frozenset({"update"}),
    "agents.swarmkit.dev/finalizers": frozenset({"update"}),
    "runs.swarmkit.dev/finalizers": frozenset({"update"}),
    "topologies.swarmkit.dev/finalizers": frozenset({"update"}),
    # server-side applied: patch, and create when missing; get: an object already under
    # that name is applied over only when the operator made it for that owner (the
    # runner-workload pipeline's adoption check, docs/design/workload-pipeline.md)
    "deployments.apps": frozenset({"create", "get", "list", "watch", "patch", "delete"}),
    "services": frozenset({"create", "get", "patch", "delete"}),
    # an Agent gateway's own ServiceAccount, Role and RoleBinding (get/watch Reviews)
    "serviceaccounts": frozenset({"create", "get", "patch", "delete"}),
    "roles.rbac.authorization.k8s.io": frozenset({"create", "get", "patch", "delete"}),
    "rolebindings.rbac.authorization.k8s.io": frozenset({"create", "get", "patch", "delete"}),
    # update: the skill library and its shards swarmkit-skill-library-<i>, rewritten in
    # place (RBAC cannot name a prefix; the shards were refused before)
    "configmaps": frozenset({"create", "get", "list", "watch", "patch", "update", "delete"}),
    "jobs.batch": frozenset({"create", "get", "list", "watch", "delete"}),
    "pods": frozenset({"list", "watch", "patch"}),
    "pods/log": frozenset({"get"}),
    # no Secrets (issue 41): a pod's missing Secret comes back from its status, and a
    # mailbox webhook's Secret is granted by its team by name (team_secret_grant)
    "events": frozenset({"create", "list", "patch"}),
    # a NetworkPolicy per Run (created), per served Topology and gateway (applied, deleted;
    # get: the same adoption check)
    "networkpolicies.networking.k8s.io": frozenset({"create", "get", "patch", "delete"}),
}
CLUSTER_RULES: Grants = {
    # does the runtimeClassName of a Workspace or Agent name a RuntimeClass? (No CRDs and
    # no Namespaces: kopf's scanning is off, the operator's streams serve its namespaces.)
    "runtimeclasses.node.k8s.io": frozenset({"get"}),
    # the web view's per-user pages: may this person list/get that kind there?
    "subjectaccessreviews.authorization.k8s.io": frozenset({"create"}),
}
SWARMKIT_PLURALS = {
    "workspaces",
    "skills",
    "agents",
    "topologies",
    "runs",
    "reviews",
    "funnels",
    "mailboxmessages",
    "spendquotas",
}


def lease_rules(name: str) -> Grants:
    """The leader election's grants, in the release namespace only: create any Lease (create
    cannot be limited to a name), get and update the chart's own."""
    return {
        "leases.coordination.k8s.io": frozenset({"create"}),
        f"leases.coordination.k8s.io[{name}]": frozenset({"get", "update"}),
    }


def can_i_list(cluster: LocalCluster, user: str, namespace: str) -> Grants:
    """``kubectl auth can-i --list`` as ``user`` in ``namespace``: resource → verbs.

    Resources restricted to resourceNames are reported as "<resource>[<names>]";
    non-resource URLs are left out (every identity gets the same discovery URLs).
    """
    res = cluster.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", namespace)
    header, *lines = res.stdout.splitlines()
    urls_at, names_at, verbs_at = (
        header.index(h) for h in ("Non-Resource URLs", "Resource Names", "Verbs")
    )
    grants: dict[str, set[str]] = {}
    for line in lines:
        resource = line[:urls_at].strip()
        if not resource:
            continue
        names = line[names_at:verbs_at].strip().strip("[]")
        verbs = line[verbs_at:].strip().strip("[]").split()
        key = f"{resource}[{names}]" if names else resource
        grants.setdefault(key, set()).update(verbs)
    return {k: frozenset(v) for k, v in grants.items()}


def beyond(grants: Grants, baseline: Grants) -> Grants:
    """What ``grants`` allows that ``baseline`` (any authenticated identity) does not."""
    out = {}
    for resource, verbs in grants.items():
        extra = verbs - baseline.get(resource, frozenset())
        if extra:
            out[resource] = extra
    return out


def can_i(cluster: LocalCluster, user: str, namespace: str, verb: str, resource: str) -> bool:
    """``kubectl auth can-i``; ``resource`` is a swarmkit.dev plural (with an optional
    ``/subresource``) or a core/other resource spelled as kubectl takes it."""
    plural, _, sub = resource.partition("/")
    name = f"{plural}.swarmkit.dev" if plural in SWARMKIT_PLURALS else plural
    args = ["auth", "can-i", verb, name, f"--as={user}", "-n", namespace]
    if sub:
        args.append(f"--subresource={sub}")
    res = cluster.kubectl(*args, check=False)
    return res.stdout.strip() == "yes"


def sa(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


@pytest.fixture
def installed_rbac(
    cluster: LocalCluster, kube: Kube, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """Apply only the chart's ServiceAccount and RBAC objects (the operator is not run)."""
    applied: list[dict[str, Any]] = []

    def install(values: dict[str, Any], namespace: str) -> str:
        release = namespace_name("rbac")[:20]
        docs = render(values, release=release, namespace=namespace)
        kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
        rbac = [d for d in docs if d["kind"] in kinds]
        cluster.kubectl(
            "apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(d) for d in rbac)
        )
        applied.extend(rbac)
        return f"{release}-swarmkit-operator"

    yield install
    for doc in reversed(applied):
        meta = doc["metadata"]
        args = ["delete", doc["kind"], meta["name"], "--ignore-not-found", "--wait=false"]
        if meta.get("namespace"):
            args += ["-n", meta["namespace"]]
        cluster.kubectl(*args, check=False)


def test_cluster_wide_operator_can_do_exactly_the_declared_set(
    cluster: LocalCluster, kube: Kube, crds: Any, installed_rbac: Any
) -> None:
    with temp_namespace(kube, "sk-system") as release_ns, temp_namespace(kube, "team") as team:
        name = installed_rbac({}, release_ns)
        baseline = can_i_list(cluster, sa(team, "default"), team)
        granted = can_i_list(cluster, sa(release_ns, name), team)
        assert beyond(granted, baseline) == {**OPERATOR_RULES, **CLUSTER_RULES}
        # its own namespace adds the leader election's Lease, and only that
        granted = can_i_list(cluster, sa(release_ns, name), release_ns)
        assert beyond(granted, baseline) == {**OPERATOR_RULES, **CLUSTER_RULES, **lease_rules(name)}
        for verb, resource in [
            ("get", "secrets"),
            ("list", "secrets"),
            ("watch", "secrets"),
            ("create", "secrets"),
            ("list", "namespaces"),
            ("watch", "namespaces"),
            ("list", "customresourcedefinitions.apiextensions.k8s.io"),
            ("update", "skills"),
            ("patch", "skills"),
            ("patch", "workspaces"),
            ("update", "skills/status"),
            ("create", "pods"),
            ("create", "pods/exec"),
            ("update", "jobs.batch"),
            ("escalate", "clusterroles.rbac.authorization.k8s.io"),
            ("bind", "clusterroles.rbac.authorization.k8s.io"),
            ("impersonate", "serviceaccounts"),
            ("create", "serviceaccounts/token"),
            ("delete", "customresourcedefinitions.apiextensions.k8s.io"),
        ]:
            assert not can_i(cluster, sa(release_ns, name), team, verb, resource), (
                f"the operator can {verb} {resource}"
            )
        assert can_i(cluster, sa(release_ns, name), team, "patch", "skills/status")


def test_namespaced_operator_is_confined_to_its_namespaces(
    cluster: LocalCluster, kube: Kube, installed_rbac: Any
) -> None:
    with (
        temp_namespace(kube, "sk-system") as release_ns,
        temp_namespace(kube, "watched") as watched,
        temp_namespace(kube, "other") as other,
    ):
        name = installed_rbac({"watchNamespaces": [watched]}, release_ns)
        baseline = can_i_list(cluster, sa(other, "default"), other)
        cluster_only = CLUSTER_RULES
        granted = can_i_list(cluster, sa(release_ns, name), watched)
        assert beyond(granted, baseline) == {**OPERATOR_RULES, **cluster_only}
        assert beyond(can_i_list(cluster, sa(release_ns, name), other), baseline) == cluster_only
        at_home = beyond(can_i_list(cluster, sa(release_ns, name), release_ns), baseline)
        assert at_home == {**cluster_only, **lease_rules(name)}


def test_leader_election_adds_only_its_own_lease_in_the_release_namespace(
    cluster: LocalCluster, kube: Kube, installed_rbac: Any
) -> None:
    with temp_namespace(kube, "sk-system") as release_ns, temp_namespace(kube, "team") as team:
        name = installed_rbac({"replicaCount": 2}, release_ns)
        baseline = can_i_list(cluster, sa(team, "default"), team)
        in_team = beyond(can_i_list(cluster, sa(release_ns, name), team), baseline)
        assert in_team == {**OPERATOR_RULES, **CLUSTER_RULES}  # no Lease rights there
        baseline = can_i_list(cluster, sa(release_ns, "default"), release_ns)
        at_home = beyond(can_i_list(cluster, sa(release_ns, name), release_ns), baseline)
        assert at_home == {**OPERATOR_RULES, **CLUSTER_RULES, **lease_rules(name)}


@pytest.mark.parametrize(
    ("role", "allowed", "denied"),
    [
        (
            "view",
            [
                ("get", "workspaces"),
                ("list", "skills"),
                ("watch", "runs"),
                ("get", "funnels"),
                ("get", "spendquotas"),
            ],
            [("create", "skills"), ("delete", "runs"), ("get", "secrets"), ("create", "funnels")],
        ),
        (
            "edit",
            [
                ("create", "skills"),
                ("update", "agents"),
                ("patch", "topologies"),
                ("delete", "runs"),
                ("create", "runs"),
                ("get", "workspaces"),
            ],
            [
                ("create", "workspaces"),
                ("update", "workspaces"),
                ("delete", "workspaces"),
                ("patch", "skills/status"),
                ("update", "runs/status"),
                # a Funnel says who may approve: an editor must not name themselves
                ("create", "funnels"),
                ("patch", "funnels"),
            ],
        ),
        (
            "admin",
            [
                ("create", "workspaces"),
                ("delete", "workspaces"),
                ("create", "skills"),
                ("create", "funnels"),
            ],
            # a namespace's budget is not its owner's to raise (like a ResourceQuota)
            [
                ("patch", "workspaces/status"),
                ("patch", "skills/status"),
                ("patch", "funnels/status"),
                ("create", "spendquotas"),
                ("patch", "spendquotas"),
            ],
        ),
    ],
)
def test_user_roles_are_aggregated(
    role: str,
    allowed: list[tuple[str, str]],
    denied: list[tuple[str, str]],
    cluster: LocalCluster,
    kube: Kube,
    crds: Any,
) -> None:
    with temp_namespace(kube, f"users-{role}") as ns:
        release = namespace_name("users")[:20]
        docs = render(release=release, namespace=ns)
        # The chart installs the three together (view rules flow into edit, edit into admin).
        roles = [
            d
            for d in docs
            if d["kind"] == "ClusterRole"
            and d["metadata"]["name"].rsplit("-", 1)[-1] in ("view", "edit", "admin")
        ]
        assert len(roles) == 3
        cluster.kubectl(
            "apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(r) for r in roles)
        )
        try:
            kube.core.create_namespaced_service_account(ns, {"metadata": {"name": "user"}})
            kube.rbac.create_namespaced_role_binding(
                ns,
                {
                    "metadata": {"name": f"user-{role}"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "user", "namespace": ns}],
                },
            )

            def can(verb: str, resource: str) -> bool:
                return can_i(cluster, sa(ns, "user"), ns, verb, resource)

            # The clusterrole-aggregation controller folds the rules in asynchronously.
            wait_for(
                lambda: all(can(v, r) for v, r in allowed),
                timeout=30,
                message=f"{role} did not aggregate {allowed}",
            )
            for verb, resource in denied:
                assert not can(verb, resource), f"{role} can {verb} {resource}"
        finally:
            for r in roles:
                cluster.kubectl("delete", "clusterrole", r["metadata"]["name"], check=False)
