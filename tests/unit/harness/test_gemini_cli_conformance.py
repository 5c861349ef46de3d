"""Conformance of the pinned Gemini CLI: its events still map, its controls still hold.

The real ``gemini`` of ``@google/gemini-cli`` (the version of
``swarmkit_api.harness.HARNESSES``, installed by ``make harness-clis``) runs with exactly the
argv, environment and settings :class:`swarmkit_runner.harness.gemini_cli.GeminiCli` builds,
against the scripted model server (the Gemini API, ``:streamGenerateContent?alt=sse``, every
body checked against the google-genai SDK's types) and a real MCP server over streamable
HTTP behind a bearer token (the run and the checks the three CLIs share:
:mod:`.conformance`). Each capability the table lists for gemini-cli is shown here; a CLI
version whose events no longer map fails (``unmapped``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from swarmkit_api.harness import HARNESSES
from swarmkit_runner.harness.gemini_cli import GeminiCli
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, text, tool_call

from .conformance import (
    PING,
    assert_echoed_and_answered,
    assert_no_token_in_argv_or_transcript,
    assert_pinned_version_installed,
    assert_refused_ends_failed,
    assert_usage_is_what_was_answered,
    offered_tools,
    round_trip,
)

INFO = HARNESSES["gemini-cli"]
ECHO = "mcp_swarmkit_echo"
MODEL = "gemini-2.5-flash"


def call_then_finish(request: RecordedRequest) -> Reply:
    """Call the echo tool once, then answer with what it returned."""
    results = request.tool_results()
    if results:
        return text(f"The tool said: {results[0][0]}")
    if ECHO in request.tool_names:
        return tool_call(ECHO, text=PING)
    return text("no tool found")


def test_the_pinned_version_is_the_one_installed() -> None:
    executable = assert_pinned_version_installed(INFO.kind, GeminiCli)
    version = subprocess.run([executable, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.split() == [INFO.version]


def test_an_mcp_tool_call_and_the_final_answer_map(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    rt = round_trip(INFO.kind, MODEL, call_then_finish, tmp_path, conformance_mcp)
    # final-answer: what it said after its last tool call, every event type known;
    # mcp-tools: the call.
    echo = assert_echoed_and_answered(rt, ECHO)
    assert echo.result == PING and not echo.is_error
    assert_usage_is_what_was_answered(rt)
    assert_no_token_in_argv_or_transcript(rt, INFO.kind)
    # Every model call went to the proxy URL with the per-Run token, for the Agent's model,
    # streamed.
    requests = rt.model.requests
    paths = {r.path for r in requests}
    assert paths == {f"/v1beta/models/{rt.inv.model}:streamGenerateContent"}, paths
    assert {r.query.get("alt") for r in requests} == {"sse"}
    assert {r.headers.get("x-goog-api-key") for r in requests} == {rt.token}


def test_built_in_tools_are_off_and_only_the_gateway_is_reachable(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    rt = round_trip(INFO.kind, MODEL, call_then_finish, tmp_path, conformance_mcp)
    offered = offered_tools(rt, ECHO)
    # No file, shell, web, memory, planning or sub-agent tool: only the gateway's tools.
    assert offered == {n for n in offered if n.startswith("mcp_swarmkit_")}, offered


def test_a_refused_request_ends_the_node_failed(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    refused = Reply(
        status=400,
        error_body='{"error": {"code": 400, "status": "INVALID_ARGUMENT", '
        '"message": "model gemini-x is retired"}}',
    )
    rt = round_trip(INFO.kind, MODEL, refused, tmp_path, conformance_mcp)
    assert_refused_ends_failed(rt, "model gemini-x is retired")
