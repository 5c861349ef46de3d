"""Conformance of the pinned Codex CLI: its events still map, its controls still hold.

The real ``codex`` of ``@openai/codex`` (the version of ``swarmkit_api.harness.HARNESSES``,
installed by ``make harness-clis``) runs with exactly the argv, environment and config
:class:`swarmkit_runner.harness.codex.Codex` builds, against the scripted model server (the
OpenAI Responses API, streamed, every body checked against the openai SDK's request types)
and a real MCP server over streamable HTTP behind a bearer token (the run and the checks
the three CLIs share: :mod:`.conformance`). Codex 0.169 defers MCP tools: the scripted
model first runs Codex's ``tool_search``, then calls the tool it loaded
(``mcp__swarmkit.echo``), then answers. Each capability the table lists for codex is shown
here; a CLI version whose events no longer map fails (``unmapped``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from swarmkit_api.harness import HARNESSES
from swarmkit_runner.harness.codex import Codex
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

INFO = HARNESSES["codex"]
ECHO = "mcp__swarmkit.echo"  # namespace mcp__swarmkit, tool echo (after tool_search)
MODEL = "gpt-5.5"


def search_call_then_finish(request: RecordedRequest) -> Reply:
    """Find the echo tool, call it once, then answer with what it returned."""
    results = request.tool_results()
    if results:
        return text(f"The tool said: {results[0][0]}")
    if ECHO in request.tool_names:
        return tool_call(ECHO, text=PING)
    if "tool_search" in request.tool_names:
        return tool_call("tool_search", query="echo text")
    return text("no tool found")


def test_the_pinned_version_is_the_one_installed() -> None:
    executable = assert_pinned_version_installed(INFO.kind, Codex)
    version = subprocess.run([executable, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.split() == ["codex-cli", INFO.version]


def test_an_mcp_tool_call_and_the_final_answer_map(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    rt = round_trip(INFO.kind, MODEL, search_call_then_finish, tmp_path, conformance_mcp)
    # final-answer: the last agent_message, every event and item type known; mcp-tools:
    # the call, reported under the gateway's server and the tool's own name.
    echo = assert_echoed_and_answered(rt, "mcp__swarmkit__echo")
    assert echo.result == PING and not echo.is_error
    assert_usage_is_what_was_answered(rt)
    assert_no_token_in_argv_or_transcript(rt, INFO.kind)
    # Every model call went to the proxy URL with the per-Run token, for the Agent's model,
    # over the Responses API.
    requests = rt.model.requests
    assert {r.path for r in requests} == {"/v1/responses"}
    assert {r.headers.get("authorization") for r in requests} == {f"Bearer {rt.token}"}
    assert {r.body.get("model") for r in requests} == {rt.inv.model}


def test_built_in_tools_are_off_and_only_the_gateway_is_reachable(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    rt = round_trip(INFO.kind, MODEL, search_call_then_finish, tmp_path, conformance_mcp)
    offered = offered_tools(rt, ECHO)
    # No shell, image, web search, sub-agents or goals: the MCP resource readers (the same
    # gateway), tool search, the gateway's tools, and apply_patch, which 0.169.1 offers
    # whatever its config says for a model whose catalog entry has a patch tool (the
    # read-only sandbox is what refuses its writes; no native-file-write capability).
    builtins = {n for n in offered if not n.startswith("mcp__swarmkit.")}
    assert builtins <= {
        "apply_patch",
        "tool_search",
        "list_mcp_resources",
        "list_mcp_resource_templates",
        "read_mcp_resource",
        "request_user_input",
    }, builtins
    kinds = {t.get("type") for r in rt.model.requests for t in r.body.get("tools") or []}
    assert kinds <= {"function", "custom", "tool_search", "namespace"}, kinds


def test_a_refused_request_ends_the_node_failed(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    refused = Reply(
        status=400,
        error_body='{"error": {"type": "invalid_request_error", "code": "model_not_found", '
        '"message": "model gpt-x is retired"}}',
    )
    rt = round_trip(INFO.kind, MODEL, refused, tmp_path, conformance_mcp)
    assert_refused_ends_failed(rt, "model gpt-x is retired")


def test_a_question_never_waits_for_a_person(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    """``codex exec`` offers ``request_user_input`` but refuses it outside Plan mode: the
    model gets the refusal as the tool's output and goes on. (A version that asked instead
    would print ``request_user_input``, which ends the node ``HarnessAskedQuestion``.)"""
    question = {
        "id": "branch",
        "header": "Branch",
        "question": "Which branch?",
        "options": [
            {"label": "main", "description": "the main branch"},
            {"label": "dev", "description": "the dev branch"},
        ],
    }

    def ask_then_finish(request: RecordedRequest) -> Reply:
        results = request.tool_results()
        if results:
            return text(f"Asked, got: {results[0][0]}")
        return tool_call("request_user_input", questions=[question])

    rt = round_trip(INFO.kind, MODEL, ask_then_finish, tmp_path, conformance_mcp)
    outcome, done = rt.outcome, rt.done
    assert "request_user_input" in rt.model.requests[0].tool_names
    assert outcome.unmapped == () and outcome.question is None, done.stdout[-2000:]
    assert outcome.error_reason is None and done.returncode == 0
    assert outcome.final_text == "Asked, got: request_user_input is unavailable in Default mode"
