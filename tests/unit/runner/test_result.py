"""What ends up in the termination message and in audit lines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from swarmkit_api.bundle import MAX_RESULT_BYTES, TRUNCATION_MARKER, RunResult
from swarmkit_api.run import AgentSkillUsage, SkillFileRead, SkillScriptRuns
from swarmkit_runner.audit import AuditLog, redact
from swarmkit_runner.catalog import Handler, ToolCatalog, ToolEntry
from swarmkit_runner.providers import ToolCall
from tests.support.bundles import agent, bundle, openai_provider, write_bundle
from tests.support.model_server import ScriptedModelServer, text
from tests.support.runner import run_subprocess


def test_long_output_is_capped_with_the_marker(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("é" * 5000))  # 10 000 bytes of UTF-8
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url)],
        governance={"maxOutputBytes": 1000},
    )
    out = run_subprocess(write_bundle(b, tmp_path))

    assert out.exit_code == 0
    assert out.result["outputTruncated"] is True
    assert out.result["output"].endswith(TRUNCATION_MARKER)
    assert len(out.result["output"].encode()) <= 1000
    assert len(out.layout.termination_log.read_bytes()) <= MAX_RESULT_BYTES  # type: ignore[union-attr]


def test_redact_paths_with_wildcards() -> None:
    record = {
        "input": {"user": "ann", "password": "p"},
        "output": {"items": [{"token": "a", "id": 1}, {"token": "b", "id": 2}]},
    }
    redacted = redact(record, ["input.password", "output.items.*.token", "input.missing.x"])
    assert redacted == {
        "input": {"user": "ann", "password": "[REDACTED]"},
        "output": {"items": [{"token": "[REDACTED]", "id": 1}, {"token": "[REDACTED]", "id": 2}]},
    }
    assert record["input"]["password"] == "p"  # the original is untouched


def answering(value: str) -> Handler:
    async def handler(args: dict[str, Any]) -> str:
        return value

    return handler


async def test_wire_names_are_provider_safe_and_unique() -> None:
    catalog = ToolCatalog("a", AuditLog("run", "run", sink=io.StringIO()))
    schema = {"type": "object"}
    catalog.add(ToolEntry("pg.list_tables", "d", schema, "mcp", answering("mcp")))
    catalog.add(ToolEntry("pg_list_tables", "d", schema, "http", answering("http")))

    assert [d.name for d in catalog.defs()] == ["pg_list_tables", "pg_list_tables_2"]
    by_wire = (await catalog.call(ToolCall("1", "pg_list_tables", {}))).content
    by_name = (await catalog.call(ToolCall("2", "pg.list_tables", {}))).content
    other = (await catalog.call(ToolCall("3", "pg_list_tables_2", {}))).content
    assert (by_wire, by_name, other) == ("mcp", "mcp", "http")


def test_audit_lines_are_json_with_timing_and_outcome(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("ok"))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = run_subprocess(write_bundle(b, tmp_path))
    [call] = out.events("model.call")
    assert call["agent"] == "solo" and call["outcome"] == "ok"
    assert isinstance(call["duration_ms"], float)
    assert call["ts"].endswith("Z")
    end = out.events("run.end")[0]
    assert json.loads(json.dumps(end))["steps"] == 1


def _usage(agent: str, skills: int) -> AgentSkillUsage:
    names = [f"skill-{agent}-{i:03d}" for i in range(skills)]
    return AgentSkillUsage(
        agent=agent,
        loaded=names,
        loads=len(names),
        files_read=[SkillFileRead(skill=n, path="reference/guide.md") for n in names],
        file_reads=len(names),
        scripts=[SkillScriptRuns(skill=n, path="scripts/x.py", runs=2, failures=1) for n in names],
        script_runs=2 * len(names),
        script_failures=len(names),
    )


def test_skill_usage_fits_whole_when_there_is_room() -> None:
    result = RunResult(outcome="Succeeded", output="short", skills=[_usage("a", 3)])
    assert json.loads(result.to_termination_message())["skills"][0]["loaded"] == [
        "skill-a-000",
        "skill-a-001",
        "skill-a-002",
    ]


def test_skill_usage_is_summarised_before_the_output_is_cut() -> None:
    result = RunResult(outcome="Succeeded", output="x" * 1500, skills=[_usage("a", 40)])
    text = result.to_termination_message()
    assert len(text.encode()) <= MAX_RESULT_BYTES
    doc = json.loads(text)
    assert doc["output"] == "x" * 1500  # the output survives whole
    [usage] = doc["skills"]
    assert usage["truncated"] is True
    assert usage["loaded"] == ["skill-a-000", "skill-a-001", "skill-a-002"]
    assert len(usage["filesRead"]) == 3 and len(usage["scripts"]) == 3
    # Counts stay exact.
    assert (usage["loads"], usage["fileReads"], usage["scriptRuns"], usage["scriptFailures"]) == (
        40,
        40,
        80,
        40,
    )


def test_many_agents_and_a_long_output_still_fit_in_4_kib() -> None:
    result = RunResult(
        outcome="Succeeded",
        output="é" * 5000,
        skills=[_usage(f"agent-{i:02d}", 10) for i in range(30)],
    )
    text = result.to_termination_message()
    assert len(text.encode()) <= MAX_RESULT_BYTES
    doc = json.loads(text)
    assert doc["outputTruncated"] is True
    assert doc["skills"], "some skill usage is kept"
    assert all(a["loads"] == 10 for a in doc["skills"])
