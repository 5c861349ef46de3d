"""Runner start-up: heavy libraries are imported only by the runs that need them.

Every Run is a fresh ``python -m swarmkit_runner`` process, so what it imports before the
first model request is start-up time a user waits for (the runner cold start of
``make bench-runner`` on docs/performance/index.md). The real runner subprocess runs with
``-X importtime``; its stderr names every module the process imported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.bundles import (
    agent,
    bundle,
    mcp_tool_skill,
    openai_provider,
    replay_provider,
    skill,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import ScriptedModelServer, text
from tests.support.runner import runner_env

HEAVY = ("mcp", "anyio", "httpx", "httpx2", "jsonschema")
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def _guides(count: int) -> list[Any]:
    return [
        skill(f"guide-{i}", f"Use when area {i} comes up.", instructions=f"# Guide {i}\n\nStep.")
        for i in range(count)
    ]


def _run_with_importtime(b: Any, tmp_path: Path) -> tuple[dict[str, Any], set[str]]:
    """Run ``b`` as the Job does (plus ``-X importtime``); its result and top-level imports."""
    layout = write_bundle(b, tmp_path)
    argv = [sys.executable, "-X", "importtime", "-m", "swarmkit_runner", "run"]
    proc = subprocess.run(
        [*argv, *layout.cli_args()], env=runner_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = set()
    for line in proc.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            modules.add(match.group(1).split(".")[0])
    assert "swarmkit_runner" in modules  # the output really is the import log
    result = json.loads(layout.termination_log.read_text(encoding="utf-8"))
    return result, modules


def test_replay_run_with_20_skills_imports_no_mcp_http_or_jsonschema(tmp_path: Path) -> None:
    guides = _guides(20)
    b = bundle(
        agents=[
            agent("solo", provider="r", skills=[g.name for g in guides], replay=[{"text": "ok"}])
        ],
        skills=guides,
        providers=[replay_provider("r")],
    )
    result, modules = _run_with_importtime(b, tmp_path)

    assert result["outcome"] == "Succeeded"
    assert result["output"] == "ok"
    assert sorted(m for m in HEAVY if m in modules) == []


def test_http_model_provider_imports_httpx_but_not_mcp_or_jsonschema(tmp_path: Path) -> None:
    with ScriptedModelServer([text("done")]) as server:
        b = bundle(
            agents=[agent("solo", provider="m")],
            providers=[openai_provider("m", server.openai_base_url)],
        )
        result, modules = _run_with_importtime(b, tmp_path)

    assert result["outcome"] == "Succeeded"
    assert "httpx" in modules
    assert sorted(m for m in ("mcp", "httpx2", "jsonschema") if m in modules) == []
    # Nor httpx's command-line client (click, rich, pygments: ~50-90 ms), which httpx's own
    # __init__ imports whenever click is installed (swarmkit_runner/__init__.py).
    assert sorted(m for m in ("click", "rich", "pygments") if m in modules) == []


def test_output_schema_imports_jsonschema_only_then(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    b = bundle(
        agents=[agent("solo", provider="r", replay=[{"text": '{"n": 3}'}], outputSchema=schema)],
        providers=[replay_provider("r")],
    )
    result, modules = _run_with_importtime(b, tmp_path)

    assert result["outcome"] == "Succeeded"
    assert json.loads(result["output"]) == {"n": 3}
    assert "jsonschema" in modules
    assert sorted(m for m in ("mcp", "anyio", "httpx") if m in modules) == []


@pytest.mark.timeout(120)
def test_a_run_with_an_mcp_server_imports_the_sdk(tmp_path: Path) -> None:
    tool = mcp_tool_skill("echo-skill", "local", "echo")
    b = bundle(
        agents=[
            agent(
                "solo",
                provider="r",
                skills=[tool.name],
                replay=[
                    {"toolCalls": [{"name": tool.name, "arguments": {"text": "hi"}}]},
                    {"text": "echoed"},
                ],
            )
        ],
        skills=[tool],
        providers=[replay_provider("r")],
        mcp_servers=[stdio_server("local", stdio_command("imports-stdio"))],
    )
    result, modules = _run_with_importtime(b, tmp_path)

    assert result["outcome"] == "Succeeded"
    assert result["toolCalls"] == 1
    assert {"mcp", "anyio"} <= modules
