"""Conformance of the pinned Claude Code CLI: its events still map, its controls still hold.

The real ``claude`` of ``@anthropic-ai/claude-code`` (the version of
``swarmkit_api.harness.HARNESSES``, installed by ``make harness-clis``) runs with exactly the
argv, environment and config files :class:`swarmkit_runner.harness.claude_code.ClaudeCode`
builds, against the scripted model server (Anthropic Messages, streamed) and a real MCP
server over streamable HTTP behind a bearer token (the run and the checks the three CLIs
share: :mod:`.conformance`). Each capability the table lists for claude-code is shown here;
a CLI version whose events no longer map fails (``unmapped``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmkit_api.harness import HARNESSES
from swarmkit_runner.harness.claude_code import ClaudeCode
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, text, tool_call

from .conformance import (
    PING,
    assert_echoed_and_answered,
    assert_pinned_version_installed,
    assert_refused_ends_failed,
    assert_usage_is_what_was_answered,
    offered_tools,
    round_trip,
)

INFO = HARNESSES["claude-code"]
ECHO = "mcp__swarmkit__echo"
MODEL = "claude-sonnet-4-5"


def tool_results(request: RecordedRequest) -> list[str]:
    """The first text of each tool result in the request's last message (Claude Code adds
    its own ``<system-reminder>`` blocks after it)."""
    messages = request.body.get("messages") or []
    content = messages[-1].get("content") if messages else None
    found: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content")
            if isinstance(inner, list):
                found.append(next((str(b.get("text", "")) for b in inner), ""))
            else:
                found.append(str(inner))
    return found


def call_echo_then_finish(request: RecordedRequest) -> Reply:
    """Call the MCP echo tool when offered, then answer with what it returned."""
    results = tool_results(request)
    if results:
        return text(f"The tool said: {results[0]}")
    if ECHO in request.tool_names:
        return tool_call(ECHO, text=PING)
    return text("ok")  # anything else the CLI asks on its own


def test_the_pinned_version_is_the_one_installed() -> None:
    assert_pinned_version_installed(INFO.kind, ClaudeCode)


def test_an_mcp_tool_call_and_the_final_answer_map(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    rt = round_trip(INFO.kind, MODEL, call_echo_then_finish, tmp_path, conformance_mcp)
    # final-answer: the result event's text, nothing left unmapped; mcp-tools: the call.
    echo = assert_echoed_and_answered(rt, ECHO)
    assert PING in echo.result and not echo.is_error
    assert_usage_is_what_was_answered(rt)
    # Every model call went to the proxy URL with the per-Run token, for the Agent's model.
    assert {r.headers.get("x-api-key") for r in rt.model.requests} == {rt.token}
    assert {r.body.get("model") for r in rt.model.requests} == {rt.inv.model}


def test_built_in_tools_are_off_and_only_the_gateway_is_offered(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    rt = round_trip(INFO.kind, MODEL, call_echo_then_finish, tmp_path, conformance_mcp)
    offered = offered_tools(rt, ECHO)
    assert offered == {n for n in offered if n.startswith("mcp__swarmkit__")}, offered


def test_a_refused_request_ends_the_node_failed(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    # A 400 is not retried (a 401 is, ten times over minutes: the proxy ends the node on it
    # instead, see test_claude_code_node.py).
    refused = Reply(
        status=400,
        error_body='{"type": "error", "error": {"type": '
        '"invalid_request_error", "message": "model claude-x is retired"}}',
    )
    rt = round_trip(INFO.kind, MODEL, refused, tmp_path, conformance_mcp)
    assert_refused_ends_failed(rt, "model claude-x is retired")


#: The memory limit of the example Workspace's Run pods (examples/00-workspace.yaml).
POD_MEMORY_MIB = 512


@pytest.mark.parametrize("mib", [POD_MEMORY_MIB, INFO.data_mib])
def test_the_writable_memory_it_maps_is_what_the_table_says(
    tmp_path: Path, conformance_mcp: HttpMcpServer, mib: int
) -> None:
    # The cause of the in-pod abort on the process node: a memory limit enforced as
    # RLIMIT_DATA counts the arenas Bun reserves and never touches. At the table's
    # data_mib the whole tool round trip completes; at the example pods' 512Mi the CLI
    # dies on its own (a Bun abort or segfault), which the runner now refuses up front.
    assert INFO.data_mib is not None
    rt = round_trip(
        INFO.kind,
        MODEL,
        call_echo_then_finish,
        tmp_path,
        conformance_mcp,
        data_limit=mib * 1024 * 1024,
    )
    outcome, done = rt.outcome, rt.done
    if mib == INFO.data_mib:
        assert done.returncode == 0, done.stderr[-2000:]
        assert PING in outcome.final_text and outcome.error_reason is None
    else:
        assert done.returncode in (-6, -11), (done.returncode, done.stderr[-2000:])
        assert outcome.error_reason is not None
