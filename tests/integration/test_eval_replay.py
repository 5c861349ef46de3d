"""Replay mode end to end (issue 39): an evaluation of recorded Runs answers their writes from
the recording and writes nothing a production Run would.

The real apiserver, the operator as a process, the runner in Jobs and the replay model. Agent
``sender`` posts to mailbox ``ops`` (``mailbox_send``: above the read tier; the operator
materializes it as a MailboxMessage) and answers. Its Run ``recorded``, labelled
``team: payments``, posts for real: one MailboxMessage, and ``status.recording`` keeps the
call with what it returned. An EvalSet built from that Run (``fromRuns``) is evaluated:

- on ``sender`` itself: its case Run carries the recording (``spec.replay``), its runner
  answers the same ``mailbox_send`` from it (``tool.replayed``, no ``tool.call``), the case
  passes, and no second MailboxMessage exists, nor any effect on the case Run;
- on ``sender-v2``, which posts another message: that call has no recorded answer and is
  refused (``ReplayNotRecorded``), never run: still one MailboxMessage.
"""

from __future__ import annotations

import json
from typing import Any

from swarmkit_api.replay import NOT_RECORDED
from swarmkit_devcluster.testing import Kube

from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    doc,
    example,
    finished,
    get,
    succeeded,
    wait_ready,
    wait_run,
)
from .test_evals import evalrun

POST = {"to": "ops", "message": "ticket 7: refund issued"}
ANSWER = "refund issued; ops told"


def _sender(name: str, post: dict[str, Any]) -> dict[str, Any]:
    turns = [{"toolCalls": [{"name": "mailbox_send", "arguments": post}]}, {"text": ANSWER}]
    return agent_with(name, turns, tools=["mailbox_send"])


def _messages(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return list(
        kube.custom.list_namespaced_custom_object(GROUP, VERSION, ns, "mailboxmessages")["items"]
    )


def _events(kube: Kube, ns: str, run: dict[str, Any], event: str) -> list[dict[str, Any]]:
    """The audit lines ``event`` of a finished Run's pod."""
    logs = kube.core.read_namespaced_pod_log(run["status"]["podName"], ns)
    return [json.loads(line) for line in logs.splitlines() if f'"{event}"' in line]


def test_a_replayed_case_answers_its_writes_from_the_recording_and_writes_nothing(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    workspace = example("Workspace", "default")
    workspace["spec"]["mailboxes"] = [{"name": "ops", "description": "on-call humans"}]
    apply(kube, ns, workspace)
    wait_ready(kube, ns, "Workspace", "default")
    apply(kube, ns, _sender("sender", POST))
    apply(kube, ns, _sender("sender-v2", {**POST, "message": "ticket 7: refund refused"}))
    wait_ready(kube, ns, "Agent", "sender")
    wait_ready(kube, ns, "Agent", "sender-v2")

    run = doc("Run", "recorded", {"agentRef": {"name": "sender"}, "input": "ticket 7"})
    run["metadata"]["labels"] = {"team": "payments"}
    apply(kube, ns, run)
    recorded = wait_run(kube, ns, "recorded", finished, operator=operator)
    # The condition as text: pytest cuts a dict message at 240 characters, which hid why
    # (e.g. ImagePullFailed: the runtime image not built from this checkout's sources).
    assert (succeeded(recorded) or {}).get("status") == "True", json.dumps(succeeded(recorded))
    assert [m["spec"]["message"] for m in _messages(kube, ns)] == [POST["message"]]
    [call] = recorded["status"]["recording"]
    assert (call["agent"], call["tool"], call["arguments"]) == ("sender", "mailbox_send", POST)
    assert call["content"] and not call.get("error"), call

    apply(
        kube,
        ns,
        doc("EvalSet", "triage-cases", {"fromRuns": {"matchLabels": {"team": "payments"}}}),
    )
    wait_ready(kube, ns, "EvalSet", "triage-cases")
    lax = {"minCases": 1, "minPassRate": 0.0}

    # The same agent: the recorded answer, nothing posted.
    status = evalrun(kube, ns, "same", candidate={"agentRef": {"name": "sender"}},
                     compare=False, criteria=lax)["status"]  # fmt: skip
    [case] = status["cases"]
    assert case["candidate"]["outcome"] == "Passed", case
    [name] = case["candidate"]["runs"]
    replayed = get(kube, ns, "Run", name) or {}
    assert replayed["spec"]["readOnly"] is True and replayed["spec"]["replay"] == [call]
    [answered] = _events(kube, ns, replayed, "tool.replayed")
    assert answered["tool"] == "mailbox_send", answered
    assert not [c for c in _events(kube, ns, replayed, "tool.call") if c["tool"] == "mailbox_send"]
    assert not replayed["status"].get("effects") and not replayed["status"].get("recording")
    assert [m["spec"]["message"] for m in _messages(kube, ns)] == [POST["message"]]

    # Another message: no recorded answer, refused, never posted.
    status = evalrun(kube, ns, "other", candidate={"agentRef": {"name": "sender-v2"}},
                     compare=False, criteria=lax)["status"]  # fmt: skip
    [name] = status["cases"][0]["candidate"]["runs"]
    other = get(kube, ns, "Run", name) or {}
    [refused] = _events(kube, ns, other, "tool.refused")
    assert (refused["tool"], refused["reason"]) == ("mailbox_send", NOT_RECORDED), refused
    assert not other["status"].get("effects")
    assert [m["spec"]["message"] for m in _messages(kube, ns)] == [POST["message"]]
