"""A parked Run is answered from kubectl and resumes (real control plane, operator, runner).

``constraints.onFailure: escalate_to_human``: the run parks, the operator opens a Review a
person sees with ``kubectl get reviews`` / ``describe``; a reviewer's ``kubectl patch`` is
checked by the admission policy (decidedBy = the authenticated user, final, not after the
deadline) and by RBAC (``edit`` cannot decide); the run resumes in a new Job from its
checkpoint with the answer, and the decision (who, when) is in the Run's status and the
resumed runner's audit stream. Also: rejection, timeout, an operator SIGKILLed while the
run waits, and the parked pod deleted, and one killed between the resumed Job's create and
the status write that records it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from .review_support import (
    EDITOR,
    LOCKED,
    bind_people,
    decide,
    deploy_skill,
    kubectl_as,
    parked_review,
    review_admission,  # noqa: F401  (fixture)
    review_of,
    with_locked_deploy,
)
from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    finished,
    get,
    reason_is,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)


def _escalating_agent(kube: Kube, ns: str, cluster: LocalCluster, **constraints: Any) -> None:
    apply_examples(kube, ns, edit=with_locked_deploy)
    bind_people(cluster, ns)
    apply(kube, ns, deploy_skill(**constraints))
    replay = [
        {"toolCalls": [{"name": "deploy", "arguments": {"service": "checkout"}}]},
        {"text": "done: the person's answer was used"},
    ]
    apply(kube, ns, agent_with("deployer", replay, skills=["deploy"]))
    wait_ready(kube, ns, "Agent", "deployer")


def _parked(kube: Kube, ns: str, name: str, operator: OperatorProcess) -> dict[str, Any]:
    create(kube, ns, run_manifest(name, agent="deployer"))
    wait_run(kube, ns, name, reason_is("AwaitingReview"), operator=operator)
    return parked_review(kube, ns, name)


def _pod_log(cluster: LocalCluster, ns: str, job: str) -> str:
    res = cluster.kubectl("-n", ns, "logs", f"job/{job}", check=False)
    return res.stdout


@pytest.mark.usefixtures("review_admission")
def test_escalation_answered_from_kubectl_resumes_and_records_who(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _escalating_agent(kube, ns, cluster)
    review = _parked(kube, ns, "ship-it", operator)
    name = review["metadata"]["name"]
    request = review["spec"]["request"]
    assert (request["kind"], request["runRef"]["name"]) == ("escalation", "ship-it")
    assert request["skillRef"]["name"] == "deploy" and request["agent"] == "deployer"
    assert json.loads(request["arguments"]) == {"service": "checkout"}
    assert LOCKED in request["question"] and LOCKED in request["context"]
    owner = review["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Run", "ship-it")

    # what waits on people: the printer columns, and describe
    table = cluster.kubectl("-n", ns, "get", "reviews").stdout
    header, row = table.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "RUN", "KIND", "STATE"]
    assert row.split()[:4] == [name, "ship-it", "escalation", "Pending"]
    described = cluster.kubectl("-n", ns, "describe", "review", name).stdout
    assert LOCKED in described and "checkout" in described

    # the run is parked, its checkpoint stored in an immutable ConfigMap it owns
    run = get(kube, ns, "Run", "ship-it") or {}
    cm = kube.core.read_namespaced_config_map(run["status"]["checkpointConfigMap"], ns)
    assert cm.immutable and cm.metadata.owner_references[0].name == "ship-it"

    # the editor may not decide (RBAC); a reviewer may, as herself only (admission)
    can_i = kubectl_as(cluster, EDITOR, "auth", "can-i", "patch", "reviews.swarmkit.dev", "-n", ns)
    assert can_i.stdout.strip() == "no"
    denied = decide(cluster, ns, name, EDITOR, "approve")
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    forged = decide(cluster, ns, name, "alice", "approve", decided_by="bob")
    assert forged.returncode != 0
    assert "decidedBy must be your authenticated user name alice, not bob" in forged.stderr
    unknown = decide(cluster, ns, "no-such-review", "alice", "approve")
    assert unknown.returncode != 0 and "not found" in unknown.stderr

    ok = decide(cluster, ns, name, "alice", "answer", text="deployed by hand at 10:02")
    assert ok.returncode == 0, ok.stderr
    again = decide(cluster, ns, name, "bob", "reject", text="too late")
    assert again.returncode != 0 and "already decided" in again.stderr, again.stderr

    run = wait_run(kube, ns, "ship-it", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Succeeded"), cond
    status = run["status"]
    assert status["output"] == "done: the person's answer was used"
    [recorded] = status["decisions"]
    assert (recorded["review"], recorded["verdict"], recorded["decidedBy"]) == (
        name,
        "answer",
        "alice",
    )
    assert recorded["decidedAt"] and recorded["resumedJob"].endswith("-resume-1")
    assert status["resumes"] == 1 and status["jobName"] == recorded["resumedJob"]
    decided = review_of(kube, ns, name) or {}
    assert decided["status"]["state"] == "Resumed"
    assert decided["status"]["decidedBy"] == "alice"

    # the resumed runner's audit stream: the decision, and the tool result is the answer
    log = _pod_log(cluster, ns, status["jobName"])
    events = [json.loads(x) for x in log.splitlines() if x.startswith("{")]
    [decision] = [e for e in events if e["event"] == "review.decided"]
    assert (decision["decided_by"], decision["verdict"], decision["review"]) == (
        "alice",
        "answer",
        name,
    )
    ran = [e["event"] for e in events if e["event"] in ("command.run", "skill.failed")]
    assert not ran, "the escalated skill must not be called again"
    [call] = [e for e in events if e["event"] == "tool.call" and e.get("skill") == "deploy"]
    assert call["outcome"] == "ok"  # its result is the person's answer


@pytest.mark.usefixtures("review_admission")
def test_rejected_escalation_fails_the_run_naming_the_reviewer(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _escalating_agent(kube, ns, cluster)
    review = _parked(kube, ns, "ship-no", operator)
    res = decide(cluster, ns, review["metadata"]["name"], "bob", "reject", text="freeze week")
    assert res.returncode == 0, res.stderr
    run = wait_run(kube, ns, "ship-no", finished, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", "Failed"), cond
    assert "reject by bob: freeze week" in cond["message"]
    assert run["status"]["decisions"][0]["decidedBy"] == "bob"


@pytest.mark.usefixtures("review_admission")
def test_review_timeout_takes_the_failure_path_and_refuses_late_decisions(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _escalating_agent(kube, ns, cluster, reviewTimeoutSeconds=3)
    review = _parked(kube, ns, "ship-late", operator)
    name = review["metadata"]["name"]
    assert review["spec"]["request"]["deadline"]
    run = wait_run(kube, ns, "ship-late", finished, timeout=90, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", "Failed"), cond
    assert "no review decision within 3s" in cond["message"]
    expired = review_of(kube, ns, name) or {}
    assert expired["status"]["state"] == "Expired"
    late = decide(cluster, ns, name, "alice", "approve")
    assert late.returncode != 0 and f"review {name} expired" in late.stderr, late.stderr


@pytest.mark.usefixtures("review_admission")
def test_operator_killed_and_parked_pod_deleted_while_waiting(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _escalating_agent(kube, ns, cluster)
    review = _parked(kube, ns, "ship-later", operator)
    run = get(kube, ns, "Run", "ship-later") or {}
    parked_job = run["status"]["jobName"]
    # nothing of the parked run lives in a pod or in the operator's memory any more
    operator.kill()
    cluster.kubectl("-n", ns, "delete", "job", parked_job, "--wait=false")
    wait_for(
        lambda: (
            not [
                p
                for p in kube.core.list_namespaced_pod(ns).items
                if p.metadata.labels.get("batch.kubernetes.io/job-name") == parked_job
            ]
        ),
        60,
        message="the parked pod to be gone",
    )
    res = decide(cluster, ns, review["metadata"]["name"], "alice", "answer", text="by hand")
    assert res.returncode == 0, res.stderr
    operator.start()
    run = wait_run(kube, ns, "ship-later", finished, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("True", "Succeeded"), cond
    assert run["status"]["decisions"][0]["decidedBy"] == "alice"
    assert run["status"]["jobRecreations"] == 0, "the parked run was not started over"


@pytest.mark.usefixtures("review_admission")
def test_cancelled_while_waiting_closes_the_review(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _escalating_agent(kube, ns, cluster)
    review = _parked(kube, ns, "ship-never", operator)
    name = review["metadata"]["name"]
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "runs", "ship-never", {"spec": {"cancelled": True}}
    )
    run = wait_run(kube, ns, "ship-never", finished, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", "Cancelled"), cond
    wait_for(
        lambda: ((review_of(kube, ns, name) or {}).get("status") or {}).get("state") == "Closed",
        30,
        message="the Review to be closed",
    )
    late = decide(cluster, ns, name, "alice", "approve")
    assert late.returncode != 0 and f"review {name} is closed" in late.stderr, late.stderr


def _undo(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that takes ``after`` back to ``before`` (a key of a map too)."""
    patch: dict[str, Any] = {}
    for key in {*before, *after}:
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        patch[key] = _undo(was, now) if isinstance(was, dict) and isinstance(now, dict) else was
    return patch


@pytest.mark.usefixtures("review_admission")
def test_a_resumed_jobs_lost_start_record_is_written_when_the_operator_comes_back(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    # The operator dies right after creating the resumed stage's Job: the status write
    # that records it (resumes, the decision, the Job and its uid) never happened. Back,
    # it must take up the Job it made (not make a second one, not refuse its own) and
    # write what the lost write would have.
    ns = namespace
    _escalating_agent(kube, ns, cluster)
    review = _parked(kube, ns, "ship-once", operator)
    parked = (get(kube, ns, "Run", "ship-once") or {})["status"]
    res = decide(cluster, ns, review["metadata"]["name"], "alice", "answer", text="by hand")
    assert res.returncode == 0, res.stderr
    resumed = wait_run(
        kube, ns, "ship-once", lambda r: r["status"].get("resumes") == 1, operator=operator
    )["status"]
    made = kube.batch.read_namespaced_job(resumed["jobName"], ns).metadata.uid
    operator.kill()
    try:
        # Every field the resume and what followed it wrote, back as it was while parked.
        now = (get(kube, ns, "Run", "ship-once") or {})["status"]
        lost = _undo(parked, now)
        kube.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "runs", "ship-once", {"status": lost}
        )
        back = (get(kube, ns, "Run", "ship-once") or {})["status"]
        assert back.get("resumes") is None and back["jobName"] == parked["jobName"]
        assert f"Job/{resumed['jobName']}" not in back["createdUids"]
    finally:
        operator.start()
    run = wait_run(kube, ns, "ship-once", finished, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("True", "Succeeded"), cond
    status = run["status"]
    assert status["output"] == "done: the person's answer was used"
    assert (status["resumes"], status["jobName"]) == (1, resumed["jobName"])
    [recorded] = status["decisions"]
    assert (recorded["decidedBy"], recorded["resumedJob"]) == ("alice", resumed["jobName"])
    names = sorted(j.metadata.name for j in kube.batch.list_namespaced_job(ns).items)
    assert names == sorted({parked["jobName"], resumed["jobName"]}), names
    job = kube.batch.read_namespaced_job(resumed["jobName"], ns)
    assert job.metadata.uid == made, "the resumed stage's Job was replaced: it ran twice"
    assert status["createdUids"][f"Job/{resumed['jobName']}"] == made
    assert status.get("jobRecreations", 0) == 0
