"""Command packs: argv templates (never a shell), validated inputs, effects, output parsing,
``requires`` checked at start-up, timeouts and output caps; pack:<id> grants reads only."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.bundles import agent, bundle, openai_provider, skill, write_bundle
from tests.support.model_server import ScriptedModelServer, text, tool_call, tool_calls
from tests.support.runner import run_in_process, run_subprocess

PY = sys.executable


def pack(**extra: Any) -> dict[str, Any]:
    return {
        "id": "tools",
        "description": "Small helpers.",
        "requires": [PY],
        "commands": [
            {
                "name": "say",
                "description": "Print the words.",
                "argv": [
                    PY,
                    "-c",
                    "import json, sys; print(json.dumps(sys.argv[1:]))",
                    "--",
                    "{words}",
                ],
                "inputs": {
                    "type": "object",
                    "properties": {"words": {"type": "array", "items": {"type": "string"}}},
                    "required": ["words"],
                },
                "effects": "read",
                "output": "json",
                **extra,
            },
            {
                "name": "lines",
                "description": "Count to n.",
                "argv": [
                    PY,
                    "-c",
                    "import sys; [print(i) for i in range(int(sys.argv[1]))]",
                    "{n}",
                ],
                "inputs": {
                    "type": "object",
                    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 100}},
                    "required": ["n"],
                },
                "effects": "read",
                "output": "lines",
            },
            {
                "name": "grep",
                "description": "Search for a pattern.",
                "argv": [PY, "-c", "import sys; print(sys.argv[1])", "{pattern}"],
                "inputs": {"type": "object", "properties": {"pattern": {"type": "string"}}},
                "effects": "read",
            },
            {
                "name": "sleep",
                "description": "Sleep.",
                "argv": [PY, "-c", "import time; time.sleep(60)"],
                "effects": "read",
                "timeoutSeconds": 1,
            },
            {
                "name": "flood",
                "description": "Print a lot.",
                "argv": [PY, "-c", "print('x' * 1000000)"],
                "effects": "read",
                "maxOutputBytes": 1000,
            },
            {
                "name": "write-file",
                "description": "Write a file in the work dir.",
                "argv": [PY, "-c", "open('out.txt', 'w').write('written')"],
            },
        ],
    }


async def test_pack_grant_offers_read_commands_run_as_literal_argv(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_calls(
            ("tools.say", {"words": ["a; rm -rf /", "$(whoami)", "*"]}),
            ("tools.lines", {"n": 3}),
            ("tools.lines", {"n": "three"}),
            ("tools.grep", {"pattern": "--help"}),
            ("tools.sleep", {}),
            ("tools.flood", {}),
            ("tools.write-file", {}),
        ),
        text("done"),
    )
    reads = [f"tools/{n}" for n in ("say", "lines", "grep", "sleep", "flood")]
    b = bundle(
        agents=[agent("ops", provider="m", skills=["pack:tools"], commands=reads)],
        providers=[openai_provider("m", model_server.openai_base_url)],
        workspace={"commandPacks": [pack()]},
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    offered = model_server.requests[0].tool_names
    assert offered == ["tools_say", "tools_lines", "tools_grep", "tools_sleep", "tools_flood"]
    say, lines, bad, grep, sleep, flood, write = model_server.requests[1].tool_results()
    # no shell: metacharacters arrive literally, one argv element per list item
    assert json.loads(say[0])["output"] == ["--", "a; rm -rf /", "$(whoami)", "*"]
    assert json.loads(lines[0])["output"] == ["0", "1", "2"]
    assert bad[1] and "InvalidArguments: n: 'three' is not of type 'integer'" in bad[0]
    assert grep[1] and "starts with '-' and would be read as an option" in grep[0]
    assert sleep[1] and "CommandTimedOut" in sleep[0]
    assert not flood[1] and json.loads(flood[0])["truncated"] is True
    assert len(json.loads(flood[0])["output"]) <= 1000
    assert write[1] and "ToolNotGranted" in write[0]  # a write command is never a pack grant
    runs = out.events("command.run")
    assert [r["command"] for r in runs] == ["say", "lines", "sleep", "flood"]
    assert runs[0]["argv"][-3:] == ["a; rm -rf /", "$(whoami)", "*"]
    assert all(r["effects"] == "read" for r in runs)


async def test_command_skill_runs_write_commands_under_its_tier(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("write-note"),
        tool_call("write-note-readonly"),
        tool_call("file_io", operation="read", path="out.txt"),
        text("done"),
    )
    b = bundle(
        agents=[
            agent(
                "ops",
                provider="m",
                skills=["write-note", "write-note-readonly"],
                native={"fileIo": True},
            )
        ],
        skills=[
            skill(
                "write-note",
                implementation={"type": "command", "pack": "tools", "command": "write-file"},
            ),
            skill(
                "write-note-readonly",
                implementation={
                    "type": "command",
                    "pack": "tools",
                    "command": "write-file",
                    "permission": "readonly",
                    "effects": "read",  # a claim the command's own effects override
                },
            ),
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
        workspace={"commandPacks": [pack()]},
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    ok = model_server.requests[1].tool_results()[0]
    assert not ok[1] and json.loads(ok[0])["exit_code"] == 0
    refused = model_server.requests[2].tool_results()[0]
    assert refused[1] and "ReadOnlyTier" in refused[0] and "effects are write" in refused[0]
    assert model_server.requests[3].tool_results()[0] == ("written", False)
    [r] = out.events("tool.refused")
    assert (r["tool"], r["reason"], r["tier"], r["effects"]) == (
        "write-note-readonly",
        "ReadOnlyTier",
        "readonly",
        "write",
    )


def test_missing_required_binary_is_a_clear_startup_error(tmp_path: Path) -> None:
    missing = pack()
    missing["requires"] = [PY, "definitely-not-installed-tool"]
    b = bundle(
        agents=[
            agent(
                "ops",
                provider=None,
                skills=["pack:tools"],
                commands=["tools/say"],
                replay=[{"text": "hi"}],
            )
        ],
        workspace={"commandPacks": [missing]},
    )
    out = run_subprocess(write_bundle(b, tmp_path))
    assert out.exit_code == 2
    assert out.result["outcome"] == "ValidationFailed"
    assert out.result["message"] == (
        "command pack tools requires 'definitely-not-installed-tool', which is not installed "
        "in the runtime image (not on PATH); add it to the image or remove the pack"
    )
