"""What a Run's effects become (pure builders) and the webhook delivery's pure helpers."""

from __future__ import annotations

from datetime import UTC, datetime

from swarmkit_api import validate_manifest
from swarmkit_api.effects import Effect, RunEffect, object_name, outbox_from_log, outbox_line
from swarmkit_operator import delivery
from swarmkit_operator.builders import effects as fx

UID = "1a2b3c4d-0000-4000-8000-000000000001"


def test_object_names_are_stable_and_valid() -> None:
    assert object_name("plan", UID, 3) == "plan-1a2b3c4d-fx3"
    long = object_name("x" * 63, UID, 12)
    assert len(long) <= 63 and long.endswith("-1a2b3c4d-fx12")


def test_the_outbox_line_is_found_only_with_its_sha256() -> None:
    effects = [Effect(seq=0, kind="mailbox_send", agent="a", to="ops", message="hi")]
    line, sha = outbox_line(effects)
    log = f'{{"event":"run.start"}}\n{line}\n{{"event":"run.end"}}\n'
    assert outbox_from_log(log, sha) == effects
    assert outbox_from_log(log, "0" * 64) is None
    assert outbox_from_log("", sha) is None


def test_a_scheduled_run_is_owned_by_its_topology_and_starts_later() -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    effect = Effect(seq=0, kind="schedule", agent="lead", to="wakeup", message="go",
                    start_after=when)  # fmt: skip
    run = fx.scheduled_run("plan", "team", UID, "corr-7", effect, "topo-uid")
    validate_manifest(run)
    assert run["metadata"]["name"] == "plan-1a2b3c4d-fx0"
    assert run["metadata"]["ownerReferences"][0]["uid"] == "topo-uid"
    assert run["metadata"]["labels"]["swarmkit.dev/scheduled-by"] == "plan"
    assert run["metadata"]["labels"]["swarmkit.dev/effect-of"] == UID
    assert run["spec"] == {
        "topologyRef": {"name": "wakeup"},
        "input": "go",
        "correlationId": "corr-7",
        "startAfter": "2030-01-02T03:04:05Z",
    }


def test_a_message_run_and_a_mailbox_item_are_not_owned() -> None:
    message = Effect(seq=1, kind="agent_message", agent="lead", to="sleeper", message="hi")
    run = fx.message_run("plan", "team", UID, "corr-7", message)
    validate_manifest(run)
    assert "ownerReferences" not in run["metadata"]
    assert run["spec"]["agentRef"] == {"name": "sleeper"}
    post = Effect(seq=2, kind="mailbox_send", agent="lead", to="ops", message="m",
                  workspace="default")  # fmt: skip
    item = fx.mailbox_message("plan", "team", UID, "corr-7", post, webhook=True)
    validate_manifest(item)
    assert "ownerReferences" not in item["metadata"]
    assert item["metadata"]["labels"]["swarmkit.dev/webhook-delivery"] == "pending"
    plain = fx.mailbox_message("plan", "team", UID, "corr-7", post)
    assert "swarmkit.dev/webhook-delivery" not in plain["metadata"]["labels"]


def test_status_entries_merge_by_seq_keeping_earlier_stages() -> None:
    earlier = [{"seq": 0, "kind": "schedule", "agent": "a", "to": "t", "state": "Materialized"}]
    new = RunEffect(seq=1, kind="mailbox_send", agent="a", to="ops", state="Materialized")
    assert [e["seq"] for e in fx.status_entries(earlier, [new])] == [0, 1]
    again = RunEffect(seq=0, kind="schedule", agent="a", to="t", state="Failed", message="x")
    assert fx.status_entries(earlier, [again])[0]["state"] == "Failed"


def test_webhook_backoff_doubles_and_is_capped() -> None:
    base = delivery.BACKOFF_SECONDS
    assert [delivery.backoff(n) for n in (1, 2, 3)] == [base, 2 * base, 4 * base]
    assert delivery.backoff(100) == delivery.MAX_BACKOFF_SECONDS


def test_webhook_payload_and_route() -> None:
    item = {"spec": {"mailbox": "ops", "message": "disk 91%",
                     "sender": {"agent": "watcher", "run": "watch"}}}  # fmt: skip
    assert delivery.payload(item) == {"text": "[ops] watcher (run watch): disk 91%"}
    ws = {"spec": {"mailboxes": [{"name": "ops", "webhook": {"urlSecretRef": {"name": "s",
                                                                              "key": "url"}}},
                                 {"name": "quiet"}]}}  # fmt: skip
    assert delivery.webhook_ref(ws, "ops") == {"name": "s", "key": "url"}
    assert delivery.webhook_ref(ws, "quiet") is None
    assert delivery.webhook_ref(None, "ops") is None
