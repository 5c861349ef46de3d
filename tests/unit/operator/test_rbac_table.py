"""The operator's RBAC: the chart's rules and the code's API calls, both from one table.

``swarmkit_operator.rbac.GRANTS`` is the one table. This test

1. renders the chart (every namespace, and a list of namespaces) and checks its rules are
   exactly the table's (the template is generated from it; ``make verify`` keeps it so);
2. derives the API calls the operator's code makes, without running it: every call of a
   ``swarmkit_operator.k8s`` helper (what each helper sends is read from the ``k8s`` package itself:
   its verbs and the path it builds), the resources the watch streams and indexes list and
   watch, kopf's own watches, and the leader election's Lease calls; then checks each is
   granted, and that every grant is used by some call (no permission nobody needs).
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml

from swarmkit_devcluster.paths import binary
from swarmkit_operator import rbac

REPO = Path(__file__).resolve().parents[3]
OPERATOR = REPO / "operator" / "swarmkit_operator"
CHART = REPO / "charts" / "swarmkit-operator"

PATH_GROUPS = {
    "custom_path": "swarmkit.dev",
    "core_path": "",
    "batch_path": "batch",
    "apps_path": "apps",
    "rbac_path": "rbac.authorization.k8s.io",
    "networking_path": "networking.k8s.io",
    "node_path": "node.k8s.io",
    "authorization_path": "authorization.k8s.io",
}
#: Path helpers of cluster-scoped resources: (plural, name), no namespace.
CLUSTER_PATHS = {"node_path", "authorization_path"}
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
#: Call sites whose resource is computed, not written at the call: what it can be, and why.
DYNAMIC: dict[tuple[str, str], set[str]] = {
    # write_status's PLURALS[kind]: the kinds the reconcile controller writes
    ("reconcile/status.py", "plural"): {
        "workspaces",
        "skills",
        "agents",
        "topologies",
        "funnels",
        "evalsets",
        "evalruns",
    },
    # the runner-workload pipeline: a Run's Job and NetworkPolicy, created once ...
    ("workload/pipeline.py", "object_path"): {"jobs", "networkpolicies"},
    # ... a served workload's Deployment, Service, NetworkPolicy and a gateway's
    # ServiceAccount, Role and RoleBinding (builders/gateway.py review_rbac), applied
    ("workload/served.py", "object_path"): {
        "deployments",
        "services",
        "networkpolicies",
        "serviceaccounts",
        "roles",
        "rolebindings",
    },
    # a Run's effects: scheduled / messaged Runs and MailboxMessages (runs/effects.py)
    ("runs/effects.py", "plural"): {"runs", "mailboxmessages"},
}
OBJECT_PATH_GROUPS = {"serviceaccounts": "", "roles": PATH_GROUPS["rbac_path"]}
OBJECT_PATH_GROUPS["rolebindings"] = PATH_GROUPS["rbac_path"]
OBJECT_PATH_GROUPS |= {"services": "", "jobs": "batch", "deployments": "apps"}
OBJECT_PATH_GROUPS["networkpolicies"] = PATH_GROUPS["networking_path"]


@dataclass(frozen=True)
class Call:
    group: str
    resource: str
    verb: str
    where: str

    def __str__(self) -> str:
        return f"{self.verb} {self.group or 'core'}/{self.resource} ({self.where})"


# --- 1. the chart's rules are the table ----------------------------------------------------


def _render(*args: str) -> list[dict]:
    out = subprocess.run(
        [str(binary("helm")), "template", "sk", str(CHART), "-n", "sk-system", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _rules(grants: tuple[rbac.Grant, ...], lease: str = "sk-swarmkit-operator") -> list[dict]:
    out = []
    for g in grants:
        rule: dict = {"apiGroups": [g.group], "resources": list(g.resources)}
        if g.names:
            rule["resourceNames"] = [lease if n == rbac.LEASE_NAME else n for n in g.names]
        rule["verbs"] = list(g.verbs)
        out.append(rule)
    return out


def _named(docs: list[dict], kind: str, name: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_the_chart_renders_exactly_the_table_in_both_modes() -> None:
    if not binary("helm").exists():
        pytest.fail("helm is not built; run `make cluster-binaries`", pytrace=False)
    docs = _render()
    cluster_role = _named(docs, "ClusterRole", "sk-swarmkit-operator")
    assert cluster_role["rules"] == _rules(rbac.grants("cluster") + rbac.grants("namespaced"))
    lease = _named(docs, "Role", "sk-swarmkit-operator-leader-election")
    assert lease["metadata"]["namespace"] == "sk-system"
    assert lease["rules"] == _rules(rbac.grants("lease"))

    docs = _render("--set", "watchNamespaces={team-a,team-b}")
    cluster_role = _named(docs, "ClusterRole", "sk-swarmkit-operator")
    assert cluster_role["rules"] == _rules(rbac.grants("cluster"))
    roles = [
        d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "sk-swarmkit-operator"
    ]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert role["rules"] == _rules(rbac.grants("namespaced"))

    docs = _render("--set", "leaderElection.leaseName=ops")
    lease = _named(docs, "Role", "sk-swarmkit-operator-leader-election")
    assert lease["rules"] == _rules(rbac.grants("lease"), lease="ops")


# --- 2. the code's calls are granted, and every grant is used --------------------------------


@dataclass(frozen=True)
class Helper:
    """What one ``k8s`` helper sends, read from its body."""

    verbs: tuple[str, ...]  # HTTP verbs, and "APPLY" for a server-side apply
    group: str | None  # None: from a ``path`` argument
    resource: str | None  # literal, or None
    resource_param: int | None  # index of the parameter naming the resource
    suffix: str  # "/status", "/log" or ""
    collection: bool  # path built without a name


def _k8s_package() -> ast.Module:
    """Every module of the ``k8s`` package as one module body."""
    body: list[ast.stmt] = []
    for path in sorted((OPERATOR / "k8s").glob("*.py")):
        body += ast.parse(path.read_text()).body
    return ast.Module(body=body, type_ignores=[])


def _sent_to(fn: ast.AsyncFunctionDef) -> tuple[str | None, str | None, int | None, str, bool]:
    """(group, resource, resource parameter, suffix, collection) of the path ``fn`` builds."""
    params = [a.arg for a in fn.args.args]
    group = resource = None
    resource_param = None
    suffix, collection = "", False
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in PATH_GROUPS:
            group = PATH_GROUPS[n.func.id]
            first = n.args[0]
            if isinstance(first, ast.Constant):
                resource = str(first.value)
            elif isinstance(first, ast.Name) and first.id in params:
                resource_param = params.index(first.id)
            # (plural, namespace, name), or (plural, name) for a cluster-scoped one
            collection = collection or len(n.args) < (2 if n.func.id in CLUSTER_PATHS else 3)
        if isinstance(n, ast.Constant) and n.value in ("/status", "/log"):
            suffix = str(n.value)
    return group, resource, resource_param, suffix, collection


#: The generic request functions: what they send is their caller's argument.
GENERIC = ("request", "request_text", "stream", "request_start", "list_pages")
#: Helpers that read a non-resource path, which no Role grants: the API group's discovery
#: document, which every authenticated user may read (the built-in ``system:discovery``).
NON_RESOURCE = ("wait_for_api",)
#: Helpers whose request every authenticated user may send (the built-in
#: ``system:basic-user`` grants SelfSubjectReviews): no Role of the chart needs to.
BUILT_IN = ("whoami",)


def _helpers() -> dict[str, Helper]:
    tree = _k8s_package()
    found: dict[str, Helper] = {}
    functions = [fn for fn in tree.body if isinstance(fn, ast.AsyncFunctionDef)]
    for fn in functions:
        verbs = tuple(
            sorted(
                {
                    n.value
                    for n in ast.walk(fn)
                    if isinstance(n, ast.Constant) and n.value in ("GET", *VERBS)
                }
            )
        )
        if not verbs:
            continue
        if any(isinstance(n, ast.Constant) and n.value == "application/apply-patch+yaml"
               for n in ast.walk(fn)):  # fmt: skip
            verbs = (*verbs, "APPLY")
        found[fn.name] = Helper(verbs, *_sent_to(fn))
    # A helper may hand the path it builds to another that takes one
    # (``delete_custom`` → ``delete_object(custom_path(...))``): it sends what that one sends.
    # Or it may call another with its own arguments (``patch_status`` →
    # ``patch_status_object(plural, ...)``): it sends what that one sends, to the same path.
    for fn in functions:
        if fn.name in found:
            continue
        params = [a.arg for a in fn.args.args]
        for call in ast.walk(fn):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id in found
                and call.func.id not in GENERIC
            ):
                continue
            callee = found[call.func.id]
            if callee.group is None:
                found[fn.name] = Helper(callee.verbs, *_sent_to(fn))
            elif callee.resource_param is None:
                found[fn.name] = callee
            else:
                arg = call.args[callee.resource_param]
                assert isinstance(arg, ast.Name) and arg.id in params, fn.name
                found[fn.name] = replace(callee, resource_param=params.index(arg.id))
            break
    return found


def _constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for t in node.targets:
                if isinstance(t, ast.Name) and isinstance(node.value.value, str):
                    out[t.id] = node.value.value
    return out


def _loop_values(tree: ast.Module) -> dict[str, set[str]]:
    """Names bound by ``for name in ("a", "b"):`` loops (their possible values)."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Tuple)
        ):
            values = {e.value for e in node.iter.elts if isinstance(e, ast.Constant)}
            out.setdefault(node.target.id, set()).update(str(v) for v in values)
    return out


def _resources(
    arg: ast.expr, rel: str, consts: dict[str, str], loops: dict[str, set[str]]
) -> set[str]:
    if isinstance(arg, ast.Constant):
        return {str(arg.value)}
    if isinstance(arg, ast.Name):
        if arg.id in consts:
            return {consts[arg.id]}
        if arg.id in loops:
            return loops[arg.id]
        if (rel, arg.id) in DYNAMIC:
            return DYNAMIC[(rel, arg.id)]
    if isinstance(arg, ast.Attribute) and arg.attr in consts:
        return {consts[arg.attr]}
    raise AssertionError(
        f"{rel}: cannot tell which resource {ast.unparse(arg)} is; add it to DYNAMIC"
    )


def _path_resources(
    arg: ast.expr, rel: str, consts: dict[str, str], loops: dict[str, set[str]]
) -> tuple[set[tuple[str, str]], bool]:
    """(group, resource) pairs a path expression can name, and whether it is a collection."""
    if isinstance(arg, ast.Name):  # a local: find its assignment in the file
        tree = ast.parse((OPERATOR / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == arg.id for t in node.targets
            ):
                return _path_resources(node.value, rel, consts, loops)
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute):
        name = arg.func.attr
        if name in PATH_GROUPS:
            res = _resources(arg.args[0], rel, consts, loops)
            return {(PATH_GROUPS[name], r) for r in res}, len(arg.args) < 3
        if name == "object_path":
            res = DYNAMIC[(rel, "object_path")]
            return {(OBJECT_PATH_GROUPS[r], r) for r in res}, False
    raise AssertionError(f"{rel}: cannot tell which path {ast.unparse(arg)} is")


def _verb(http: str, collection: bool) -> str:
    if http == "GET":
        return "list" if collection else "get"
    if http == "APPLY":  # a server-side apply creates the object when it is missing
        return "create"
    return VERBS[http]


def code_calls() -> Iterator[Call]:
    helpers = _helpers()
    k8s_consts = _constants(_k8s_package())
    for path in sorted(OPERATOR.rglob("*.py")):
        rel = str(path.relative_to(OPERATOR))
        if rel == "rbac.py" or rel.startswith("k8s/"):
            continue
        tree = ast.parse(path.read_text())
        consts = {**k8s_consts, **_constants(tree)}
        for imported in ast.walk(tree):  # constants imported from sibling modules
            if isinstance(imported, ast.ImportFrom) and imported.module and imported.level:
                base = (path.parent / ("../" * (imported.level - 1))).resolve()
                source = base / (imported.module.replace(".", "/") + ".py")
                if source.exists():
                    consts.update(_constants(ast.parse(source.read_text())))
        loops = _loop_values(tree)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "k8s"
                and node.func.attr in helpers
            ):
                continue
            helper = helpers[node.func.attr]
            where = f"{rel}:{node.lineno} k8s.{node.func.attr}"
            if node.func.attr in GENERIC + NON_RESOURCE + BUILT_IN:
                continue  # generic: the leader election, indexes and watches (below)
            if helper.group is None:  # the path is an argument
                pairs, collection = _path_resources(node.args[0], rel, consts, loops)
            else:
                if helper.resource is not None:
                    res = {helper.resource}
                else:
                    assert helper.resource_param is not None, where
                    res = _resources(node.args[helper.resource_param], rel, consts, loops)
                pairs, collection = {(helper.group, r) for r in res}, helper.collection
            for group, resource in pairs:
                for http in helper.verbs:
                    if http == "APPLY" and helper.suffix:
                        continue  # an apply to a subresource never creates the object
                    # a POST is made on the collection; a helper that falls back from PUT
                    # to POST (put_config_map) creates
                    verb = _verb(http, collection and http == "GET")
                    yield Call(group, resource + helper.suffix, verb, where)


def watched_calls() -> Iterator[Call]:
    """What the watch streams, the indexes and kopf list and watch."""
    from swarmkit_operator.handlers import root

    wired = root.wiring()
    for key, selector in wired.events.streams():
        group = "" if len(key) == 2 else key[0]
        for verb in ("list", "watch"):
            yield Call(group, key[-1], verb, f"handlers/root.py {selector}")
    for spec in wired.index_specs:
        for verb in ("list", "watch"):
            yield Call(spec.listed.group, spec.resource, verb, f"index {spec.id}")
    # kopf follows no CRD and no Namespace: its scanning is off (test_kopf_settings.py)


def leader_calls() -> Iterator[Call]:
    tree = ast.parse((OPERATOR / "runtime" / "leader.py").read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "_call"
            and isinstance(node.args[0], ast.Constant)
        ):
            http = str(node.args[0].value)
            yield Call(
                "coordination.k8s.io", "leases", _verb(http, False), f"leader.py:{node.lineno}"
            )


def all_calls() -> list[Call]:
    return [*code_calls(), *watched_calls(), *leader_calls()]


def test_every_api_call_of_the_code_is_granted() -> None:
    calls = all_calls()
    assert len(calls) > 50  # the derivation found the code's calls
    denied = sorted({str(c) for c in calls if not rbac.allows(c.group, c.resource, c.verb)})
    assert not denied, "the code calls what the chart does not grant:\n" + "\n".join(denied)


def test_every_grant_is_used_by_some_call() -> None:
    used = {(c.group, c.resource, c.verb) for c in all_calls()}
    # Not API calls of the operator's own: ownerReferences with blockOwnerDeletion need
    # "update" on the owner's finalizers (OwnerReferencesPermissionEnforcement).
    finalizers = {
        ("swarmkit.dev", r, "update")
        for g in rbac.GRANTS
        for r in g.resources
        if r.endswith("/finalizers")
    }
    unused = sorted(
        f"{verb} {g.group or 'core'}/{resource}"
        for g in rbac.GRANTS
        for resource in g.resources
        for verb in g.verbs
        if (g.group, resource, verb) not in used | finalizers
    )
    assert not unused, "granted but used by no call (drop it, or say which call):\n" + "\n".join(
        unused
    )


def test_one_event_path_kopf_watches_nothing_of_ours() -> None:
    """Every watch goes through the operator's own streams (handlers/events.py), in every
    mode: kopf's watches would not retry a 403 (an apiserver's authorizer right after a
    restart) and would be a second event path with other semantics."""
    import kopf

    from swarmkit_operator import handlers

    del handlers
    registry = kopf.get_default_registry()
    watched = [h.id for h in registry._watching.get_all_handlers()]
    watched += [h.id for h in registry._indexing.get_all_handlers()]
    assert watched == []


def test_the_chart_grants_no_secret_namespace_or_crd_in_either_mode() -> None:
    """Issue 41: no verb on Secrets in the ClusterRole nor the per-namespace Roles, and no
    cluster-wide read of Namespaces or CRDs; the one Secret read is a team's grant."""
    for args in ((), ("--set", "watchNamespaces={team-a,team-b}")):
        docs = _render(*args)
        for doc in docs:
            if doc["kind"] not in ("ClusterRole", "Role"):
                continue
            for rule in doc.get("rules") or ():
                named = set(rule["resources"]) & {
                    "secrets",
                    "namespaces",
                    "customresourcedefinitions",
                    "*",
                }
                assert not named, (doc["metadata"]["name"], rule)
    [team] = rbac.grants("team")
    assert (team.resources, team.verbs) == (("secrets",), ("get",))
    assert rbac.allows("", "secrets", "get")  # the delivery's call, granted by a team
    assert not rbac.allows("", "secrets", "list")
    assert not rbac.allows("", "secrets", "watch")
