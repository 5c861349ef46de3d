"""The other places a person is asked, end to end (real control plane, operator, runner):

* a ``strict`` permission tier: the call waits for an approval, then runs;
* the ``human_task_request`` builtin (gated by its permission), decided with the
  ``kubectl swarmkit review`` plugin;
* a remote A2A agent's question under ``onUnanswerable: relay`` (a real a2a-sdk server):
  the person's answer goes to the waiting remote task; no answer in time cancels it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.a2a_server import A2AServer

from .review_support import bind_people, decide, parked_review, review_admission, review_of  # noqa: F401
from .runs_support import (
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    cli_module,
    create,
    doc,
    finished,
    reason_is,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
    with_command,
)


@pytest.fixture(scope="module")
def a2a() -> Iterator[A2AServer]:
    with A2AServer() as server:
        yield server


def _skill(name: str, implementation: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return doc(
        "Skill",
        name,
        {
            "description": f"Use when {name} is needed.",
            "category": "capability",
            "implementation": implementation,
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
            **spec,
        },
    )


def _events(cluster: LocalCluster, ns: str, job: str) -> list[dict[str, Any]]:
    log = cluster.kubectl("-n", ns, "logs", f"job/{job}", check=False).stdout
    return [json.loads(x) for x in log.splitlines() if x.startswith("{")]


@pytest.mark.usefixtures("review_admission")
def test_strict_tier_call_waits_for_approval_then_runs(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace

    with_ship = with_command("ops", "ship", "Ship the release.", "print('shipped v7')", "write")

    apply_examples(kube, ns, edit=with_ship)
    bind_people(cluster, ns)
    impl = {"type": "command", "pack": "ops", "command": "ship", "permission": "strict"}
    apply(kube, ns, _skill("ship", impl))
    replay = [{"toolCalls": [{"name": "ship", "arguments": {}}]}, {"text": "released"}]
    apply(kube, ns, agent_with("releaser", replay, skills=["ship"]))
    wait_ready(kube, ns, "Agent", "releaser")
    create(kube, ns, run_manifest("release", agent="releaser"))
    wait_run(kube, ns, "release", reason_is("AwaitingReview"), operator=operator)
    review = parked_review(kube, ns, "release")
    request = review["spec"]["request"]
    assert request["kind"] == "approval" and request["tool"] == "ship"
    assert "strict" in request["question"]
    stage0 = (review_of(kube, ns, review["metadata"]["name"]) or {})["spec"]["request"]["runRef"]
    assert stage0["name"] == "release"

    res = decide(cluster, ns, review["metadata"]["name"], "alice", "approve")
    assert res.returncode == 0, res.stderr
    run = wait_run(kube, ns, "release", finished, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("True", "Succeeded"), cond
    events = _events(cluster, ns, run["status"]["jobName"])
    [ran] = [e for e in events if e["event"] == "command.run"]
    assert ran["outcome"] == "ok", ran  # the approved call ran, once, in the resumed stage
    assert run["status"]["decisions"][0]["verdict"] == "approve"


@pytest.mark.usefixtures("review_admission")
def test_human_task_request_answered_with_the_plugin(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    apply_examples(kube, ns)
    bind_people(cluster, ns)
    replay = [
        {
            "toolCalls": [
                {
                    "name": "human_task_request",
                    "arguments": {"title": "Pick the release name", "details": "v2 or v3?"},
                }
            ]
        },
        {"toolCalls": [{"name": "human_task_decide", "arguments": {}}]},
        {"text": "named it"},
    ]
    agent = agent_with(
        "asker",
        replay,
        tools=["human_task_request", "human_task_decide"],
        permissionsBundle="coordinator",
        permissions=["human_task_decide"],
    )
    apply(kube, ns, agent)
    wait_ready(kube, ns, "Agent", "asker")
    create(kube, ns, run_manifest("name-it", agent="asker"))
    wait_run(kube, ns, "name-it", reason_is("AwaitingReview"), operator=operator)
    name = parked_review(kube, ns, "name-it")["metadata"]["name"]

    listed = cli_module(cluster, "review", "list", "-n", ns)
    assert listed.returncode == 0, listed.stderr
    assert [name, "name-it", "human_task", "Pending"] == listed.stdout.splitlines()[1].split()[:4]
    shown = cli_module(cluster, "review", "show", name, "-n", ns)
    assert "Pick the release name" in shown.stdout and "v2 or v3?" in shown.stdout
    refused = cli_module(cluster, "review", "answer", name, "--text", "v3", "--as", "eve", "-n", ns)
    assert refused.returncode == 1 and "forbidden" in refused.stderr.lower(), refused.stderr
    answered = cli_module(
        cluster, "review", "answer", name, "--text", "v3", "--as", "bob", "-n", ns
    )
    assert answered.returncode == 0, answered.stderr
    assert f"review {name}: answer by bob" in answered.stdout

    run = wait_run(kube, ns, "name-it", finished, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("True", "Succeeded"), cond
    assert run["status"]["decisions"][0]["decidedBy"] == "bob"
    events = _events(cluster, ns, run["status"]["jobName"])
    calls = {e["tool"]: e["outcome"] for e in events if e["event"] == "tool.call"}
    assert calls == {"human_task_request": "ok", "human_task_decide": "ok"}, calls


def _remote(kube: Kube, ns: str, a2a: A2AServer, **constraints: Any) -> None:
    impl = {
        "type": "agent",
        "cardUrl": a2a.card_url,
        "skillId": "research",
        "onUnanswerable": "relay",
        "timeoutS": 120,
    }
    apply(kube, ns, _skill("research-remote", impl, constraints=constraints))
    replay = [
        {"toolCalls": [{"name": "research-remote", "arguments": {"input": "ask 1 which color"}}]},
        {"text": "the remote agent finished"},
    ]
    apply(kube, ns, agent_with("researcher", replay, skills=["research-remote"]))
    wait_ready(kube, ns, "Agent", "researcher")


@pytest.mark.usefixtures("review_admission")
def test_relayed_remote_question_answered_by_a_person(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    a2a: A2AServer,
) -> None:
    ns = namespace
    apply_examples(kube, ns)
    bind_people(cluster, ns)
    _remote(kube, ns, a2a)
    create(kube, ns, run_manifest("relay", agent="researcher"))
    wait_run(kube, ns, "relay", reason_is("AwaitingReview"), operator=operator)
    review = parked_review(kube, ns, "relay")
    request = review["spec"]["request"]
    assert request["kind"] == "input_request" and request["question"] == "question 1?"
    task_id = request["taskId"]

    res = decide(cluster, ns, review["metadata"]["name"], "alice", "answer", text="teal")
    assert res.returncode == 0, res.stderr
    run = wait_run(kube, ns, "relay", finished, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("True", "Succeeded"), cond
    sent = [c for c in a2a.records()["calls"] if c.get("taskId") == task_id and c.get("text")]
    assert [c["text"] for c in sent][-1] == "teal", sent  # the person's answer, to that task
    events = _events(cluster, ns, run["status"]["jobName"])
    [response] = [e for e in events if e["event"] == "executor.input_response"]
    assert response["responder"] == "user:alice"
    [task] = [e for e in events if e["event"] == "a2a.task"]
    assert task["state"] == "completed"


@pytest.mark.usefixtures("review_admission")
def test_relayed_question_unanswered_in_time_cancels_the_remote_task(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    a2a: A2AServer,
) -> None:
    ns = namespace
    apply_examples(kube, ns)
    bind_people(cluster, ns)
    _remote(kube, ns, a2a, reviewTimeoutSeconds=3)
    create(kube, ns, run_manifest("relay-late", agent="researcher"))
    review = parked_review(kube, ns, "relay-late")
    task_id = review["spec"]["request"]["taskId"]
    run = wait_run(kube, ns, "relay-late", finished, timeout=90, operator=operator)
    cond = succeeded(run) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", "Failed"), cond
    assert "no review decision within 3s" in cond["message"]
    wait_for(
        lambda: task_id in a2a.records()["cancels"],
        30,
        message=lambda: f"remote task {task_id} to be cancelled: {a2a.records()}",
    )
