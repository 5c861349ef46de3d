"""schedule, agent_message and mailbox_send: effects in the run's outbox, real runner processes.

The runner never talks to the API: each call is validated against the bundle, recorded in
the outbox, and printed on one stdout line whose sha256 is in the result. A run that parks
and resumes neither repeats nor renumbers an effect.
"""

from __future__ import annotations

import hashlib
import io
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.effects import OUTBOX_LINE_PREFIX, Effect, outbox_from_log
from swarmkit_api.review import CHECKPOINT_LINE_PREFIX, Checkpoint, ResumeDecision
from swarmkit_runner.audit import AuditLog
from swarmkit_runner.context import Budget, RunContext
from swarmkit_runner.effects import HANDLERS
from swarmkit_runner.errors import ToolError
from swarmkit_runner.paths import RunnerPaths
from swarmkit_runner.secrets import SecretStore
from tests.support.bundles import (
    agent,
    bundle,
    openai_provider,
    skill,
    topology,
    write_bundle,
)
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_subprocess

WORKSPACE = {"mailboxes": [{"name": "ops", "description": "on-call"}]}


def _bundle(server: ScriptedModelServer, **kw: Any) -> Any:
    return bundle(
        agents=[
            agent(
                "lead",
                provider="m",
                tools=["schedule", "agent_message", "mailbox_send"],
                permissions=["schedule"],
            ),
            agent("worker", provider="m"),
        ],
        topology=topology("triage", "lead", {"w": ("worker", "lead")}),
        providers=[openai_provider("m", server.openai_base_url)],
        workspace=WORKSPACE,
        **kw,
    )


def _outbox(out: RunOutput) -> list[Effect]:
    sha = out.result.get("outboxSha256")
    assert sha, f"no outbox in the result: {out.result}"
    effects = outbox_from_log(out.stdout, sha)
    assert effects is not None, "the outbox line must match the sha256 in the result"
    return effects


def _errors(server: ScriptedModelServer) -> list[str]:
    return [c for r in server.requests[1:] for c, err in r.tool_results() if err]


def test_the_three_tools_record_effects_in_the_outbox(tmp_path: Path) -> None:
    with ScriptedModelServer(
        [
            tool_call("schedule", input="check again", **{"in": "2m"}),
            tool_call("agent_message", to="worker", message="please look at ticket 7"),
            tool_call("mailbox_send", to="ops", message="ticket 7 needs a human"),
            text("done"),
        ]
    ) as server:
        before = datetime.now(UTC)
        out = run_subprocess(write_bundle(_bundle(server), tmp_path))
    assert out.outcome == "Succeeded", out.stderr
    assert _errors(server) == []
    effects = _outbox(out)
    assert [(e.seq, e.kind, e.agent, e.to) for e in effects] == [
        (0, "schedule", "lead", "triage"),
        (1, "agent_message", "lead", "worker"),
        (2, "mailbox_send", "lead", "ops"),
    ]
    assert effects[0].message == "check again"
    assert effects[0].start_after is not None
    delay = (effects[0].start_after - before).total_seconds()
    assert 110 <= delay <= 130
    assert effects[2].message == "ticket 7 needs a human"
    recorded = out.events("effect.recorded")
    assert [e["tool"] for e in recorded] == ["schedule", "agent_message", "mailbox_send"]
    # The tool result names what will exist (the scheduled Run, by its stable name).
    first = server.requests[1].tool_results()[0][0]
    assert '"status": "recorded"' in first and "test-run-00000000-fx0" in first


def test_bad_input_is_a_clear_tool_error(tmp_path: Path) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with ScriptedModelServer(
        [
            tool_call("schedule", input="x", at=past),
            tool_call("schedule", input="x", **{"in": "30d"}),
            tool_call("schedule", input="x", **{"in": "soon"}),
            tool_call("schedule", input="x", at="2030-01-01T09:00:00"),
            tool_call("schedule", input="x", topology="elsewhere", **{"in": "1m"}),
            tool_call("agent_message", to="stranger", message="hi"),
            tool_call("agent_message", to="lead", message="note to self"),
            tool_call("mailbox_send", to="finance", message="hi"),
            tool_call("mailbox_send", to="ops", message="x" * 101),
            text("gave up"),
        ]
    ) as server:
        out = run_subprocess(
            write_bundle(_bundle(server, governance={"maxMessageBytes": 100}), tmp_path)
        )
    assert out.outcome == "Succeeded", out.stderr
    errors = _errors(server)
    assert len(errors) == 9, errors
    assert "ScheduleOutOfWindow" in errors[0] and "is in the past" in errors[0]
    assert "beyond the window" in errors[1] and "scheduleMaxDelaySeconds" in errors[1]
    assert "'soon' is not a duration" in errors[2]
    assert "has no UTC offset" in errors[3]
    assert "topology 'elsewhere' is not one this run may run" in errors[4]
    assert "agent 'stranger' is not reachable from agent 'lead'" in errors[5]
    assert "agent 'lead' cannot message itself" in errors[6]
    assert "mailbox 'finance' is not declared by Workspace default (declared: ops)" in errors[7]
    assert "MessageTooLarge" in errors[8] and "101 bytes" in errors[8]
    assert "outboxSha256" not in out.result
    assert not [ln for ln in out.stdout.splitlines() if ln.startswith(OUTBOX_LINE_PREFIX)]


def test_max_effects_per_run_bounds_the_outbox(tmp_path: Path) -> None:
    calls = [tool_call("mailbox_send", to="ops", message=f"m{i}") for i in range(3)]
    with ScriptedModelServer([*calls, text("done")]) as server:
        out = run_subprocess(
            write_bundle(_bundle(server, governance={"maxEffectsPerRun": 2}), tmp_path)
        )
    assert [e.message for e in _outbox(out)] == ["m0", "m1"]
    [error] = _errors(server)
    assert "LimitExceeded" in error and "maxEffectsPerRun (2)" in error
    [limit] = out.events("limit.exceeded")
    assert limit["limit"] == "maxEffectsPerRun"


def _escalating_pack(counter: Path) -> dict[str, Any]:
    code = f"import sys; open({str(counter)!r}, 'a').write('x'); sys.exit('locked')"
    return {
        "id": "ops",
        "commands": [{"name": "deploy", "description": "D.", "argv": [sys.executable, "-c", code]}],
    }


def test_a_resumed_run_neither_repeats_nor_renumbers_an_effect(tmp_path: Path) -> None:
    counter = tmp_path / "deploys"
    with ScriptedModelServer(
        [
            tool_call("mailbox_send", to="ops", message="before the review"),
            tool_call("deploy"),
        ]
    ) as server:
        b = bundle(
            agents=[agent("dev", provider="m", skills=["deploy"], tools=["mailbox_send"])],
            skills=[
                skill(
                    "deploy",
                    implementation={"type": "command", "pack": "ops", "command": "deploy"},
                    constraints={"onFailure": "escalate_to_human"},
                )
            ],
            providers=[openai_provider("m", server.openai_base_url)],
            workspace={**WORKSPACE, "commandPacks": [_escalating_pack(counter)]},
        )
        parked = run_subprocess(write_bundle(b, tmp_path))
        assert parked.outcome == "AwaitingReview", parked.stderr
        assert [(e.seq, e.message) for e in _outbox(parked)] == [(0, "before the review")]

        [line] = [ln for ln in parked.stdout.splitlines() if ln.startswith(CHECKPOINT_LINE_PREFIX)]
        encoded = line[len(CHECKPOINT_LINE_PREFIX) :]
        assert hashlib.sha256(encoded.encode()).hexdigest() == parked.result["checkpointSha256"]
        saved = Checkpoint.decode(encoded)
        (tmp_path / "checkpoint").write_text(encoded)
        decision = ResumeDecision(
            review="r-1",
            key=saved.parked_key,
            kind="escalation",
            verdict="answer",
            text="deployed by hand",
            decided_by="alice",
        )
        (tmp_path / "decision.json").write_text(decision.model_dump_json())
        server.push(tool_call("mailbox_send", to="ops", message="after the review"), text("ok"))
        assert parked.layout is not None
        args = [*parked.layout.cli_args(), "--checkpoint", str(tmp_path / "checkpoint")]
        args += ["--decision", str(tmp_path / "decision.json")]
        resumed = run_subprocess(parked.layout, args=args)
    assert resumed.outcome == "Succeeded", resumed.stderr
    # Only the new effect, numbered after the one recorded before the run parked.
    assert [(e.seq, e.message) for e in _outbox(resumed)] == [(1, "after the review")]
    assert [e["seq"] for e in resumed.events("effect.recorded")] == [1]


async def test_without_a_run_the_tools_answer_not_available(tmp_path: Path) -> None:
    # An MCP gateway session (can_park False) or a served topology has no outbox.
    b = bundle(agents=[agent("solo", provider="m")], workspace=WORKSPACE)
    secrets = SecretStore({})
    ctx = RunContext(
        bundle=b,
        paths=RunnerPaths.resolve(scratch=str(tmp_path)),
        audit=AuditLog(b.run.uid, b.run.uid, secrets, sink=io.StringIO()),
        secrets=secrets,
        budget=Budget(10, 1000),
        can_park=False,
    )
    send = HANDLERS["mailbox_send"][0](ctx, b.agents["solo"])
    with pytest.raises(ToolError) as exc:
        await send({"to": "ops", "message": "hi"})
    assert exc.value.code == "NotAvailable" and "needs a Run" in exc.value.message
    assert ctx.journal.outbox == []
