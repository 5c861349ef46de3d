"""Funnels end to end: real control plane, the operator under the chart's RBAC, the real
runner in Jobs, a scripted model API over HTTP, people as apiserver identities.

A Topology node bound to a Funnel: the writer's first draft has the wrong shape and is
auto-corrected, the judge scores the corrected draft below the threshold, the writer gets
the critique in its next prompt and the revised draft passes; the run parks and the Review
carries the gate report. The Run's creator (recorded by the apiserver's admission policy)
may not sign, someone outside the role may not sign, nobody may shortcut the quorum with
spec.decision; two people of one group (kOf: 2) sign and the run succeeds with the
approved artifact. A rejection fails the run. Exhaustion opens the approval with the last
critique attached, and the waiting gate survives the operator being SIGKILLed. ``all``
across two roles with ``minDistinctApprovers: 2``: one person holding both roles satisfies
the rule but counts once. A reviewer Agent's critical finding routes the draft back; its
low finding travels to the approval. An approval nobody completes before the deadline
expires: the run fails and the Review takes no more signatures. A Topology naming a
missing Funnel is not Ready, with the reason. A lead asks for a revision: the comment
reaches the drafting agent, the redraft opens a second approval round showing the diff and
the revision history, and under ``onRevision: resetAll`` the first round's signature no
longer counts; under ``reconfirmChanged`` (two rules, two people) the approval of the
rule the revision did not touch still counts. A reviewer Agent that can write keeps the
Topology not Ready until the grant is dropped; serving a Topology with a gated node is
refused at reconcile time (``Serving=False``, ``FunnelNotServable``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.model_server import ScriptedModelServer, text

from .funnel_support import (  # noqa: F401  (run_author: a fixture)
    BETTER,
    GOOD,
    JUDGE_SKILL,
    LEADS,
    create_run_as,
    gated_topology,
    judge_skill,
    judged,
    leads_approve,
    review_of_cluster,
    run_author,
    sign,
    writer,
)
from .review_support import (
    EDITOR,
    bind_people,
    bind_users,
    kubectl_as,
    parked_review,
    review_admission,  # noqa: F401  (fixture)
    review_of,
)
from .runs_support import (
    OperatorProcess,
    apply,
    apply_examples,
    cli_module,
    doc,
    finished,
    get,
    reason_is,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "body": {"type": "string", "minLength": 5}},
    "required": ["title", "body"],
}


def _funnel() -> dict[str, Any]:
    return doc(
        "Funnel",
        "notes-gate",
        {
            "validate": {"schema": SCHEMA},
            "judge": {"skill": JUDGE_SKILL, "threshold": 0.8},
            "approve": leads_approve({"kOf": 2}),
            "maxRetries": 2,
        },
    )


def _setup(
    kube: Kube, ns: str, cluster: LocalCluster, model_url: str, review_timeout: int | None = None
) -> None:
    def with_model(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            doc["spec"]["modelProviders"] = [
                *doc["spec"]["modelProviders"],
                {"name": "m", "type": "openai", "baseUrl": model_url, "defaultModel": "t"},
            ]
            if review_timeout is not None:
                doc["spec"]["governance"]["reviewTimeoutSeconds"] = review_timeout
        return doc

    apply_examples(kube, ns, edit=with_model)
    bind_people(cluster, ns)
    # eve (edit: she creates Runs) may also answer Reviews: what refuses her signature on
    # her own run is the funnel's excludeAuthor, not RBAC
    bind_users(cluster, ns, [(EDITOR, "swarmkit-reviewer")])
    apply(kube, ns, judge_skill())
    apply(kube, ns, writer())
    wait_ready(kube, ns, "Agent", "writer")
    apply(kube, ns, gated_topology())


def _ready(kube: Kube, ns: str, kind: str, name: str) -> dict[str, Any]:
    body = get(kube, ns, kind, name) or {}
    for c in (body.get("status") or {}).get("conditions") or ():
        if c["type"] == "Ready":
            return dict(c)
    return {}


def _last_user(model: ScriptedModelServer, n: int) -> str:
    msgs = [m for m in model.requests[n].messages if m.get("role") == "user"]
    return str(msgs[-1]["content"])


@pytest.mark.usefixtures("review_admission", "run_author")
def test_funnel_gate_retries_with_the_critique_and_waits_for_two_leads(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    # the Topology names a Funnel that does not exist yet: not Ready, and why
    wait_for(
        lambda: _ready(kube, ns, "Topology", "notes").get("reason") == "FunnelNotFound",
        60,
        message=lambda: f"FunnelNotFound\n{operator.tail()}",
    )
    assert "Funnel 'notes-gate' not found" in _ready(kube, ns, "Topology", "notes")["message"]
    apply(kube, ns, _funnel())
    wait_ready(kube, ns, "Funnel", "notes-gate")
    wait_ready(kube, ns, "Topology", "notes")
    topo = get(kube, ns, "Topology", "notes") or {}
    funnel = get(kube, ns, "Funnel", "notes-gate") or {}
    assert topo["status"]["funnelVersions"] == {"notes-gate": funnel["status"]["version"]}

    model.push(
        text('{"title": "v2"}'),  # the wrong shape: body missing
        text(GOOD),  # auto-corrected
        judged(0.4, "Say how much faster, and link the docs."),
        text(BETTER),  # the retry with the critique
        judged(0.95, "Specific and linked."),
    )
    # eve (edit) creates the Run; the apiserver records her as its author
    create_run_as(cluster, ns, EDITOR, "notes-v2")
    run = get(kube, ns, "Run", "notes-v2") or {}
    assert run["metadata"]["annotations"]["swarmkit.dev/created-by"] == EDITOR
    wait_run(kube, ns, "notes-v2", reason_is("AwaitingReview"), operator=operator, timeout=120)
    assert "'body' is a required property" in _last_user(model, 1)
    retry = _last_user(model, 3)
    assert "below the threshold of 0.8" in retry and "link the docs" in retry

    review = parked_review(kube, ns, "notes-v2")
    name = review["metadata"]["name"]
    gate = review["spec"]["request"]["gate"]
    assert review["spec"]["request"]["kind"] == "funnel_approval"
    assert gate["author"] == EDITOR and gate["funnel"] == "notes-gate"
    assert gate["approve"]["rules"] == [{"roles": ["release-lead"], "kOf": 2}]
    report = gate["report"]
    assert json.loads(report["artifact"]) == json.loads(BETTER)
    assert (report["attempts"], report["score"]) == (2, 0.95)

    # nobody shortcuts the gate
    refused = sign(cluster, ns, name, EDITOR)
    assert refused.returncode != 0 and "excludes its author" in refused.stderr, refused.stderr
    outsider = sign(cluster, ns, name, "bob", groups=("interns",))
    assert outsider.returncode != 0, outsider.stderr
    assert "bob does not hold role release-lead" in outsider.stderr
    first = sign(cluster, ns, name, "alice")
    assert first.returncode == 0, first.stderr
    body = review_of_cluster(cluster, ns, name)
    decision = json.dumps({"spec": {"decision": {"verdict": "approve", "decidedBy": "bob"}}})
    shortcut = kubectl_as(
        cluster, "bob", f"--as-group={LEADS}", "-n", ns, "patch", "review", name,
        "--type=merge", "-p", decision,
    )  # fmt: skip
    assert shortcut.returncode != 0 and "sign it in spec.approvals" in shortcut.stderr
    assert [a["decidedBy"] for a in body["spec"]["approvals"]] == ["alice"]
    # one of two signatures: still waiting; the Run's status shows the gate
    run = get(kube, ns, "Run", "notes-v2") or {}
    assert (succeeded(run) or {}).get("reason") == "AwaitingReview"
    # The judge that scored it, pinned from the bundle: its skill's content hash and whether
    # the score cleared its threshold (what its agreement with people counts).
    judged_by = (get(kube, ns, "Skill", JUDGE_SKILL) or {}).get("status") or {}
    gate_status = {
        "funnel": "notes-gate",
        "node": "draft",
        "review": name,
        "attempts": 2,
        "score": 0.95,
        "exhausted": False,
        "round": 1,
        "state": "AwaitingApproval",
        "judge": JUDGE_SKILL,
        "judgeContentHash": judged_by.get("contentHash"),
        "judgePassed": True,
    }
    assert run["status"]["gates"] == [gate_status]

    # kubectl swarmkit review show: the report and the quorum, who signed, what is missing
    shown = cli_module(cluster, "review", "show", name, "-n", ns)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "Funnel:      notes-gate (node draft)" in out and "Judge score: 0.95" in out
    assert "Drafts:      2" in out and "Author:      eve" in out
    assert "rule 1 (2 of release-lead): missing; signed release-lead: alice" in out
    assert "missing: rule 1 (2 of release-lead): 1 more distinct signer(s)" in out
    # the second lead signs with the plugin (decidedBy from the SelfSubjectReview)
    second = cli_module(
        cluster, "review", "approve", name, "--role", "release-lead",
        "--as", "bob", "--as-group", LEADS, "-n", ns,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert f"review {name}: approve by bob as release-lead" in second.stdout
    done = wait_run(kube, ns, "notes-v2", finished, operator=operator, timeout=120)
    cond = succeeded(done) or {}
    assert cond.get("status") == "True", cond
    assert json.loads(done["status"]["output"]) == json.loads(BETTER)
    [recorded] = done["status"]["decisions"]
    assert (recorded["verdict"], recorded["decidedBy"]) == ("approve", "alice, bob")
    assert done["status"]["gates"] == [{**gate_status, "state": "Approved"}]
    assert len(model.requests) == 5, "the resumed run replays; it asks the model nothing"


def _json_patch(cluster: LocalCluster, ns: str, review: str, user: str, ops: Any) -> Any:
    return kubectl_as(
        cluster, user, f"--as-group={LEADS}", "-n", ns, "patch", "review", review,
        "--type=json", "-p", json.dumps(ops),
    )  # fmt: skip


@pytest.mark.usefixtures("review_admission", "run_author")
def test_one_signer_cannot_insert_replace_or_remove_another_signature(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    """Issue 46 item 2: the old signatures are an exact prefix of the new list."""
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    apply(kube, ns, _funnel())
    wait_ready(kube, ns, "Topology", "notes")
    model.push(text(BETTER), judged(0.9, "Fine."))
    create_run_as(cluster, ns, EDITOR, "notes-v6")
    wait_run(kube, ns, "notes-v6", reason_is("AwaitingReview"), operator=operator, timeout=120)
    name = parked_review(kube, ns, "notes-v6")["metadata"]["name"]
    refused = "signatures are appended, never inserted, reordered, changed or removed"
    bob = {"verdict": "approve", "role": "release-lead", "decidedBy": "bob"}
    assert sign(cluster, ns, name, "alice").returncode == 0
    # alice puts a "bob" signature before hers: the list grew by one and its last element
    # is hers, which is all the policy used to look at
    insert = _json_patch(
        cluster, ns, name, "alice", [{"op": "add", "path": "/spec/approvals/0", "value": bob}]
    )
    assert insert.returncode != 0 and refused in insert.stderr, insert.stderr
    # she signs twice (allowed: it counts once), then replaces the copy in place
    assert sign(cluster, ns, name, "alice").returncode == 0
    replace = _json_patch(
        cluster, ns, name, "alice", [{"op": "replace", "path": "/spec/approvals/1", "value": bob}]
    )
    assert replace.returncode != 0 and refused in replace.stderr, replace.stderr
    swap = _json_patch(
        cluster, ns, name, "alice",
        [
            {"op": "remove", "path": "/spec/approvals/1"},
            {"op": "add", "path": "/spec/approvals/0", "value": bob},
        ],
    )  # fmt: skip
    assert swap.returncode != 0 and refused in swap.stderr, swap.stderr
    remove = _json_patch(
        cluster, ns, name, "alice", [{"op": "remove", "path": "/spec/approvals/0"}]
    )
    assert remove.returncode != 0 and refused in remove.stderr, remove.stderr
    body = review_of_cluster(cluster, ns, name)
    assert [a["decidedBy"] for a in body["spec"]["approvals"]] == ["alice", "alice"]
    run = get(kube, ns, "Run", "notes-v6") or {}
    assert (succeeded(run) or {}).get("reason") == "AwaitingReview"
    # the legitimate path: bob signs himself and the kOf 2 gate opens
    assert sign(cluster, ns, name, "bob").returncode == 0
    done = wait_run(kube, ns, "notes-v6", finished, operator=operator, timeout=120)
    assert (succeeded(done) or {}).get("status") == "True", succeeded(done)
    [recorded] = done["status"]["decisions"]
    assert (recorded["verdict"], recorded["decidedBy"]) == ("approve", "alice, bob")


@pytest.mark.usefixtures("review_admission", "run_author")
def test_a_run_created_through_a_service_accounts_token_does_not_pass_an_exclude_author_gate(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    """Issue 46 item 6: eve mints the token of a CI ServiceAccount (built-in edit may) and
    creates the Run as it, to sign its gate as herself: the gate refuses such a Run."""
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    apply(kube, ns, _funnel())
    wait_ready(kube, ns, "Topology", "notes")
    ci = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ci"}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "ci-edit", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": ns}],
    }
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(ci))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(binding))
    minted = kubectl_as(cluster, EDITOR, "-n", ns, "create", "token", "ci")
    assert minted.returncode == 0, minted.stderr  # what Kubernetes' edit grants
    as_ci = ["--kubeconfig=/dev/null", f"--server={cluster.server}", "--insecure-skip-tls-verify"]
    doc = run_manifest("notes-ci", "notes", input="Write the release notes for v2.")
    model.push(text(BETTER), judged(0.9, "Fine."))
    created = cluster.kubectl(
        *as_ci, f"--token={minted.stdout.strip()}", "-n", ns, "create", "-f", "-",
        input=json.dumps(doc), check=False,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    author = f"system:serviceaccount:{ns}:ci"
    run = get(kube, ns, "Run", "notes-ci") or {}
    assert run["metadata"]["annotations"]["swarmkit.dev/created-by"] == author
    done = wait_run(kube, ns, "notes-ci", finished, operator=operator, timeout=120)
    cond = succeeded(done) or {}
    assert cond.get("status") == "False", cond
    assert f"was created by ServiceAccount {author}" in cond["message"], cond
    assert "create the Run as a person to pass this gate" in cond["message"]


@pytest.mark.usefixtures("review_admission", "run_author")
def test_a_rejection_fails_the_run(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    apply(kube, ns, _funnel())
    wait_ready(kube, ns, "Topology", "notes")
    model.push(text(BETTER), judged(0.9, "Fine."))
    create_run_as(cluster, ns, EDITOR, "notes-v3")
    wait_run(kube, ns, "notes-v3", reason_is("AwaitingReview"), operator=operator, timeout=120)
    name = parked_review(kube, ns, "notes-v3")["metadata"]["name"]
    res = sign(cluster, ns, name, "alice", "reject", text="numbers are wrong")
    assert res.returncode == 0, res.stderr
    done = wait_run(kube, ns, "notes-v3", finished, operator=operator, timeout=120)
    cond = succeeded(done) or {}
    assert cond.get("status") == "False", cond
    assert "rejected (reject by alice: numbers are wrong)" in cond["message"]
    assert [g["state"] for g in done["status"]["gates"]] == ["Rejected"]
    assert review_of(kube, ns, name) is not None


@pytest.mark.usefixtures("review_admission", "run_author")
def test_exhaustion_opens_the_approval_with_the_critique_and_survives_an_operator_kill(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    strict = _funnel()
    strict["spec"]["maxRetries"] = 1
    apply(kube, ns, strict)
    wait_ready(kube, ns, "Topology", "notes")
    model.push(
        text(GOOD), judged(0.3, "Too vague."), text(BETTER), judged(0.6, "Still no numbers.")
    )
    create_run_as(cluster, ns, EDITOR, "notes-v4")
    wait_run(kube, ns, "notes-v4", reason_is("AwaitingReview"), operator=operator, timeout=120)
    review = parked_review(kube, ns, "notes-v4")
    name = review["metadata"]["name"]
    report = review["spec"]["request"]["gate"]["report"]
    assert (report["exhausted"], report["attempts"], report["score"]) == (True, 2, 0.6)
    assert "Still no numbers." in report["critique"]
    assert "retries are exhausted" in review["spec"]["request"]["question"]
    shown = cli_module(cluster, "review", "show", name, "-n", ns).stdout
    assert "Drafts:      2 (retries exhausted: the last critique is attached)" in shown

    # the gate's state lives in the API: the operator is SIGKILLed while people sign
    operator.kill()
    for who in ("alice", "bob"):
        res = sign(cluster, ns, name, who)
        assert res.returncode == 0, res.stderr
    operator.start()
    done = wait_run(kube, ns, "notes-v4", finished, operator=operator, timeout=120)
    cond = succeeded(done) or {}
    assert cond.get("status") == "True", cond
    assert json.loads(done["status"]["output"]) == json.loads(BETTER)
    assert done["status"]["gates"][0]["state"] == "Approved"
    assert done["status"]["gates"][0]["exhausted"] is True


def _sign_as(cluster: LocalCluster, ns: str, review: str, user: str, role: str) -> Any:
    return cli_module(cluster, "review", "approve", review, "--role", role, "--as", user, "-n", ns)


@pytest.mark.usefixtures("review_admission", "run_author")
def test_all_across_two_roles_and_a_person_holding_both_counts_once(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    four_eyes = _funnel()
    four_eyes["spec"] = {
        "validate": {"schema": SCHEMA},
        "approve": {
            "rules": [{"roles": ["security", "product"], "quorum": "all"}],
            "roles": {"security": {"users": ["alice"]}, "product": {"users": ["alice", "bob"]}},
            "minDistinctApprovers": 2,
        },
    }
    apply(kube, ns, four_eyes)
    wait_ready(kube, ns, "Topology", "notes")
    model.push(text(BETTER))
    create_run_as(cluster, ns, EDITOR, "notes-v5")
    wait_run(kube, ns, "notes-v5", reason_is("AwaitingReview"), operator=operator, timeout=120)
    name = parked_review(kube, ns, "notes-v5")["metadata"]["name"]

    # bob holds product only (by user name): not security
    denied = _sign_as(cluster, ns, name, "bob", "security")
    assert denied.returncode != 0 and "bob does not hold role security" in denied.stderr
    # alice holds both and signs in both: the rule holds, the four-eyes floor does not
    for role in ("security", "product"):
        res = _sign_as(cluster, ns, name, "alice", role)
        assert res.returncode == 0, res.stderr
    shown = cli_module(cluster, "review", "show", name, "-n", ns).stdout
    assert "rule 1 (all of security, product): ok; signed security: alice; product: alice" in shown
    assert "missing: minDistinctApprovers: 1 of 2 distinct people signed" in shown
    run = get(kube, ns, "Run", "notes-v5") or {}
    assert (succeeded(run) or {}).get("reason") == "AwaitingReview"

    res = _sign_as(cluster, ns, name, "bob", "product")
    assert res.returncode == 0, res.stderr
    done = wait_run(kube, ns, "notes-v5", finished, operator=operator, timeout=120)
    assert (succeeded(done) or {}).get("status") == "True", succeeded(done)
    assert done["status"]["decisions"][0]["decidedBy"] == "alice, bob"


@pytest.mark.usefixtures("review_admission", "run_author")
def test_reviewer_findings_route_back_and_lower_ones_reach_the_approval(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    critic = doc(
        "Agent",
        "critic",
        {
            "workspaceRef": {"name": "default"},
            "model": {"provider": "m", "name": "t"},
            "systemPrompt": "You review release notes for leaks.",
        },
    )
    apply(kube, ns, critic)
    reviewed = _funnel()
    reviewed["spec"] = {
        "review": {"agent": "critic", "routeBackAt": "high"},
        "approve": reviewed["spec"]["approve"],
    }
    apply(kube, ns, reviewed)
    wait_ready(kube, ns, "Topology", "notes")
    high = {"findings": [{"severity": "critical", "message": "Names a customer."}]}
    low = {"findings": [{"severity": "low", "message": "Title could be longer."}]}
    model.push(text(GOOD), text(json.dumps(high)), text(BETTER), text(json.dumps(low)))
    create_run_as(cluster, ns, EDITOR, "notes-v6")
    wait_run(kube, ns, "notes-v6", reason_is("AwaitingReview"), operator=operator, timeout=120)
    assert "Names a customer." in _last_user(model, 2), "the drafter got the finding"
    report = parked_review(kube, ns, "notes-v6")["spec"]["request"]["gate"]["report"]
    assert report["findings"] == [{"severity": "low", "message": "Title could be longer."}]
    assert report["attempts"] == 2 and json.loads(report["artifact"]) == json.loads(BETTER)


@pytest.mark.usefixtures("review_admission", "run_author")
def test_an_approval_not_completed_in_time_expires_and_fails_the_run(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url, review_timeout=8)
    apply(kube, ns, _funnel())
    wait_ready(kube, ns, "Topology", "notes")
    model.push(text(BETTER), judged(0.9, "Fine."))
    create_run_as(cluster, ns, EDITOR, "notes-v7")
    wait_run(kube, ns, "notes-v7", reason_is("AwaitingReview"), operator=operator, timeout=120)
    name = parked_review(kube, ns, "notes-v7")["metadata"]["name"]
    res = sign(cluster, ns, name, "alice")  # one of two: the quorum never holds
    assert res.returncode == 0, res.stderr
    done = wait_run(kube, ns, "notes-v7", finished, operator=operator, timeout=120)
    cond = succeeded(done) or {}
    assert cond.get("status") == "False", cond
    assert "funnel notes-gate: the approval expired" in cond["message"]
    assert [g["state"] for g in done["status"]["gates"]] == ["Expired"]
    late = sign(cluster, ns, name, "bob")
    assert late.returncode != 0 and "takes no more signatures" in late.stderr, late.stderr


def _parked_again(run: dict[str, Any], first: str) -> bool:
    items = (run.get("status") or {}).get("reviewItems") or []
    return reason_is("AwaitingReview")(run) and bool(items) and items[0].get("review") != first


@pytest.mark.usefixtures("review_admission", "run_author")
def test_a_revision_redrafts_and_opens_a_new_round_with_the_diff_under_reset_all(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    apply(kube, ns, _funnel())  # kOf: 2 of release-lead, onRevision: resetAll (the default)
    wait_ready(kube, ns, "Topology", "notes")
    model.push(
        text(GOOD),
        judged(0.9, "Fine."),
        text(BETTER),  # the revision, with bob's comment in the prompt
        judged(0.95, "Specific and linked."),
    )
    create_run_as(cluster, ns, EDITOR, "notes-rev")
    wait_run(kube, ns, "notes-rev", reason_is("AwaitingReview"), operator=operator, timeout=120)
    first = parked_review(kube, ns, "notes-rev")["metadata"]["name"]
    assert sign(cluster, ns, first, "alice").returncode == 0
    # a revision without saying what to change is refused by the apiserver
    bare = sign(cluster, ns, first, "bob", "revise")
    assert bare.returncode != 0 and "verdict revise needs text" in bare.stderr, bare.stderr
    # the author may not ask for one either
    own = sign(cluster, ns, first, EDITOR, "revise", text="mine")
    assert own.returncode != 0 and "excludes its author" in own.stderr, own.stderr
    asked = cli_module(
        cluster, "review", "revise", first, "--role", "release-lead",
        "--text", "Say how much faster, and link the docs.",
        "--as", "bob", "--as-group", LEADS, "-n", ns,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert f"review {first}: revise by bob as release-lead" in asked.stdout

    run = wait_run(
        kube, ns, "notes-rev", lambda r: _parked_again(r, first), operator=operator, timeout=120
    )
    prompt = _last_user(model, 2)
    assert "bob asked for a revision before approving" in prompt
    assert "Say how much faster, and link the docs." in prompt
    second = run["status"]["reviewItems"][0]["review"]
    review = review_of_cluster(cluster, ns, second)
    gate = review["spec"]["request"]["gate"]
    assert json.loads(gate["report"]["artifact"]) == json.loads(BETTER)
    assert (gate["report"]["round"], gate["report"]["attempts"]) == (2, 2)
    assert '+  "body": "Runs start 3x faster; see docs/runs.md.",' in gate["report"]["diff"]
    [past] = gate["rounds"]
    assert past["round"] == 1 and past["review"] == first
    assert [(a["decidedBy"], a["verdict"]) for a in past["approvals"]] == [
        ("alice", "approve"),
        ("bob", "revise"),
    ]
    assert [(g["round"], g["state"]) for g in run["status"]["gates"]] == [
        (1, "RevisionRequested"),
        (2, "AwaitingApproval"),
    ]
    # the first Review takes no more signatures (its round is over)
    late = sign(cluster, ns, first, "alice")
    assert late.returncode != 0 and "takes no more signatures" in late.stderr, late.stderr

    # resetAll: alice's round-1 signature does not count; bob's alone is 1 of 2 (bob asked
    # in the rule's only role, so reconfirmChanged would drop it too: the unit tests of
    # quorum.py tell the two policies apart)
    assert sign(cluster, ns, second, "bob").returncode == 0
    shown = cli_module(cluster, "review", "show", second, "-n", ns)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "Round:       2 (onRevision: resetAll)" in out
    assert (
        f"round 1 ({first}): revision asked by bob as release-lead: Say how much faster, "
        "and link the docs." in out
    )
    assert "signed in round 1: alice as release-lead" in out
    assert "rule 1 (2 of release-lead): missing; signed release-lead: bob" in out
    assert "Diff since round 1:" in out and "--- round 1" in out
    assert '-  "body": "Faster runs.",' in out
    run = get(kube, ns, "Run", "notes-rev") or {}
    assert (succeeded(run) or {}).get("reason") == "AwaitingReview"

    assert sign(cluster, ns, second, "alice").returncode == 0
    done = wait_run(kube, ns, "notes-rev", finished, operator=operator, timeout=120)
    cond = succeeded(done) or {}
    assert cond.get("status") == "True", cond
    assert json.loads(done["status"]["output"]) == json.loads(BETTER)
    decided = [(d["review"], d["verdict"], d["decidedBy"]) for d in done["status"]["decisions"]]
    assert decided == [(first, "revise", "bob"), (second, "approve", "bob, alice")]
    assert [(g["round"], g["state"]) for g in done["status"]["gates"]] == [
        (1, "RevisionRequested"),
        (2, "Approved"),
    ]
    assert len(model.requests) == 4, "the resumed runs replay; nothing is asked twice"


def _condition(kube: Kube, ns: str, kind: str, name: str, type_: str, reason: str) -> Any:
    def found() -> dict[str, Any] | None:
        body = get(kube, ns, kind, name) or {}
        for c in (body.get("status") or {}).get("conditions") or ():
            if c["type"] == type_ and c["reason"] == reason:
                return dict(c)
        return None

    def seen() -> str:
        conditions = ((get(kube, ns, kind, name) or {}).get("status") or {}).get("conditions")
        return f"{kind} {name}: {type_} {reason}; conditions: {conditions}"

    return wait_for(found, 60, message=seen)


@pytest.mark.usefixtures("review_admission")  # _setup binds people to roles
def test_a_reviewer_that_can_write_keeps_the_topology_not_ready(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    """The review layer's agent must be read-only: a grant that can write makes the
    Topology Ready=False naming it; dropping the grant (an edit of the reviewer Agent,
    which is outside the Topology's tree) makes it Ready again."""
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    publish = {
        "description": "Use to publish the notes.",
        "category": "capability",
        "implementation": {"type": "llm_prompt", "prompt": "Publish.", "effects": "write"},
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
    }
    apply(kube, ns, doc("Skill", "publish-notes", publish))
    critic = {
        "workspaceRef": {"name": "default"},
        "model": {"provider": "m", "name": "t"},
        "systemPrompt": "You review release notes.",
        "skills": ["publish-notes"],
    }
    apply(kube, ns, doc("Agent", "critic", critic))
    reviewed = _funnel()
    reviewed["spec"] = {"review": {"agent": "critic"}, "approve": reviewed["spec"]["approve"]}
    apply(kube, ns, reviewed)
    cond = _condition(kube, ns, "Topology", "notes", "Ready", "ReviewerNotReadOnly")
    assert cond["status"] == "False"
    assert cond["message"] == (
        "node draft: Funnel notes-gate's reviewer agent critic must be read-only but holds: "
        "skill publish-notes (effects write)"
    )
    apply(kube, ns, doc("Agent", "critic", {**critic, "skills": []}))
    wait_ready(kube, ns, "Topology", "notes")


@pytest.mark.usefixtures("review_admission", "run_author")
@pytest.mark.parametrize("policy", ["reconfirmChanged", "resetAll"])
def test_reconfirm_changed_keeps_the_approval_of_the_rule_the_revision_did_not_touch(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    policy: str,
) -> None:
    """Two rules, each one role bound to one person (product: alice, security: bob).
    alice approves as product; bob asks for a revision as security. Under
    ``onRevision: reconfirmChanged`` the revision touched only the security rule, so
    alice's round-1 approval still counts in round 2 and bob's approval alone completes
    the quorum; under ``resetAll`` (same setup) it does not count and alice signs again.

    The semantics are upstream SwarmKit's ``after_revision`` (delivstat/swarmkit,
    packages/runtime/src/swarmkit_runtime/governance/_approval.py, checked at e3bb1f4f):
    ``reset_all`` returns no prior approval, ``reconfirm_changed`` keeps those whose scope
    (there: the rule's id) is not among the changed scopes, as its test
    ``test_on_revision_reconfirm_changed_keeps_unaffected`` shows (design:approve changed,
    security:approve carries). Here a rule is the scope and a revision changes the rules
    naming the role it was asked in (docs/concepts/funnels.md).
    """
    ns = namespace
    _setup(kube, ns, cluster, model.openai_base_url)
    gate = _funnel()
    gate["spec"] = {
        "validate": {"schema": SCHEMA},
        "approve": {
            "rules": [
                {"roles": ["product"], "quorum": "all"},
                {"roles": ["security"], "quorum": "all"},
            ],
            "roles": {"product": {"users": ["alice"]}, "security": {"users": ["bob"]}},
            "onRevision": policy,
        },
    }
    apply(kube, ns, gate)
    wait_ready(kube, ns, "Topology", "notes")
    model.push(text(GOOD), text(BETTER))
    create_run_as(cluster, ns, EDITOR, "notes-rc")
    wait_run(kube, ns, "notes-rc", reason_is("AwaitingReview"), operator=operator, timeout=120)
    first = parked_review(kube, ns, "notes-rc")["metadata"]["name"]
    res = _sign_as(cluster, ns, first, "alice", "product")
    assert res.returncode == 0, res.stderr
    asked = cli_module(
        cluster, "review", "revise", first, "--role", "security",
        "--text", "Say which security fix shipped.", "--as", "bob", "-n", ns,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    run = wait_run(
        kube, ns, "notes-rc", lambda r: _parked_again(r, first), operator=operator, timeout=120
    )
    assert "Say which security fix shipped." in _last_user(model, 1)
    second = run["status"]["reviewItems"][0]["review"]

    # bob signs in round 2
    res = _sign_as(cluster, ns, second, "bob", "security")
    assert res.returncode == 0, res.stderr
    if policy == "resetAll":
        shown = cli_module(cluster, "review", "show", second, "-n", ns)
        assert shown.returncode == 0, shown.stderr
        assert "Round:       2 (onRevision: resetAll)" in shown.stdout
        assert "carried over" not in shown.stdout
        assert "rule 1 (all of product): missing" in shown.stdout
        assert "rule 2 (all of security): ok; signed security: bob" in shown.stdout
        run = get(kube, ns, "Run", "notes-rc") or {}
        assert (succeeded(run) or {}).get("reason") == "AwaitingReview"
        res = _sign_as(cluster, ns, second, "alice", "product")
        assert res.returncode == 0, res.stderr
    else:
        # with alice's carried approval every rule holds: the run goes on
        shown = cli_module(cluster, "review", "show", second, "-n", ns)
        assert shown.returncode == 0, shown.stderr
        assert "Round:       2 (onRevision: reconfirmChanged)" in shown.stdout
        assert "carried over: alice as product (round 1)" in shown.stdout
        assert "rule 1 (all of product): ok; signed product: alice" in shown.stdout
    done = wait_run(kube, ns, "notes-rc", finished, operator=operator, timeout=120)
    assert (succeeded(done) or {}).get("status") == "True", succeeded(done)
    assert json.loads(done["status"]["output"]) == json.loads(BETTER)
    assert [(g["round"], g["state"]) for g in done["status"]["gates"]] == [
        (1, "RevisionRequested"),
        (2, "Approved"),
    ]
    assert len(model.requests) == 2


@pytest.mark.usefixtures("review_admission")  # _setup binds people to roles
def test_serving_a_gated_node_is_refused_at_reconcile(
    kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess
) -> None:
    """A served task or a gateway call has no Run to park for a funnel approval (and its
    caller cannot stand for the approvers): serving a Topology with a gated node, or an
    Agent's MCP gateway that can run it, is refused up front with the reason, and nothing
    is deployed; the Topology stays Ready for Runs."""
    ns = namespace
    _setup(kube, ns, cluster, "http://127.0.0.1:9/v1")
    apply(kube, ns, _funnel())
    wait_ready(kube, ns, "Topology", "notes")
    data = {"team-a": base64.b64encode(b"tok-9d1c").decode()}
    kube.core.create_namespaced_secret(ns, {"metadata": {"name": "serve-tokens"}, "data": data})
    served = {"auth": {"bearerTokens": [{"name": "serve-tokens", "key": "team-a"}]}}
    body = get(kube, ns, "Topology", "notes") or {}
    spec = {**body["spec"], "description": "Writes release notes.", "serve": served}
    apply(kube, ns, doc("Topology", "notes", spec))
    cond = _condition(kube, ns, "Topology", "notes", "Serving", "FunnelNotServable")
    assert cond["status"] == "False"
    assert cond["message"].startswith(
        "served topology notes can reach funnel-gated node(s) notes/draft (Funnel notes-gate): "
    )
    assert _ready(kube, ns, "Topology", "notes")["status"] == "True"

    # an MCP gateway whose agent can run the gated topology (an agent skill) likewise
    ask = {
        "description": "Use to get release notes written.",
        "category": "capability",
        "implementation": {"type": "agent", "topology": "notes"},
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
    }
    apply(kube, ns, doc("Skill", "ask-notes", ask))
    token = {"name": "team-a", "secretKeyRef": {"name": "serve-tokens", "key": "team-a"}}
    desk = {
        "workspaceRef": {"name": "default"},
        "model": {"provider": "m", "name": "t"},
        "skills": ["ask-notes"],
        "gateway": {"enabled": True, "auth": {"tokens": [token]}},
    }
    apply(kube, ns, doc("Agent", "desk", desk))
    cond = _condition(kube, ns, "Agent", "desk", "Serving", "FunnelNotServable")
    assert cond["status"] == "False"
    assert cond["message"].startswith(
        "agent desk's gateway can reach funnel-gated node(s) notes/draft (Funnel notes-gate): "
    )
    deployments = kube.apps.list_namespaced_deployment(ns).items
    assert [d.metadata.name for d in deployments] == []
