"""A parked run resumes from its checkpoint with the decision: two real runner processes.

The first process parks (AwaitingReview) and prints its checkpoint line; the second gets
that checkpoint and a decision (as the operator mounts them) and goes on from the call
that parked, without calling anything again.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.review import CHECKPOINT_LINE_PREFIX, Checkpoint, ResumeDecision
from tests.support.bundles import agent, bundle, openai_provider, skill, write_bundle
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_subprocess


def _ops_pack(counter: Path) -> dict[str, Any]:
    # Each call appends a line to ``counter`` (so a test sees how often it ran), then fails.
    code = (
        f"import sys; open({str(counter)!r}, 'a').write('x\\n'); sys.exit('deploy target locked')"
    )
    return {
        "id": "ops",
        "commands": [
            {"name": "deploy", "description": "Deploy.", "argv": [sys.executable, "-c", code]}
        ],
    }


def _checkpoint(out: RunOutput) -> str:
    [line] = [ln for ln in out.stdout.splitlines() if ln.startswith(CHECKPOINT_LINE_PREFIX)]
    encoded = line[len(CHECKPOINT_LINE_PREFIX) :]
    assert hashlib.sha256(encoded.encode()).hexdigest() == out.result["checkpointSha256"]
    return encoded


def _resume(out: RunOutput, tmp: Path, decision: dict[str, Any]) -> RunOutput:
    encoded = _checkpoint(out)
    saved = Checkpoint.decode(encoded)
    (tmp / "checkpoint").write_text(encoded)
    full = {"review": "ship-1", "key": saved.parked_key, "kind": saved.item["kind"], **decision}
    (tmp / "decision.json").write_text(ResumeDecision.model_validate(full).model_dump_json())
    assert out.layout is not None
    args = [*out.layout.cli_args(), "--checkpoint", str(tmp / "checkpoint")]
    args += ["--decision", str(tmp / "decision.json")]
    return run_subprocess(out.layout, args=args)


def _escalating(server: ScriptedModelServer, counter: Path) -> Any:
    return bundle(
        agents=[agent("dev", provider="m", skills=["deploy"])],
        skills=[
            skill(
                "deploy",
                implementation={"type": "command", "pack": "ops", "command": "deploy"},
                constraints={"onFailure": "escalate_to_human", "reviewTimeoutSeconds": 600},
            )
        ],
        providers=[openai_provider("m", server.openai_base_url)],
        workspace={"commandPacks": [_ops_pack(counter)]},
    )


def test_escalation_resumes_with_the_answer_and_calls_nothing_twice(tmp_path: Path) -> None:
    counter = tmp_path / "deploys"
    with ScriptedModelServer([tool_call("deploy", target="prod")]) as server:
        parked = run_subprocess(write_bundle(_escalating(server, counter), tmp_path))
        assert parked.outcome == "AwaitingReview", parked.stderr
        [item] = parked.result["reviewItems"]
        assert item["timeoutSeconds"] == 600 and item["tool"] == "deploy"
        assert json.loads(item["arguments"]) == {"target": "prod"}
        assert len(server.requests) == 1

        server.push(text("deployed by hand, done"))
        resumed = _resume(
            parked,
            tmp_path,
            {"verdict": "answer", "text": "I deployed it by hand", "decidedBy": "alice"},
        )
    assert resumed.outcome == "Succeeded", resumed.stderr
    assert resumed.result["output"] == "deployed by hand, done"
    # the model was asked once more (the first turn came from the journal), and the tool
    # result it got is the person's answer
    assert len(server.requests) == 2
    assert server.requests[-1].tool_results() == [("I deployed it by hand", False)]
    assert counter.read_text().count("x") == 1, "the failing command must not run again"
    [decided] = resumed.events("review.decided")
    assert (decided["verdict"], decided["decided_by"]) == ("answer", "alice")
    [resume] = resumed.events("run.resume")
    assert resume["review"] == "ship-1" and resume["recorded_effects"] == 1  # the model turn
    assert resumed.result["steps"] == 2, "steps count the whole run"


def test_rejected_escalation_fails_the_run_naming_the_reviewer(tmp_path: Path) -> None:
    counter = tmp_path / "deploys"
    with ScriptedModelServer([tool_call("deploy")]) as server:
        parked = run_subprocess(write_bundle(_escalating(server, counter), tmp_path))
        resumed = _resume(
            parked, tmp_path, {"verdict": "reject", "text": "not today", "decidedBy": "bob"}
        )
    assert resumed.outcome == "Failed"
    assert "rejected (reject by bob: not today)" in resumed.result["message"]


def test_expired_escalation_takes_on_review_timeout(tmp_path: Path) -> None:
    counter = tmp_path / "deploys"
    with ScriptedModelServer([tool_call("deploy")]) as server:
        parked = run_subprocess(write_bundle(_escalating(server, counter), tmp_path))
        resumed = _resume(
            parked,
            tmp_path,
            {"verdict": "timeout", "decidedBy": "system:swarmkit-operator:review-timeout"},
        )
    assert resumed.outcome == "Failed"
    assert "no review decision within 600s" in resumed.result["message"]


def test_strict_skill_call_waits_for_approval_then_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('ran'); print('shipped')"
    pack = {
        "id": "ops",
        "commands": [
            {"name": "ship", "description": "Ship.", "argv": [sys.executable, "-c", code]}
        ],
    }
    with ScriptedModelServer([tool_call("ship")]) as server:
        b = bundle(
            agents=[agent("dev", provider="m", skills=["ship"])],
            skills=[
                skill(
                    "ship",
                    implementation={
                        "type": "command",
                        "pack": "ops",
                        "command": "ship",
                        "permission": "strict",
                    },
                )
            ],
            providers=[openai_provider("m", server.openai_base_url)],
            workspace={"commandPacks": [pack]},
        )
        parked = run_subprocess(write_bundle(b, tmp_path))
        assert parked.outcome == "AwaitingReview", parked.result
        [item] = parked.result["reviewItems"]
        assert item["kind"] == "approval" and "strict" in item["question"]
        assert not marker.exists(), "a strict call must not run before it is approved"

        server.push(text("done"))
        resumed = _resume(parked, tmp_path, {"verdict": "approve", "decidedBy": "carol"})
    assert resumed.outcome == "Succeeded", resumed.result
    assert marker.read_text() == "ran"
    [(content, is_error)] = server.requests[-1].tool_results()
    assert "shipped" in content and not is_error


def test_human_task_request_returns_the_decision(tmp_path: Path) -> None:
    with ScriptedModelServer(
        [tool_call("human_task_request", title="Pick a release name", details="v2 or v3?")]
    ) as server:
        b = bundle(
            agents=[
                agent(
                    "dev",
                    provider="m",
                    tools=["human_task_request"],
                    permissions=["human_task_request"],
                )
            ],
            providers=[openai_provider("m", server.openai_base_url)],
        )
        parked = run_subprocess(write_bundle(b, tmp_path))
        assert parked.outcome == "AwaitingReview", parked.result
        [item] = parked.result["reviewItems"]
        assert (item["kind"], item["question"], item["context"]) == (
            "human_task",
            "Pick a release name",
            "v2 or v3?",
        )
        server.push(text("named it"))
        resumed = _resume(
            parked, tmp_path, {"verdict": "answer", "text": "v3", "decidedBy": "dana"}
        )
    assert resumed.outcome == "Succeeded", resumed.result
    [(content, _)] = server.requests[-1].tool_results()
    got = json.loads(content)
    assert (got["verdict"], got["text"], got["decidedBy"]) == ("answer", "v3", "dana")


def test_secrets_never_reach_the_review_item_or_the_checkpoint(tmp_path: Path) -> None:
    import io

    from swarmkit_api.bundle import secret_env_name
    from swarmkit_runner import reviews
    from swarmkit_runner.audit import AuditLog
    from swarmkit_runner.context import Budget, RunContext
    from swarmkit_runner.journal import Journal
    from swarmkit_runner.paths import RunnerPaths
    from swarmkit_runner.runner import _print_checkpoint
    from swarmkit_runner.secrets import SecretStore
    from tests.support.bundles import secret_ref

    value = "s3cr3t-deploy-token-value"
    ref = secret_ref("deploy", "token")
    secrets = SecretStore({secret_env_name(ref): value})
    secrets.get(ref)  # handed out to a tool: from now on it is scrubbed everywhere
    out = io.StringIO()
    b = bundle(agents=[agent("dev", provider="m")], providers=[openai_provider("m", "http://x")])
    journal = Journal()
    journal.entries["e.0"] = {
        "kind": "tool",
        "value": {"content": f"token={value}", "error": False},
    }
    ctx = RunContext(
        bundle=b,
        paths=RunnerPaths.resolve(scratch=str(tmp_path)),
        audit=AuditLog(b.run.uid, b.run.uid, secrets, sink=out),
        secrets=secrets,
        budget=Budget(10, 1000),
        journal=journal,
    )
    parked = reviews.park(
        ctx, "approval", f"use {value}?", agent="dev", tool="deploy", args={"token": value}
    )
    [item] = parked.items  # type: ignore[union-attr]
    assert value not in (item.arguments or "") and value not in item.question
    assert "[REDACTED]" in (item.arguments or "")
    _print_checkpoint(ctx.audit, secrets, journal, b, item)
    printed = out.getvalue()
    assert value not in printed
    line = next(x for x in printed.splitlines() if x.startswith(CHECKPOINT_LINE_PREFIX))
    saved = Checkpoint.decode(line[len(CHECKPOINT_LINE_PREFIX) :])
    assert saved.entries["e.0"]["value"]["content"] == "token=[REDACTED]"


def test_a_checkpoint_other_than_the_one_the_job_names_is_refused(tmp_path: Path) -> None:
    """The resumed Job carries the sha256 the runner reported when it parked: a checkpoint
    ConfigMap re-created under its name by someone else is never resumed from (issue 46)."""
    from swarmkit_runner.__main__ import load_journal

    ours = Checkpoint(run_uid="u-1", parked_key="e.0.1").encode()
    path = tmp_path / "checkpoint"
    path.write_text(ours + "\n")
    digest = hashlib.sha256(ours.encode()).hexdigest()
    journal = load_journal(str(path), None, "u-1", digest)
    assert journal is not None and journal.resume == 1

    path.write_text(Checkpoint(run_uid="u-1", parked_key="e.9.9").encode())
    with pytest.raises(ValueError, match="is not the one the run reported"):
        load_journal(str(path), None, "u-1", digest)
