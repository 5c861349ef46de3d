"""Funnel gates in the runner: real runner processes against a scripted model API.

The gated node's agent drafts; validate, judge and review send it back with their critique;
the run parks for the approval (a ``funnel_approval`` review item with the gate report) and
a resumed run goes on with the approved artifact, or fails on a rejection. The last user
message of each model request is what the drafting agent was told, so the tests read the
critique off the wire.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swarmkit_api.bundle import BundleTopology, secret_env_name
from swarmkit_api.funnel import FunnelSpec
from swarmkit_api.review import CHECKPOINT_LINE_PREFIX, Checkpoint
from swarmkit_api.topology import TopologySpec
from swarmkit_runner.funnel import changed_lines, diff_problems
from tests.support.bundles import (
    agent,
    bundle,
    decision_skill,
    openai_provider,
    secret_ref,
    write_bundle,
)
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_subprocess

from .test_resume import _resume

SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "body": {"type": "string", "minLength": 5}},
    "required": ["title", "body"],
    "additionalProperties": False,
}
APPROVE = {"rules": [{"roles": ["leads"], "kOf": 2}], "roles": {"leads": {"groups": ["leads"]}}}
JUDGE_OUTPUTS = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "reasoning": {"type": "string"},
    },
    "required": ["verdict", "confidence", "reasoning"],
}


def _judged(confidence: float, reasoning: str) -> Any:
    return text(json.dumps({"verdict": "x", "confidence": confidence, "reasoning": reasoning}))


def _gated_bundle(  # type: ignore[no-untyped-def]
    server: ScriptedModelServer,
    funnel: dict[str, Any],
    reviewer: bool = False,
    native: dict[str, bool] | None = None,
):
    spec = TopologySpec.model_validate(
        {
            "workspaceRef": {"name": "default"},
            "agents": [
                {
                    "name": "writer",
                    "agentRef": {"name": "writer"},
                    "role": "root",
                    "funnel": {"name": "release-notes"},
                }
            ],
        }
    )
    topo = BundleTopology(
        name="notes",
        version="v1",
        spec=spec,
        funnels={"release-notes": FunnelSpec.model_validate(funnel)},
    )
    agents = [agent("writer", provider="m", skills=["quality-judge"], native=native)]
    if reviewer:
        agents.append(agent("critic", provider="m", native=native))
    return bundle(
        agents=agents,
        skills=[
            decision_skill(
                "quality-judge",
                {"type": "llm_prompt", "prompt": "Score the release notes."},
                outputs=JUDGE_OUTPUTS,
            )
        ],
        providers=[openai_provider("m", server.openai_base_url)],
        topology=topo,
        input="Write the release notes.",
    )


def _last_user(server: ScriptedModelServer, n: int) -> str:
    msgs = [m for m in server.requests[n].messages if m.get("role") == "user"]
    return str(msgs[-1]["content"])


GOOD = json.dumps({"title": "v2", "body": "Faster runs."})
BETTER = json.dumps({"title": "v2", "body": "Runs start 3x faster; see docs."})


def test_invalid_shape_autocorrected_then_judge_critique_retried_then_parked(
    tmp_path: Path,
) -> None:
    funnel = {
        "validate": {"schema": SCHEMA},
        "judge": {"skill": "quality-judge"},
        "approve": APPROVE,
    }
    script = [
        text('{"title": "v2"}'),  # draft 1: body missing
        text(GOOD),  # autocorrected
        _judged(0.4, "Say how much faster, and link the docs."),
        text(BETTER),  # draft 2 (retry 1)
        _judged(0.93, "Specific and linked."),
    ]
    with ScriptedModelServer(script) as server:
        parked = run_subprocess(write_bundle(_gated_bundle(server, funnel), tmp_path))
        assert parked.outcome == "AwaitingReview", parked.stderr
        # the autocorrect re-ask names the missing field
        assert "'body' is a required property" in _last_user(server, 1)
        # the judge saw draft 2's corrected shape; the drafter then got the critique
        assert GOOD in _last_user(server, 2)
        retry_prompt = _last_user(server, 3)
        assert "scored your answer 0.4, below the threshold of 0.8" in retry_prompt
        assert "Say how much faster, and link the docs." in retry_prompt
        assert len(server.requests) == 5

        [item] = parked.result["reviewItems"]
        assert item["kind"] == "funnel_approval"
        gate = item["gate"]
        assert gate["funnel"] == "release-notes" and gate["node"] == "writer"
        assert json.loads(gate["artifact"]) == json.loads(BETTER)
        assert (gate["attempts"], gate["score"], gate["exhausted"]) == (2, 0.93, False)
        assert gate["validation"] == []
        layers = [
            (e["event"], e["outcome"]) for e in parked.audit if e["event"].startswith("funnel.")
        ]
        assert layers == [
            ("funnel.validate", "autocorrect"),
            ("funnel.validate", "ok"),
            ("funnel.judge", "below_threshold"),
            ("funnel.retry", "retry"),
            ("funnel.validate", "ok"),
            ("funnel.judge", "ok"),
            ("funnel.approval", "AwaitingReview"),
        ]
        # the same layer results, tallied for the operator's metrics
        assert gate["layerResults"] == [
            {"layer": "judge", "outcome": "below_threshold", "count": 1},
            {"layer": "judge", "outcome": "ok", "count": 1},
            {"layer": "validate", "outcome": "autocorrect", "count": 1},
            {"layer": "validate", "outcome": "ok", "count": 2},
        ]
        assert gate["retries"] == 1

        approved = _resume(
            parked, tmp_path, {"verdict": "approve", "decidedBy": "alice", "text": "ship"}
        )
        assert len(server.requests) == 5, "a resumed run replays; it asks the model nothing"
    assert approved.outcome == "Succeeded", approved.stderr
    assert json.loads(approved.result["output"]) == json.loads(BETTER)
    [decided] = approved.events("funnel.decided")
    assert decided["verdict"] == "approve" and "alice" in decided["by"]


def test_rejection_fails_the_run_naming_who(tmp_path: Path) -> None:
    funnel = {"validate": {"schema": SCHEMA}, "approve": APPROVE}
    with ScriptedModelServer([text(GOOD)]) as server:
        parked = run_subprocess(write_bundle(_gated_bundle(server, funnel), tmp_path))
        assert parked.outcome == "AwaitingReview", parked.stderr
        rejected = _resume(parked, tmp_path, {"verdict": "reject", "decidedBy": "bob"})
    assert rejected.outcome == "Failed"
    assert (
        "funnel release-notes at node writer: rejected (reject by bob)"
        in rejected.result["message"]
    )
    assert rejected.result["output"] == ""


def test_exhaustion_opens_the_approval_with_the_last_critique(tmp_path: Path) -> None:
    funnel = {"judge": {"skill": "quality-judge"}, "maxRetries": 1, "approve": APPROVE}
    script = [text(GOOD), _judged(0.2, "Too vague."), text(BETTER), _judged(0.5, "Still vague.")]
    with ScriptedModelServer(script) as server:
        parked = run_subprocess(write_bundle(_gated_bundle(server, funnel), tmp_path))
    assert parked.outcome == "AwaitingReview", parked.stderr
    [item] = parked.result["reviewItems"]
    gate = item["gate"]
    assert gate["exhausted"] is True and gate["attempts"] == 2 and gate["score"] == 0.5
    assert "Still vague." in gate["critique"]
    assert "retries are exhausted" in item["question"]
    [ex] = parked.events("funnel.exhausted")
    assert ex["outcome"] == "approval"


def test_exhaustion_fails_when_the_funnel_says_so(tmp_path: Path) -> None:
    funnel = {
        "judge": {"skill": "quality-judge", "threshold": 0.9},
        "maxRetries": 0,
        "onExhausted": "fail",
        "approve": APPROVE,
    }
    with ScriptedModelServer([text(GOOD), _judged(0.89, "Nearly.")]) as server:
        out = run_subprocess(write_bundle(_gated_bundle(server, funnel), tmp_path))
    assert out.outcome == "Failed"
    assert "retries exhausted after 1 draft(s) (onExhausted: fail)" in out.result["message"]
    assert out.result["reviewItems"] == []


def test_reviewer_route_back_then_low_findings_travel_to_the_approval(tmp_path: Path) -> None:
    funnel = {"review": {"agent": "critic"}, "approve": APPROVE}
    high = {"findings": [{"severity": "critical", "message": "Leaks the customer name."}]}
    low = {"findings": [{"severity": "low", "message": "Typo in the title."}]}
    script = [text(GOOD), text(json.dumps(high)), text(BETTER), text(json.dumps(low))]
    with ScriptedModelServer(script) as server:
        out = run_subprocess(write_bundle(_gated_bundle(server, funnel, reviewer=True), tmp_path))
        assert "Leaks the customer name." in _last_user(server, 2)
    assert out.outcome == "AwaitingReview", out.stderr
    gate = out.result["reviewItems"][0]["gate"]
    assert gate["findings"] == [{"severity": "low", "message": "Typo in the title."}]
    assert [e["outcome"] for e in out.events("funnel.review")] == ["route_back", "ok"]


def test_the_reviewer_runs_read_only_whatever_it_was_granted(tmp_path: Path) -> None:
    """Defence in depth behind the Topology's ReviewerNotReadOnly: both agents hold native
    file_io; the drafter writes a file, the reviewer (in the review layer) may not call
    file_io at all (one tool that can write, whatever the operation), the file is untouched
    and each refusal is audited and readable by its model."""
    funnel = {"review": {"agent": "critic"}, "approve": APPROVE}
    low = {"findings": [{"severity": "low", "message": "Fine."}]}
    script = [
        tool_call("file_io", operation="write", path="draft.txt", content="v2"),
        text(GOOD),
        tool_call("file_io", operation="read", path="draft.txt"),
        tool_call("file_io", operation="write", path="draft.txt", content="tampered"),
        text(json.dumps(low)),
    ]
    with ScriptedModelServer(script) as server:
        layout = write_bundle(
            _gated_bundle(server, funnel, reviewer=True, native={"fileIo": True}), tmp_path
        )
        out = run_subprocess(layout)
        [(read, read_error)] = server.requests[3].tool_results()
        [(refused, refused_error)] = server.requests[4].tool_results()
    assert out.outcome == "AwaitingReview", out.stderr
    assert read_error and "ReviewerReadOnly" in read, read
    assert refused_error and "ReviewerReadOnly" in refused
    assert "reviewer of funnel release-notes" in refused
    assert (layout.scratch / "work" / "draft.txt").read_text() == "v2"
    writes = [c for c in out.tool_calls("file_io") if c.get("agent") == "writer"]
    assert [c["outcome"] for c in writes] == ["ok"]
    refusals = out.events("tool.refused")
    assert [(r["agent"], r["reason"]) for r in refusals] == [
        ("critic", "ReviewerReadOnly"),
        ("critic", "ReviewerReadOnly"),
    ]


DIFF = """--- a/src/app.py
+++ b/src/app.py
@@ -10,2 +10,3 @@
 def run():
+    check()
     go()
--- a/README.md
+++ b/README.md
@@ -1,1 +1,2 @@
 # App
+More.
"""


def test_cited_change_and_slice_budget_are_checked_against_the_diff() -> None:
    assert changed_lines(DIFF) == {"src/app.py": {11}, "README.md": {2}}
    spec = FunnelSpec.model_validate(
        {
            "validate": {"citedChange": True, "sliceBudget": {"maxDiffLines": 1}},
            "approve": APPROVE,
        }
    )
    artifact = {
        "summary": "s",
        "diff": DIFF,
        "citations": [{"claim": "c", "path": "src/app.py", "lines": [30]}],
    }
    assert diff_problems(spec, artifact) == [
        "diff: 2 added lines, over the slice budget of 1; split the change",
        "citations[0]: src/app.py [30] was not changed by the diff",
        "diff: README.md was changed but no citation names it",
    ]
    ok = {
        **artifact,
        "citations": [{"claim": "c", "path": p, "lines": []} for p in ("src/app.py", "README.md")],
    }
    loose = FunnelSpec.model_validate({"validate": {"citedChange": True}, "approve": APPROVE})
    assert diff_problems(loose, ok) == []


def test_a_secret_in_the_artifact_never_reaches_the_approval(tmp_path: Path) -> None:
    key = "sk-test-7c31e0a9b2"
    ref = secret_ref("model-api", "key")
    leaky = json.dumps({"title": "v2", "body": f"Use the key {key} to call it."})
    funnel = {"validate": {"schema": SCHEMA}, "approve": APPROVE}
    with ScriptedModelServer([text(leaky)], api_key=key) as server:
        b = _gated_bundle(server, funnel)
        provider = openai_provider("m", server.openai_base_url, api_key=ref)
        b = b.model_copy(
            update={"workspace": b.workspace.model_copy(update={"model_providers": [provider]})}
        )
        out = run_subprocess(write_bundle(b, tmp_path), env={secret_env_name(ref): key})
    assert out.outcome == "AwaitingReview", out.stderr
    assert key not in out.stdout + out.layout.termination_log.read_text()  # type: ignore[union-attr]
    [line] = [x for x in out.stdout.splitlines() if x.startswith(CHECKPOINT_LINE_PREFIX)]
    item = Checkpoint.decode(line[len(CHECKPOINT_LINE_PREFIX) :]).item
    assert "[REDACTED]" in item["gate"]["artifact"] and key not in json.dumps(item)


def test_a_revision_goes_back_to_the_drafter_and_opens_a_new_round_with_the_diff(
    tmp_path: Path,
) -> None:
    # maxRetries 0: a person's revision is a new draft, not an automated retry
    funnel = {"validate": {"schema": SCHEMA}, "approve": APPROVE, "maxRetries": 0}
    with ScriptedModelServer([text(GOOD), text(BETTER)]) as server:
        parked = run_subprocess(write_bundle(_gated_bundle(server, funnel), tmp_path))
        assert parked.outcome == "AwaitingReview", parked.stderr
        [item] = parked.result["reviewItems"]
        assert (item["gate"]["round"], item["gate"]["diff"]) == (1, "")

        asked = {"verdict": "revise", "decidedBy": "bob", "text": "Say how much faster."}
        again = _resume(parked, tmp_path, asked)
        assert again.outcome == "AwaitingReview", again.stderr
        assert len(server.requests) == 2
        prompt = _last_user(server, 1)
        assert "bob asked for a revision before approving" in prompt
        assert "Say how much faster." in prompt
        [item] = again.result["reviewItems"]
        gate = item["gate"]
        assert json.loads(gate["artifact"]) == json.loads(BETTER)
        assert (gate["round"], gate["attempts"], gate["exhausted"]) == (2, 2, False)
        diff = gate["diff"].splitlines()
        assert diff[:2] == ["--- round 1", "+++ round 2"]
        assert '-  "body": "Faster runs.",' in diff
        assert '+  "body": "Runs start 3x faster; see docs.",' in diff
        # round 2 reports its own draft's layer results only (round 1's were counted when
        # round 1 opened), although this stage replayed round 1's draft
        assert item["gate"]["layerResults"] == [{"layer": "validate", "outcome": "ok", "count": 1}]
        assert gate["retries"] == 0
        # this stage's audit: round 1's revision applied, round 2 opened
        [revised] = again.events("funnel.decided")
        assert (revised["verdict"], revised["round"]) == ("revise", 1)
        assert "bob: Say how much faster." in revised["by"]
        assert [e["round"] for e in again.events("funnel.approval")] == [2]

        approved = _resume(again, tmp_path, {"verdict": "approve", "decidedBy": "alice"})
        assert len(server.requests) == 2, "the resumed run replays both rounds"
    assert approved.outcome == "Succeeded", approved.stderr
    assert json.loads(approved.result["output"]) == json.loads(BETTER)
    verdicts = [(e["verdict"], e["round"]) for e in approved.events("funnel.decided")]
    assert verdicts == [("approve", 2)]
