"""schedule, agent_message and mailbox_send end to end: real control plane, operator, runner.

A planner agent (replay model) schedules a run of another topology, messages a granted and
an ungranted agent, posts to a mailbox, then parks for a person. The operator materializes
the effects when the run parks (a Run with ``startAfter`` owned by the Topology, a Run of
the messaged agent, a MailboxMessage), once: the resumed run creates nothing again. The
scheduled Run waits (``Scheduled``) through an operator restart and starts at its time.
People read the mailbox and acknowledge an item under RBAC and the admission policy.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.identity import team_secret_grant
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.http_server import HttpRequest, RecordingHttpServer

from .review_support import (
    bind_people,
    bind_users,
    decide,
    kubectl_as,
    parked_review,
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
    with_mailbox,
)

DELAY_SECONDS = 25
# Short webhook retries, so a delivery retried after a 500 takes seconds.
pytestmark = pytest.mark.operator_settings(
    env={"SWARMKIT_WEBHOOK_BACKOFF_SECONDS": "1", "SWARMKIT_DELIVERY_INTERVAL_SECONDS": "0.5"}
)


@pytest.fixture(scope="module")
def mailbox_roles(cluster: LocalCluster, crds: Any) -> None:
    from tests.unit.test_chart_render import render

    docs = render({}, release="swarmkit", namespace="swarmkit-system")
    roles = [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].startswith("swarmkit-mailbox-")
    ]
    assert {r["metadata"]["name"] for r in roles} == {
        "swarmkit-mailbox-reader",
        "swarmkit-mailbox-acknowledger",
    }
    cluster.kubectl(
        "apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(d) for d in roles)
    )


def _topology(name: str, agent: str) -> dict[str, Any]:
    return doc(
        "Topology",
        name,
        {
            "workspaceRef": {"name": "default"},
            "agents": [{"name": "root", "agentRef": {"name": agent}, "role": "root"}],
        },
    )


def _setup(kube: Kube, ns: str) -> None:
    apply_examples(kube, ns, edit=with_mailbox)
    apply(kube, ns, agent_with("sleeper", [{"text": "awake"}]))
    apply(kube, ns, agent_with("stranger", [{"text": "never asked"}]))
    apply(kube, ns, _topology("wakeup", "sleeper"))
    # An agent skill makes the wakeup topology (and its agent) reachable from the planner.
    apply(
        kube,
        ns,
        doc(
            "Skill",
            "call-wakeup",
            {
                "description": "Use when the sleeper must be woken now.",
                "category": "coordination",
                "implementation": {"type": "agent", "topology": "wakeup"},
                "provenance": {"authoredBy": "human", "version": "1.0.0"},
            },
        ),
    )
    calls = [
        {
            "name": "schedule",
            "arguments": {"in": f"{DELAY_SECONDS}s", "input": "wake up", "topology": "wakeup"},
        },
        {"name": "agent_message", "arguments": {"to": "sleeper", "message": "ticket 7 is yours"}},
        {"name": "agent_message", "arguments": {"to": "stranger", "message": "psst"}},
        {"name": "mailbox_send", "arguments": {"to": "ops", "message": "ticket 7 escalated"}},
    ]
    replay = [
        {"toolCalls": calls},
        {"toolCalls": [{"name": "human_task_request", "arguments": {"title": "Close ticket 7?"}}]},
        {"text": "planned"},
    ]
    apply(
        kube,
        ns,
        agent_with(
            "planner",
            replay,
            skills=["call-wakeup"],
            tools=["schedule", "agent_message", "mailbox_send", "human_task_request"],
            permissions=["schedule", "human_task_request"],
        ),
    )
    apply(kube, ns, _topology("planning", "planner"))
    wait_ready(kube, ns, "Topology", "planning")
    wait_ready(kube, ns, "Topology", "wakeup")


def _list(kube: Kube, ns: str, plural: str, selector: str) -> list[dict[str, Any]]:
    out = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, plural, label_selector=selector
    )
    return list(out["items"])


def _events(kube: Kube, ns: str, name: str) -> list[Any]:
    return [
        e
        for e in kube.core.list_namespaced_event(ns).items
        if e.involved_object.name == name and e.involved_object.kind == "Run"
    ]


@pytest.mark.usefixtures("review_admission", "mailbox_roles")
def test_effects_are_materialized_once_and_the_scheduled_run_starts_at_its_time(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _setup(kube, ns)
    bind_people(cluster, ns)
    create(kube, ns, run_manifest("plan", "planning", input="triage", correlationId="corr-7"))
    review = parked_review(kube, ns, "plan")
    plan = wait_run(
        kube, ns, "plan", lambda r: len(r["status"].get("effects") or []) == 3, operator=operator
    )
    uid = plan["metadata"]["uid"]
    prefix = f"plan-{uid.replace('-', '')[:8]}-fx"
    effects = plan["status"]["effects"]
    assert [(e["seq"], e["kind"], e["to"], e["state"]) for e in effects] == [
        (0, "schedule", "wakeup", "Materialized"),
        (1, "agent_message", "sleeper", "Materialized"),
        (2, "mailbox_send", "ops", "Materialized"),
    ], "the ungranted agent_message (stranger) records no effect"
    assert [e["object"] for e in effects] == [
        f"Run/{prefix}0",
        f"Run/{prefix}1",
        f"MailboxMessage/{prefix}2",
    ]

    # The scheduled Run: owned by the Topology, labelled with its scheduler, waiting.
    scheduled = get(kube, ns, "Run", f"{prefix}0") or {}
    [owner] = scheduled["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Topology", "wakeup")
    assert scheduled["metadata"]["labels"]["swarmkit.dev/scheduled-by"] == "plan"
    assert scheduled["spec"]["input"] == "wake up"
    start_after = datetime.fromisoformat(scheduled["spec"]["startAfter"])
    waiting = wait_run(kube, ns, f"{prefix}0", reason_is("Scheduled"), operator=operator)
    assert (succeeded(waiting) or {}).get("status") == "Unknown"

    # The operator restarts while the scheduled Run waits and the parent is parked.
    operator.kill()
    operator.start()
    res = decide(cluster, ns, review["metadata"]["name"], "alice", "approve")
    assert res.returncode == 0, res.stderr
    plan = wait_run(kube, ns, "plan", finished, operator=operator)
    assert (succeeded(plan) or {}).get("reason") == "Succeeded", succeeded(plan)
    assert plan["status"]["resumes"] == 1
    # Resumed from the review: nothing created again, no second Event.
    assert len(plan["status"]["effects"]) == 3
    selector = f"swarmkit.dev/effect-of={uid}"
    assert sorted(r["metadata"]["name"] for r in _list(kube, ns, "runs", selector)) == [
        f"{prefix}0",
        f"{prefix}1",
    ]
    assert len(_list(kube, ns, "mailboxmessages", selector)) == 1
    effect_events = [
        e
        for e in _events(kube, ns, "plan")
        if e.reason in ("RunScheduled", "AgentMessaged", "MailboxPosted")
    ]
    assert sorted(e.reason for e in effect_events) == [
        "AgentMessaged",
        "MailboxPosted",
        "RunScheduled",
    ]
    # a repeat would raise an Event's count (the same reason about the same object)
    assert [e.count for e in effect_events] == [1, 1, 1]

    # The messaged agent ran with the message as its input and the sender's correlation id.
    messaged = wait_run(kube, ns, f"{prefix}1", finished, operator=operator)
    assert messaged["spec"]["agentRef"] == {"name": "sleeper"}
    assert messaged["spec"]["input"] == "ticket 7 is yours"
    assert messaged["spec"]["correlationId"] == "corr-7"
    assert (succeeded(messaged) or {}).get("reason") == "Succeeded"

    # Deleting the Run that scheduled it leaves the scheduled Run alone (not its owner).
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "runs", "plan")
    wait_for(lambda: get(kube, ns, "Run", "plan") is None, 30, message="plan to be deleted")

    # The scheduled Run started at its time, not before.
    done = wait_run(kube, ns, f"{prefix}0", finished, timeout=DELAY_SECONDS + 60, operator=operator)
    assert (succeeded(done) or {}).get("reason") == "Succeeded", succeeded(done)
    assert done["status"]["output"] == "awake"
    started = datetime.fromisoformat(done["status"]["startTime"])
    assert started >= start_after, (started, start_after)
    # Deleting its Topology deletes it (garbage collection through the ownerReference).
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "topologies", "wakeup")
    wait_for(
        lambda: get(kube, ns, "Run", f"{prefix}0") is None,
        60,
        message="the scheduled Run to be collected with its Topology",
    )


def _ack(cluster: LocalCluster, ns: str, user: str, item: str, by: str) -> Any:
    patch = json.dumps({"spec": {"acknowledgement": {"by": by}}})
    return kubectl_as(
        cluster, user, "-n", ns, "patch", "mailboxmessage", item, "--type=merge", "-p", patch
    )


@pytest.mark.usefixtures("review_admission", "mailbox_roles")
def test_mailbox_items_are_read_and_acknowledged_under_rbac(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    apply_examples(kube, ns, edit=with_mailbox)
    replay = [
        {
            "toolCalls": [
                {"name": "mailbox_send", "arguments": {"to": "ops", "message": "disk 91%"}}
            ]
        },
        {"text": "posted"},
    ]
    apply(kube, ns, agent_with("watcher", replay, tools=["mailbox_send"]))
    wait_ready(kube, ns, "Agent", "watcher")
    create(kube, ns, run_manifest("watch", agent="watcher"))
    run = wait_run(kube, ns, "watch", finished, operator=operator)
    [effect] = run["status"]["effects"]
    item = effect["object"].split("/", 1)[1]

    bind_users(cluster, ns, [("carol", "swarmkit-mailbox-reader")])
    bind_users(cluster, ns, [("dave", "swarmkit-mailbox-acknowledger")])
    wait_for(
        lambda: (
            kubectl_as(
                cluster, "dave", "auth", "can-i", "patch", "mailboxmessages.swarmkit.dev", "-n", ns
            ).stdout.strip()
            == "yes"
        ),
        30,
        message="the acknowledger role to be bound",
    )
    # Listed with its printer columns, by a reader.
    listed = kubectl_as(cluster, "carol", "-n", ns, "get", "mailboxmessages")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "MAILBOX", "AGENT", "RUN", "ACKNOWLEDGED"]
    assert row.split()[:4] == [item, "ops", "watcher", "watch"]
    body = json.loads(
        kubectl_as(cluster, "carol", "-n", ns, "get", "skmb", item, "-o", "json").stdout
    )
    assert body["spec"]["message"] == "disk 91%"
    assert body["spec"]["sender"]["correlationId"] == run["metadata"]["uid"]

    # kubectl swarmkit inbox, as the reader: the item, its sender, not acknowledged yet.
    inbox = cli(cluster, "inbox", "ops", "-n", ns, "--as", "carol")
    assert inbox.returncode == 0, inbox.stderr
    assert inbox.stdout.split()[:6] == [
        "NAME",
        "MAILBOX",
        "AGENT",
        "RUN",
        "ACKNOWLEDGED",
        "MESSAGE",
    ]
    assert [item, "ops", "watcher", "watch", "disk", "91%"] == inbox.stdout.split()[6:12]
    other = cli(cluster, "inbox", "finance", "-n", ns, "--as", "carol")
    assert item not in other.stdout

    # A reader may not acknowledge (RBAC); an acknowledger may not forge who did (admission).
    refused = cli(cluster, "ack", item, "-n", ns, "--as", "carol")
    assert refused.returncode == 1 and "forbidden" in refused.stderr.lower(), refused.stderr
    forged = _ack(cluster, ns, "dave", item, "carol")
    assert forged.returncode != 0
    assert "acknowledgement.by must be your authenticated user name dave" in forged.stderr
    ok = cli(cluster, "ack", item, "-n", ns, "--as", "dave", "--comment", "on it")
    assert ok.returncode == 0, ok.stderr
    assert f"mailbox item {item}: acknowledged by dave" in ok.stdout
    again = _ack(cluster, ns, "dave", item, "dave-again")
    assert again.returncode != 0 and "already acknowledged" in again.stderr, again.stderr
    listed = kubectl_as(cluster, "carol", "-n", ns, "get", "mailboxmessages")
    assert listed.stdout.splitlines()[1].split()[4] == "dave"
    pending = cli(cluster, "inbox", "-n", ns, "--as", "carol", "--unacknowledged")
    assert pending.returncode == 0 and item not in pending.stdout


SECRET_PATH = "/hooks/T0-s3cr3t-w3bh00k-t0ken"


def test_a_mailbox_routed_to_a_webhook_posts_each_item_retrying_after_a_500(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    answers = iter([500])

    def responder(request: HttpRequest) -> tuple[int, Any]:
        return next(answers, 200), {"ok": True}

    with RecordingHttpServer(responder) as hook:
        url = hook.url + SECRET_PATH
        kube.core.create_namespaced_secret(
            ns,
            {"metadata": {"name": "ops-webhook"}, "stringData": {"url": url}},
        )
        # The chart grants no verb on Secrets: the team grants `get` on this one (issue 41).
        role, binding = team_secret_grant(ns, "ops-webhook")
        kube.rbac.create_namespaced_role(ns, role)
        kube.rbac.create_namespaced_role_binding(ns, binding)

        def routed(doc: dict[str, Any]) -> dict[str, Any]:
            if doc["kind"] == "Workspace":
                webhook = {"urlSecretRef": {"name": "ops-webhook", "key": "url"}}
                doc["spec"]["mailboxes"] = [{"name": "ops", "webhook": webhook}]
            return doc

        apply_examples(kube, ns, edit=routed)
        replay = [
            {"toolCalls": [{"name": "mailbox_send",
                            "arguments": {"to": "ops", "message": "disk 91%"}}]},
            {"text": "posted"},
        ]  # fmt: skip
        apply(kube, ns, agent_with("watcher", replay, tools=["mailbox_send"]))
        wait_ready(kube, ns, "Agent", "watcher")
        create(kube, ns, run_manifest("watch", agent="watcher"))
        run = wait_run(kube, ns, "watch", finished, operator=operator)
        [effect] = run["status"]["effects"]
        item = effect["object"].split("/", 1)[1]

        def delivered() -> dict[str, Any] | None:
            body = kube.custom.get_namespaced_custom_object(
                GROUP, VERSION, ns, "mailboxmessages", item
            )
            state = ((body.get("status") or {}).get("delivery") or {}).get("state")
            return dict(body) if state == "Delivered" else None

        body = wait_for(delivered, 60, message=lambda: operator.tail())
        posted = list(hook.requests)
    # One 500, then delivered on the retry; both with the Slack-compatible body.
    assert [r.path for r in posted] == [SECRET_PATH, SECRET_PATH]
    assert posted[-1].body == {"text": "[ops] watcher (run watch): disk 91%"}
    delivery = body["status"]["delivery"]
    assert delivery["attempts"] == 2 and delivery["deliveredTime"]
    assert body["metadata"]["labels"]["swarmkit.dev/webhook-delivery"] == "delivered"
    events = [e for e in kube.core.list_namespaced_event(ns).items
              if e.involved_object.name == item]  # fmt: skip
    assert [e.reason for e in events] == ["WebhookDelivered"]
    # The URL is a credential: not in the item, any Event, or the operator's log.
    token = SECRET_PATH.rsplit("/", 1)[1]
    assert token not in json.dumps(body)
    assert all(token not in (e.message or "") for e in kube.core.list_namespaced_event(ns).items)
    assert token not in operator.log()
    assert "webhook attempt 1 failed (HTTP 500)" in operator.log()
