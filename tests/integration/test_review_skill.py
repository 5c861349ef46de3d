"""A swarm-authored Skill stays locked until a reviewer approves its Review (end to end).

The operator opens ``skill-<name>-<hash8>`` for the Skill's content version; until a
reviewer approves it, Runs refuse the skill (``SkillBlocked``), whatever an editor does
(the old ``swarmkit.dev/reviewed-by`` annotation counts for nothing; ``edit`` cannot decide
a Review). Approved, the next Run calls it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from .review_support import EDITOR, bind_people, decide, kubectl_as, review_admission, review_of  # noqa: F401
from .runs_support import (
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    doc,
    finished,
    get,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
    with_command,
)

_with_hello = with_command("swarm", "hello", "Say hello.", "print('hello from the swarm')", "read")


def _skill_calls(cluster: LocalCluster, ns: str, run: dict[str, Any]) -> list[dict[str, Any]]:
    log = cluster.kubectl("-n", ns, "logs", f"job/{run['status']['jobName']}").stdout
    events = [json.loads(x) for x in log.splitlines() if x.startswith("{")]
    return [e for e in events if e.get("skill") == "hello" and e["event"].startswith("tool.")]


@pytest.mark.usefixtures("review_admission")
def test_swarm_authored_skill_is_unlocked_only_by_an_approved_review(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    apply_examples(kube, ns, edit=_with_hello)
    bind_people(cluster, ns)
    skill = doc(
        "Skill",
        "hello",
        {
            "description": "Use when a greeting is needed.",
            "category": "capability",
            "implementation": {"type": "command", "pack": "swarm", "command": "hello"},
            "provenance": {"authoredBy": "authored_by_swarm", "version": "0.1.0"},
        },
    )
    apply(kube, ns, skill)
    replay = [{"toolCalls": [{"name": "hello", "arguments": {}}]}, {"text": "greeted"}]
    apply(kube, ns, agent_with("greeter", replay, skills=["hello"]))
    wait_ready(kube, ns, "Agent", "greeter")

    def content_hash() -> str | None:
        return ((get(kube, ns, "Skill", "hello") or {}).get("status") or {}).get("contentHash")

    digest: str = wait_for(content_hash, 60)
    name = f"skill-hello-{digest[:8]}"
    review: dict[str, Any] = wait_for(lambda: review_of(kube, ns, name), 60)
    request = review["spec"]["request"]
    assert (request["kind"], request["skillRef"]["name"], request["contentHash"]) == (
        "skill_review",
        "hello",
        digest,
    )
    assert review["metadata"]["ownerReferences"][0]["kind"] == "Skill"

    # an editor can neither decide nor unlock it with the old annotation
    denied = decide(cluster, ns, name, EDITOR, "approve")
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    annotated = kubectl_as(
        cluster, EDITOR, "-n", ns, "annotate", "skill", "hello", "swarmkit.dev/reviewed-by=eve"
    )
    assert annotated.returncode == 0, annotated.stderr
    create(kube, ns, run_manifest("before", agent="greeter"))
    run = wait_run(kube, ns, "before", finished, operator=operator)
    [refused] = _skill_calls(cluster, ns, run)
    assert refused["event"] == "tool.refused" and refused["reason"] == "SkillBlocked"
    assert name in refused["message"]

    ok = decide(cluster, ns, name, "alice", "approve", text="read the command, it is fine")
    assert ok.returncode == 0, ok.stderr
    wait_for(
        lambda: ((review_of(kube, ns, name) or {}).get("status") or {}).get("decidedBy") == "alice",
        30,
        message="the operator to record the decision",
    )
    create(kube, ns, run_manifest("after", agent="greeter"))
    run = wait_run(kube, ns, "after", finished, operator=operator)
    cond = succeeded(run) or {}
    assert cond.get("status") == "True", cond
    [called] = _skill_calls(cluster, ns, run)
    assert called["event"] == "tool.call" and called["outcome"] == "ok", called
