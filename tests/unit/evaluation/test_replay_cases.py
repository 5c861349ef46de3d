"""Replay mode, the operator's side (issue 39): a Run's recording is kept in its status once
per stage (bounded), a case built from a recorded Run carries it, and the case Run replays
it (``spec.replay`` with ``spec.readOnly``, into the bundle the runner reads).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from swarmkit_api.bundle import RunResult
from swarmkit_api.eval import EvalCase, EvalRunSpec, RecordedRunSelector
from swarmkit_api.replay import (
    MAX_RECORDED_BYTES,
    RecordedCall,
    recording_line,
)
from swarmkit_api.run import RunSpec
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator import k8s
from swarmkit_operator.builders import bundle as bundles
from swarmkit_operator.builders import eval_runs as er
from swarmkit_operator.builders.recording import recording_fields
from swarmkit_operator.runs import recording
from swarmkit_operator.runs import status as run_status

SEND = RecordedCall(
    agent="triage",
    tool="mailbox_send",
    arguments={"mailbox": "ops", "message": "refund issued"},
    content="queued message 0 for mailbox ops",
)


def test_a_stage_is_merged_once_and_stages_append() -> None:
    first = recording_fields({}, "sha-1", [SEND])
    assert first == {"recordedStages": ["sha-1"], "recording": [SEND.wire()]}
    assert recording_fields(first, "sha-1", [SEND]) == {}  # the same stage again: nothing
    other = SEND.model_copy(update={"content": "queued message 1 for mailbox ops"})
    second = recording_fields(first, "sha-2", [other])
    assert second["recording"] == [SEND.wire(), other.wire()]
    assert second["recordedStages"] == ["sha-1", "sha-2"]


def test_a_recording_past_its_limit_or_lost_is_incomplete_never_cut() -> None:
    big = SEND.model_copy(update={"content": "x" * MAX_RECORDED_BYTES})
    fields = recording_fields({"recording": [SEND.wire()]}, "sha-2", [big])
    assert fields == {"recordedStages": ["sha-2"], "recordingIncomplete": True}
    assert recording_fields({}, "sha-3", None)["recordingIncomplete"] is True


def test_settle_keeps_the_recording_of_the_line_its_result_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    line, sha = recording_line([SEND])
    forged, _ = recording_line([SEND.model_copy(update={"content": "forged"})])
    logs = "\n".join(['{"event": "run.end"}', forged, line])
    written: list[dict[str, Any]] = []

    async def read_pod_log(_ns: str, pod: str, _container: str) -> str:
        assert pod == "pod-1"
        return logs

    async def write_fields(_st: Any, _run: Any, fields: dict[str, Any]) -> None:
        written.append(fields)

    monkeypatch.setattr(k8s, "read_pod_log", read_pod_log)
    monkeypatch.setattr(run_status, "write_fields", write_fields)
    run: Any = SimpleNamespace(namespace="ns", name="r", status={})
    verdict: Any = SimpleNamespace(
        result=RunResult(outcome="Succeeded", recording_sha256=sha), pod_name="pod-1"
    )
    asyncio.run(recording.settle(None, run, verdict))  # type: ignore[arg-type]
    assert written == [{"recordedStages": [sha], "recording": [SEND.wire()]}]
    run.status = written[0]
    asyncio.run(recording.settle(None, run, verdict))  # type: ignore[arg-type]
    assert len(written) == 1  # merged already: no second read or write


def summary(name: str, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {"team": "pay"},
        "creationTimestamp": "2026-12-01T00:00:00Z",
        "spec": {"input": f"input of {name}"},
        "status": {
            "output": f"answer of {name}",
            "conditions": [{"type": "Succeeded", "status": "True"}],
            **status,
        },
    }


def test_a_recorded_case_carries_the_runs_recording_into_its_case_runs() -> None:
    selector = RecordedRunSelector.model_validate({"matchLabels": {"team": "pay"}})
    runs = [
        summary("wrote", {"recording": [SEND.wire()]}),
        summary("older", {}),  # recorded before recordings: nothing to answer with
    ]
    by_name = {c.name: c for c in er.recorded_cases(selector, runs)}
    assert by_name["run-wrote"].replay == [SEND]
    assert by_name["run-older"].replay == []
    spec = EvalRunSpec.model_validate(
        {"evalSetRef": {"name": "s"}, "candidate": {"agentRef": {"name": "triage"}}}
    )
    case = by_name["run-wrote"]
    target = {"agentRef": {"name": "triage"}}
    run = er.case_run("ns", "e1", "u", spec, "case", "candidate", case.name, 0, target, "x",
                      replay=case.replay)  # fmt: skip
    assert run["spec"]["readOnly"] is True
    assert run["spec"]["replay"] == [SEND.wire()]
    assert RunSpec.model_validate(run["spec"]).replay == [SEND]  # admitted as it is
    # Without a recording (an inline case), no replay: read-only as before.
    plain = er.case_run("ns", "e1", "u", spec, "case", "candidate", "c", 0, target, "x",
                        read_only=True)  # fmt: skip
    assert "replay" not in plain["spec"] and plain["spec"]["readOnly"] is True


def test_another_recording_is_another_cache_key() -> None:
    grader = {"type": "contains", "expected": "refund"}
    case = EvalCase.model_validate({"name": "c", "input": "x", "grader": grader})
    target = er.SideTarget("Agent", "triage", "aaaaaaaaaaaa")
    plain = er.cache_key(case, target, 1)
    replayed = er.cache_key(case.model_copy(update={"replay": [SEND]}), target, 1)
    other = SEND.model_copy(update={"content": "mailbox ops is full"})
    another = er.cache_key(case.model_copy(update={"replay": [other]}), target, 1)
    assert len({plain, replayed, another}) == 3


def test_the_bundle_carries_the_runs_recording_to_the_runner() -> None:
    spec = RunSpec.model_validate(
        {"agentRef": {"name": "a"}, "readOnly": True, "replay": [SEND.wire()]}
    )
    ws = WorkspaceSpec()
    info = bundles._run_info(
        bundles.RunInput("r", "ns", "u", spec), ws, bundles.effective_governance(ws)
    )
    assert (info.read_only, info.replay) == (True, [SEND])
    with pytest.raises(ValueError, match="replay needs readOnly"):
        RunSpec.model_validate({"agentRef": {"name": "a"}, "replay": [SEND.wire()]})
