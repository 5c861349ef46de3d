"""Replay mode in the runner (issue 39): a Run replaying a recorded one answers every call
above the read tier from the recording and never runs it; a call it has no answer for is
refused, never executed. A live run records those calls (with what they returned, secret
values scrubbed) on one stdout line whose sha256 its result carries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarmkit_api.bundle import RunInfo
from swarmkit_api.replay import NOT_RECORDED, RecordedCall, recording_from_log
from swarmkit_api.skill import AuditPolicy
from swarmkit_runner import replay
from tests.support.bundles import agent, bundle, openai_provider, write_bundle
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_in_process

WRITE = {"operation": "write", "path": "notes/a.txt", "content": "written"}
SECRET = "s3cr3t-value-that-is-long-enough"


async def _run(
    tmp_path: Path,
    model_server: ScriptedModelServer,
    calls: list[dict[str, Any]],
    recording: list[RecordedCall] | None = None,
    environ: dict[str, str] | None = None,
) -> RunOutput:
    model_server.push(*(tool_call("file_io", **c) for c in calls), text("done"))
    b = bundle(
        agents=[agent("solo", provider="m", native={"file_io": True})],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    if recording is not None:
        run = b.run.model_copy(update={"read_only": True, "replay": recording})
        b = b.model_copy(update={"run": run})
    layout = write_bundle(b, tmp_path)
    return await run_in_process(b, layout, environ)


def _written(out: RunOutput) -> Path:
    assert out.layout is not None
    return out.layout.scratch / "work" / "notes" / "a.txt"


async def test_a_live_run_records_its_calls_above_the_read_tier(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    out = await _run(tmp_path, model_server, [WRITE])
    assert out.outcome == "Succeeded" and _written(out).read_text() == "written"
    sha = out.result["recordingSha256"]
    recorded = recording_from_log(out.stdout, sha)
    assert recorded is not None
    [call] = recorded
    assert (call.agent, call.tool, call.arguments, call.error) == ("solo", "file_io", WRITE, False)
    [(content, _)] = model_server.requests[1].tool_results()
    assert call.content == content  # what the model was answered
    assert recording_from_log(out.stdout, "0" * 64) is None  # only the line of that sha256


async def test_a_secret_value_never_lands_in_the_recording(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    write = {**WRITE, "content": f"token={SECRET}"}
    out = await _run(tmp_path, model_server, [write], environ={"SWARMKIT_SECRET_API_TOKEN": SECRET})
    assert SECRET not in out.stdout
    recorded = recording_from_log(out.stdout, out.result["recordingSha256"])
    assert recorded is not None and SECRET not in recorded[0].arguments["content"]


async def test_a_replayed_call_gets_the_recorded_answer_and_runs_nothing(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    answer = RecordedCall(agent="solo", tool="file_io", arguments=WRITE, content="wrote 7 bytes")
    out = await _run(tmp_path, model_server, [WRITE], [answer])
    assert out.outcome == "Succeeded"
    assert not _written(out).exists()  # the write never ran
    [(content, is_error)] = model_server.requests[1].tool_results()
    assert (content, is_error) == ("wrote 7 bytes", False)
    [replayed] = out.events("tool.replayed")
    assert (replayed["tool"], replayed["outcome"]) == ("file_io", "replayed")
    assert out.tool_calls("file_io") == [] and out.events("tool.refused") == []
    assert "recordingSha256" not in out.result  # nothing above the read tier ran


async def test_a_call_the_recording_has_no_answer_for_is_refused_never_run(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    """Other arguments than recorded, then one call more than recorded: refused."""
    answer = RecordedCall(agent="solo", tool="file_io", arguments=WRITE, content="ok")
    other = {**WRITE, "path": "notes/b.txt"}
    out = await _run(tmp_path, model_server, [other, WRITE, WRITE], [answer])
    assert out.outcome == "Succeeded"
    assert out.layout is not None and not (out.layout.scratch / "work" / "notes").exists()
    results = [r for req in model_server.requests[1:] for r in req.tool_results()[-1:]]
    assert results[1] == ("ok", False)
    for content, is_error in (results[0], results[2]):
        assert is_error and f"{NOT_RECORDED}: agent solo replays" in content, content
    refused = out.events("tool.refused")
    assert [r["reason"] for r in refused] == [NOT_RECORDED, NOT_RECORDED]


async def test_a_recorded_error_is_replayed_as_an_error(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    answer = RecordedCall(
        agent="solo", tool="file_io", arguments=WRITE, content="ToolError: disk full", error=True
    )
    out = await _run(tmp_path, model_server, [WRITE], [answer])
    [(content, is_error)] = model_server.requests[1].tool_results()
    assert is_error and content.endswith("ToolError: disk full"), content
    assert not _written(out).exists()


def test_the_same_call_twice_gets_its_answers_in_recorded_order() -> None:
    args = {"to": "ops", "message": "hi"}
    calls = [
        RecordedCall(agent="a", tool="mailbox_send", arguments=args, content=f"sent {i}")
        for i in range(2)
    ]
    played = replay.Replay(calls)
    assert played.take("mailbox_send", {**args, "message": "ho"}) is None  # other arguments
    assert played.take("agent_message", args) is None  # another tool
    # Any agent's call (the candidate may be another Agent), in the recorded order.
    assert [played.take("mailbox_send", dict(args)) for _ in range(3)] == [*calls, None]


async def test_a_call_its_audit_policy_keeps_out_of_the_logs_is_not_recorded() -> None:
    """The recording is printed and kept like the audit: a skill whose audit policy keeps
    its inputs or outputs (or part of them) out of the logs is not recorded (a replay of
    the Run refuses that call)."""
    recorder = replay.Recorder()
    run = RunInfo(name="r", namespace="n", uid="u", correlation_id="u", timeout_seconds=60)
    policies = (
        None,
        AuditPolicy(),
        AuditPolicy(log_outputs=False),
        AuditPolicy(log_inputs=False),
        AuditPolicy(redact=["input.password"]),
    )

    async def work() -> None:
        for policy in policies:
            replay.record("a", "pg.insert", "mcp", None, policy, {"row": 1}, "ok", False)
        # A delegation is not recorded: the child's own calls are.
        replay.record("a", "delegate_to_w", "delegate", None, None, {"task": "x"}, "ok", False)

    await replay.run_as(run, recorder, work())
    assert [c.tool for c in recorder.calls] == ["pg.insert", "pg.insert"]
