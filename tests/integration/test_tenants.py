"""Tenants (issue 41): no Secret reads, both install modes, two teams side by side.

Every test runs twice, once per install mode, each with the operator as the chart deploys
it (its own ServiceAccount token, its RBAC rendered by ``helm template``):

* ``cluster-wide``: the chart's default values, a ClusterRole;
* ``namespaced``: another release installed with ``watchNamespaces: [team A, team B]``:
  a Role and RoleBinding in each of the two namespaces and nothing else namespaced.

Neither grants a verb on Secrets: the run's credential reaches its pod through the
kubelet, a missing one is read back from the pod's status, and the mailbox webhook's URL
is read under the one grant the team gives (``team_secret_grant``). An operator request
RBAC refuses fails the module (``OperatorProcess.denials``).

Two teams, A and B, each with a namespace, a Workspace, a SpendQuota and a person bound
to the chart's user roles there (``edit``, ``swarmkit-reviewer``,
``swarmkit-mailbox-acknowledger``): ann in A, ben in B. Each refusal of ann's on team B's
objects is asserted as she sees it (the apiserver's answer, a condition), next to the same
action succeeding for the team that owns them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.identity import chart_operator_kubeconfig, fullname, team_secret_grant
from swarmkit_devcluster.testing import Kube, temp_namespace, wait_for
from tests.support.http_server import HttpRequest, RecordingHttpServer

from .review_support import (
    bind_users,
    decide,
    kubectl_as,
    review_admission,  # noqa: F401  (fixture)
)
from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    cli,
    create,
    doc,
    finished,
    get,
    reason_is,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("review_admission")]

ANN, BEN = "ann", "ben"
TEAM_ROLES = ("edit", "swarmkit-reviewer", "swarmkit-mailbox-acknowledger")
#: The release installed per namespace (the cluster-wide one is the suite's default).
NAMESPACED_RELEASE = "sk-tenants"
#: The credential's value and the webhook's path: neither may appear anywhere but the pod.
CREDENTIAL = "partner-token-7c1e5a"
HOOK_PATH = "/hooks/T0-t3n4nt-h00k"
PRICES = {"currency": "USD", "input": "3", "output": "15"}
#: A Run pod waiting for a missing Secret fails after this (the operator's setting).
POD_START_GRACE = 20


@dataclass(frozen=True)
class Tenancy:
    mode: str
    a: str
    b: str
    operator: OperatorProcess
    hook: RecordingHttpServer


def _team_workspace(webhook: bool) -> Any:
    """The examples' Workspace, priced, with a mailbox (team A's routed to the webhook) and
    team A's partner credential."""

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] != "Workspace":
            return doc
        spec = doc["spec"]
        for provider in spec["modelProviders"]:
            provider["prices"] = PRICES
        mailbox: dict[str, Any] = {"name": "ops"}
        if webhook:
            mailbox["webhook"] = {"urlSecretRef": {"name": "ops-webhook", "key": "url"}}
            spec["credentials"] = [
                {
                    "name": "partner",
                    "secretKeyRef": {"name": "partner", "key": "token"},
                    "allowedHosts": ["agents.partner.example"],
                }
            ]
        spec["mailboxes"] = [mailbox]
        return doc

    return edit


def _bind(cluster: LocalCluster, ns: str, user: str) -> None:
    bind_users(cluster, ns, [(user, role) for role in TEAM_ROLES])


def _mailbox_roles(cluster: LocalCluster) -> None:
    from tests.unit.test_chart_render import render

    docs = render({}, release="swarmkit", namespace="swarmkit-system")
    roles = [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].startswith("swarmkit-mailbox-")
    ]
    cluster.kubectl(
        "apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(d) for d in roles)
    )


def _operator(cluster: LocalCluster, mode: str, a: str, b: str) -> OperatorProcess:
    env = {
        "SWARMKIT_WEBHOOK_BACKOFF_SECONDS": "1",
        "SWARMKIT_POD_START_GRACE_SECONDS": str(POD_START_GRACE),
    }
    if mode == "cluster-wide":
        return OperatorProcess(cluster.kubeconfig, {}, env=env)
    identity = chart_operator_kubeconfig(
        cluster.kubeconfig,
        refresh=True,  # the Roles go into this module's two namespaces
        values={"watchNamespaces": [a, b]},
        release=NAMESPACED_RELEASE,
    )
    env["SWARMKIT_LEASE_NAME"] = fullname(NAMESPACED_RELEASE)
    return OperatorProcess(cluster.kubeconfig, {"watchNamespaces": [a, b]}, env, identity)


def _setup_team(kube: Kube, ns: str, hook: RecordingHttpServer | None, release: str) -> None:
    """The team's Workspace; team A's with its credential and webhook Secrets, and the one
    grant a team gives the operator: get on the webhook's Secret."""
    if hook is not None:
        for name, data in (
            ("partner", {"token": CREDENTIAL}),
            ("ops-webhook", {"url": hook.url + HOOK_PATH}),
        ):
            kube.core.create_namespaced_secret(ns, {"metadata": {"name": name}, "stringData": data})
        role, binding = team_secret_grant(ns, "ops-webhook", release)
        kube.rbac.create_namespaced_role(ns, role)
        kube.rbac.create_namespaced_role_binding(ns, binding)
    apply_examples(kube, ns, _team_workspace(webhook=hook is not None))
    wait_ready(kube, ns, "Workspace", "default")


@pytest.fixture(scope="module", params=["cluster-wide", "namespaced"])
def tenancy(
    request: pytest.FixtureRequest, cluster: LocalCluster, kube: Kube, crds: Any
) -> Iterator[Tenancy]:
    mode = str(request.param)
    _mailbox_roles(cluster)

    def responder(_request: HttpRequest) -> tuple[int, Any]:
        return 200, {"ok": True}

    with (
        temp_namespace(kube, f"team-a-{mode}") as a,
        temp_namespace(kube, f"team-b-{mode}") as b,
        RecordingHttpServer(responder) as hook,
    ):
        release = NAMESPACED_RELEASE if mode == "namespaced" else "swarmkit-operator"
        op = _operator(cluster, mode, a, b)
        op.start()
        try:
            _bind(cluster, a, ANN)
            _bind(cluster, b, BEN)
            _setup_team(kube, a, hook, release)
            _setup_team(kube, b, None, release)
            wait_for(
                lambda: _can(cluster, ANN, a, "patch", "reviews.swarmkit.dev"),
                30,
                message="the reviewer role to be aggregated",
            )
            yield Tenancy(mode, a, b, op, hook)
        finally:
            op.stop()
        assert op.denials() == [], op.denials()  # the chart grants all it does, in each mode


def _can(cluster: LocalCluster, user: str, ns: str, verb: str, resource: str) -> bool:
    res = kubectl_as(cluster, user, "auth", "can-i", verb, resource, "-n", ns)
    return res.stdout.strip() == "yes"


def _create_as(
    cluster: LocalCluster, user: str, ns: str, doc: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    return kubectl_as(cluster, user, "-n", ns, "create", "-f", "-", input=json.dumps(doc))


def _forbidden(res: subprocess.CompletedProcess[str]) -> bool:
    return res.returncode != 0 and "forbidden" in (res.stdout + res.stderr).lower()


def _condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return {}


# --- item 2: each mode runs a Run with a credential and a mailbox webhook --------------------


def test_a_run_with_a_credential_posts_to_its_mailbox_webhook(kube: Kube, tenancy: Tenancy) -> None:
    """The pod gets the credential from the kubelet (the operator reads no Secret), the
    Run succeeds, and its mailbox item is posted to the URL read under the team's grant."""
    ns = tenancy.a
    replay = [
        {"toolCalls": [{"name": "mailbox_send", "arguments": {"to": "ops", "message": "hi"}}]},
        {"text": "posted"},
    ]
    apply(kube, ns, agent_with("watcher", replay, tools=["mailbox_send"]))
    wait_ready(kube, ns, "Agent", "watcher")
    create(kube, ns, run_manifest("watch", agent="watcher"))
    run = wait_run(kube, ns, "watch", finished, operator=tenancy.operator)
    assert succeeded(run)["reason"] == "Succeeded", run["status"]  # type: ignore[index]
    # The pod that ran took the credential by reference: the kubelet resolved it.
    job = kube.batch.read_namespaced_job(run["status"]["jobName"], ns)
    env = job.spec.template.spec.containers[0].env
    refs = [e.value_from.secret_key_ref for e in env if e.value_from]
    assert ("partner", "token") in [(r.name, r.key) for r in refs if r is not None]
    [effect] = run["status"]["effects"]
    item = effect["object"].split("/", 1)[1]

    def delivered() -> dict[str, Any] | None:
        body = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "mailboxmessages", item)
        state = ((body.get("status") or {}).get("delivery") or {}).get("state")
        return dict(body) if state == "Delivered" else None

    body = wait_for(delivered, 60, message=lambda: tenancy.operator.tail())
    posted = [r for r in tenancy.hook.requests if r.path == HOOK_PATH]
    assert [r.body for r in posted] == [{"text": "[ops] watcher (run watch): hi"}]
    # Neither the credential nor the webhook URL left the Secrets (and the pod's env).
    token = HOOK_PATH.rsplit("/", 1)[1]
    for text in (json.dumps(body), json.dumps(run), tenancy.operator.log()):
        assert token not in text and CREDENTIAL not in text


def test_a_missing_secret_is_named_by_the_run_from_its_pod(kube: Kube, tenancy: Tenancy) -> None:
    """Team A's Workspace names a Secret only team B has: the Workspace is Ready (it holds
    references; the operator reads no Secret), and the Run says which Secret and key its
    pod waits for (the kubelet's CreateContainerConfigError), then fails after the pod
    start grace. Team B's Secret stays B's: a pod in A never gets it."""
    a, b = tenancy.a, tenancy.b
    kube.core.create_namespaced_secret(
        b, {"metadata": {"name": "b-keys"}, "stringData": {"token": "b-only-value"}}
    )
    workspace = doc(
        "Workspace",
        "borrows",
        {
            "modelProviders": [{"name": "replay", "type": "replay"}],
            "credentials": [
                {
                    "name": "theirs",
                    "secretKeyRef": {"name": "b-keys", "key": "token"},
                    "allowedHosts": ["agents.partner.example"],
                }
            ],
        },
    )
    apply(kube, a, workspace)
    wait_ready(kube, a, "Workspace", "borrows")
    agent = agent_with("borrower", [{"text": "never runs"}], workspaceRef={"name": "borrows"})
    apply(kube, a, agent)
    wait_ready(kube, a, "Agent", "borrower")
    create(kube, a, run_manifest("no-key", agent="borrower"))

    waiting = wait_run(kube, a, "no-key", reason_is("SecretNotFound"), operator=tenancy.operator)
    cond = succeeded(waiting) or {}
    assert cond["status"] == "Unknown", cond
    assert "waits: Secret 'b-keys' (key 'token') not found" in cond["message"], cond
    assert f"create it in namespace {a}" in cond["message"], cond

    failed = wait_run(kube, a, "no-key", finished, timeout=POD_START_GRACE + 60)
    cond = succeeded(failed) or {}
    assert (cond["status"], cond["reason"]) == ("False", "SecretNotFound"), cond
    assert cond["message"] == (
        "Secret 'b-keys' (key 'token') not found: the runner's container cannot start"
    )
    assert "b-only-value" not in json.dumps(failed) + tenancy.operator.log()


# --- item 4: two teams side by side ------------------------------------------------------------


def _team_b_objects(kube: Kube, b: str, operator: OperatorProcess) -> dict[str, str]:
    """A finished Run of team B's, the MailboxMessage it posted and a Review waiting there."""
    replay = [
        {"toolCalls": [{"name": "mailbox_send", "arguments": {"to": "ops", "message": "b"}}]},
        {"text": "posted"},
    ]
    apply(kube, b, agent_with("b-agent", replay, tools=["mailbox_send"]))
    wait_ready(kube, b, "Agent", "b-agent")
    create(kube, b, run_manifest("b-run", agent="b-agent"))
    run = wait_run(kube, b, "b-run", finished, operator=operator)
    [effect] = run["status"]["effects"]
    review = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Review",
        "metadata": {"name": "b-review", "namespace": b},
        "spec": {"request": {"kind": "human_task", "question": "Ship B's release?"}},
    }
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, b, "reviews", review)
    skill = {
        "description": "Use when team B triages.",
        "category": "capability",
        "instructions": "# B only\n",
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
    }
    apply(kube, b, doc("Skill", "b-skill", skill))
    return {"run": "b-run", "item": effect["object"].split("/", 1)[1], "review": "b-review"}


def test_team_a_can_neither_see_nor_touch_team_b(
    cluster: LocalCluster, kube: Kube, tenancy: Tenancy
) -> None:
    a, b = tenancy.a, tenancy.b
    theirs = _team_b_objects(kube, b, tenancy.operator)

    # read: each kind, by name and as a list, and B's Secrets
    for kind, name in (
        ("run", theirs["run"]),
        ("review", theirs["review"]),
        ("mailboxmessage", theirs["item"]),
        ("secret", "b-keys"),
    ):
        for args in (("get", kind, name), ("get", kind)):
            res = kubectl_as(cluster, ANN, "-n", b, *args)
            assert _forbidden(res), (args, res.stdout, res.stderr)
            assert name not in res.stdout
        if kind != "secret":  # the same read is B's own person's
            assert kubectl_as(cluster, BEN, "-n", b, "get", kind, name).returncode == 0
    # approve, acknowledge, cancel: each refused for ann, the same write allowed to B's ben
    approve = decide(cluster, b, theirs["review"], ANN, "approve")
    assert _forbidden(approve), approve.stderr
    ack = json.dumps({"spec": {"acknowledgement": {"by": ANN}}})
    res = kubectl_as(
        cluster, ANN, "-n", b, "patch", "mailboxmessage", theirs["item"], "--type=merge", "-p", ack
    )
    assert _forbidden(res), res.stderr
    cancel = json.dumps({"spec": {"cancelled": True}})
    res = kubectl_as(
        cluster, ANN, "-n", b, "patch", "run", theirs["run"], "--type=merge", "-p", cancel
    )
    assert _forbidden(res), res.stderr
    assert decide(cluster, b, theirs["review"], BEN, "approve").returncode == 0
    review = get(kube, b, "Review", theirs["review"]) or {}
    assert review["spec"]["decision"]["decidedBy"] == BEN  # only B's person decided

    # kubectl swarmkit as ann: team B's namespace is refused, nothing of it is printed
    for args in (
        ("status", "-n", b),
        ("inbox", "-n", b),
        ("review", "list", "-n", b),
        ("review", "list", "-A"),
        ("ack", theirs["item"], "-n", b),
        ("logs", theirs["run"], "-n", b),
    ):
        res = cli(cluster, *args, "--as", ANN)
        assert _forbidden(res), (args, res.stdout, res.stderr)
        for name in theirs.values():
            assert name not in res.stdout, (args, res.stdout)
    mine = cli(cluster, "review", "list", "-n", a, "--as", ANN)
    assert mine.returncode == 0 and theirs["review"] not in mine.stdout, mine.stderr


def test_team_a_cannot_reference_team_b_objects(
    cluster: LocalCluster, kube: Kube, tenancy: Tenancy
) -> None:
    """A reference names an object of its own namespace only: a namespace in one is refused
    at admission naming the field; a name that exists only in team B resolves to nothing."""
    a = tenancy.a
    b = tenancy.b
    for kind, name, spec, field in (
        (
            "Agent",
            "reaches-b",
            {"workspaceRef": {"name": "default", "namespace": b}, "model": {"provider": "replay"}},
            "spec.workspaceRef.namespace",
        ),
        (
            "Run",
            "runs-b",
            {"agentRef": {"name": "b-agent", "namespace": b}, "input": "x"},
            "spec.agentRef.namespace",
        ),
    ):
        res = _create_as(cluster, ANN, a, doc(kind, name, spec))
        assert res.returncode != 0 and f'unknown field "{field}"' in res.stderr, res.stderr
        assert get(kube, a, kind, name) is None

    # B's Skill and Agent by name, from A: not found, named in the condition
    agent = agent_with("grants-b", [{"text": "x"}], skills=["b-skill"])
    assert _create_as(cluster, ANN, a, agent).returncode == 0
    resolved = wait_for(
        lambda: (
            (c := _condition(get(kube, a, "Agent", "grants-b"), "SkillsResolved")).get("reason")
            == "SkillNotFound"
            and c
        ),
        60,
    )
    assert "b-skill" in resolved["message"], resolved
    assert (get(kube, a, "Agent", "grants-b") or {})["status"]["missingSkills"] == ["b-skill"]
    topology = doc(
        "Topology",
        "uses-b",
        {
            "workspaceRef": {"name": "default"},
            "agents": [{"name": "lead", "agentRef": {"name": "b-agent"}, "role": "root"}],
        },
    )
    assert _create_as(cluster, ANN, a, topology).returncode == 0
    ready = wait_for(
        lambda: (
            (c := _condition(get(kube, a, "Topology", "uses-b"), "Ready")).get("reason")
            == "AgentNotFound"
            and c
        ),
        60,
    )
    assert ready["status"] == "False" and "b-agent" in ready["message"], ready


def test_team_a_spends_only_from_its_own_quota(
    cluster: LocalCluster, kube: Kube, tenancy: Tenancy
) -> None:
    """Each team's SpendQuota is set by the platform (not by ann, not even in A); a Run in A
    that its quota cannot cover waits naming A's quota, while B's plenty is never drawn."""
    a, b = tenancy.a, tenancy.b
    quota = doc("SpendQuota", "budget", {"window": "daily", "cost": "0.05", "currency": "USD"})
    create(kube, a, quota)
    create(kube, b, {**quota, "spec": {**quota["spec"], "cost": "100"}})
    raise_it = json.dumps({"spec": {"cost": "1000"}})
    for ns in (a, b):
        res = kubectl_as(
            cluster, ANN, "-n", ns, "patch", "spendquota", "budget", "--type=merge", "-p", raise_it
        )
        assert _forbidden(res), res.stderr
    apply(kube, a, agent_with("spender", [{"text": "spent"}]))
    wait_ready(kube, a, "Agent", "spender")
    created = _create_as(cluster, ANN, a, run_manifest("spend", agent="spender", maxCost="0.1"))
    assert created.returncode == 0, created.stderr
    waiting = wait_run(kube, a, "spend", reason_is("BudgetExhausted"), operator=tenancy.operator)
    cond = succeeded(waiting) or {}
    assert cond["status"] == "Unknown", cond
    assert cond["message"].startswith(
        "SpendQuota budget cannot cover it (cost: needs 0.1 USD, 0.05 of 0.05 remaining)"
    ), cond
    theirs = (get(kube, b, "SpendQuota", "budget") or {}).get("status") or {}
    assert waiting["metadata"]["uid"] not in json.dumps(theirs), theirs
    assert not theirs.get("entries") and theirs.get("remaining") in (None, "100"), theirs
