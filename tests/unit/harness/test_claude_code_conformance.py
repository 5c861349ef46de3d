"""Conformance of the pinned Claude Code CLI: its events still map, its controls still hold.

The real ``claude`` of ``@anthropic-ai/claude-code`` (the version of
``swarmkit_api.harness.HARNESSES``, installed by ``make harness-clis``) runs with exactly the
argv, environment and config files :class:`swarmkit_runner.harness.claude_code.ClaudeCode`
builds, against the scripted model server (Anthropic Messages, streamed) and a real MCP
server over streamable HTTP behind a bearer token. Each capability the table lists for
claude-code is shown here; a CLI version whose events no longer map fails (``unmapped``).
"""

from __future__ import annotations

import functools
import json
import os
import resource
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.harness import HARNESSES
from swarmkit_devcluster.harness_clis import ensure_harness_clis, pinned
from swarmkit_runner.harness import harness_for
from swarmkit_runner.harness.base import HarnessInvocation, HarnessOutcome
from swarmkit_runner.harness.claude_code import ClaudeCode
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call

INFO = HARNESSES["claude-code"]
ECHO = "mcp__swarmkit__echo"
#: Seconds one CLI run may take on a loaded 2-core machine.
RUN_TIMEOUT = 180


@functools.cache
def install_dir() -> Path:
    return ensure_harness_clis()


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
        return tool_call(ECHO, text="conformance-ping")
    return text("ok")  # anything else the CLI asks on its own


def invocation(
    tmp: Path, model_url: str, model_token: str, mcp: HttpMcpServer
) -> HarnessInvocation:
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    home.mkdir()
    assert mcp.token is not None
    return HarnessInvocation(
        prompt="Call the echo tool with the text conformance-ping and tell me what it said.",
        system_prompt="You are a careful assistant.",
        model="claude-sonnet-4-5",
        work_dir=work,
        home_dir=home,
        skills_dir=None,
        mcp_url=mcp.url,
        mcp_token=mcp.token,
        model_proxy_url=model_url,
        model_token=model_token,
        max_turns=5,
    )


def run_cli(
    inv: HarnessInvocation, data_limit: int | None = None
) -> tuple[HarnessOutcome, subprocess.CompletedProcess[str]]:
    """Run the CLI as the runner does (``data_limit``: an ``RLIMIT_DATA``, a memory limit
    as the process node enforces it without a cgroup)."""
    harness = harness_for("claude-code")
    for path, content in harness.files(inv).items():
        path.write_text(content)

    def limit() -> None:
        if data_limit is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))

    done = subprocess.run(
        harness.argv(harness.executable(install_dir()), inv),
        cwd=inv.work_dir,
        env=harness.env(inv),
        preexec_fn=limit,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return harness.parse_events(done.stdout.splitlines()), done


@pytest.fixture(scope="module")
def mcp_server() -> Any:
    with HttpMcpServer("conformance", token=secrets.token_urlsafe(24)) as server:
        yield server


def test_the_pinned_version_is_the_one_installed() -> None:
    assert pinned()[INFO.npm_package] == INFO.version
    manifest = install_dir() / "node_modules" / INFO.npm_package / "package.json"
    assert json.loads(manifest.read_text())["version"] == INFO.version
    assert isinstance(harness_for("claude-code"), ClaudeCode)
    assert os.access(harness_for("claude-code").executable(install_dir()), os.X_OK)


def test_an_mcp_tool_call_and_the_final_answer_map(
    tmp_path: Path, mcp_server: HttpMcpServer
) -> None:
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=call_echo_then_finish, api_key=token) as model:
        inv = invocation(tmp_path, model.url, token, mcp_server)
        outcome, done = run_cli(inv)
    detail = f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    # final-answer: the result event's text, nothing left unmapped.
    assert outcome.unmapped == (), detail
    assert outcome.finished and outcome.error_reason is None, detail
    assert done.returncode == 0, detail
    assert outcome.final_text.startswith("The tool said: ")
    assert "conformance-ping" in outcome.final_text
    # mcp-tools: the call to the gateway's tool and its result, as the harness reports it.
    echo = [c for c in outcome.tool_calls if c.name == ECHO]
    assert len(echo) == 1, outcome.tool_calls
    assert echo[0].server == "swarmkit" and echo[0].arguments == {"text": "conformance-ping"}
    assert "conformance-ping" in echo[0].result and not echo[0].is_error
    # usage: what the harness reports is what the model server answered (input counts
    # cache reads and writes too).
    answered = [r for r in model.requests if not r.problems]
    assert model.refused == [], [r.problems for r in model.refused]
    assert outcome.usage.output_tokens == 5 * len(answered)
    assert outcome.usage.input_tokens + outcome.usage.cache_read_tokens == 10 * len(answered)
    # Every model call went to the proxy URL with the per-Run token, for the Agent's model.
    assert {r.headers.get("x-api-key") for r in model.requests} == {token}
    assert {r.body.get("model") for r in model.requests} == {inv.model}


def test_built_in_tools_are_off_and_only_the_gateway_is_offered(
    tmp_path: Path, mcp_server: HttpMcpServer
) -> None:
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=call_echo_then_finish, api_key=token) as model:
        _outcome, done = run_cli(invocation(tmp_path, model.url, token, mcp_server))
    assert done.returncode == 0, done.stderr[-2000:]
    offered = {name for r in model.requests for name in r.tool_names}
    assert ECHO in offered
    assert offered == {n for n in offered if n.startswith("mcp__swarmkit__")}, offered


def test_a_refused_request_ends_the_node_failed(tmp_path: Path, mcp_server: HttpMcpServer) -> None:
    # A 400 is not retried (a 401 is, ten times over minutes: the proxy ends the node on it
    # instead, see test_claude_code_node.py).
    refused = Reply(
        status=400,
        error_body='{"type": "error", "error": {"type": '
        '"invalid_request_error", "message": "model claude-x is retired"}}',
    )
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=refused, api_key=token) as model:
        outcome, done = run_cli(invocation(tmp_path, model.url, token, mcp_server))
    assert model.requests, "the CLI never called the model"
    assert outcome.unmapped == ()
    assert outcome.error_reason == "HarnessFailed", (outcome, done.stdout[-2000:])
    assert "model claude-x is retired" in outcome.error_message
    assert done.returncode != 0


#: The memory limit of the example Workspace's Run pods (examples/00-workspace.yaml).
POD_MEMORY_MIB = 512


@pytest.mark.parametrize("mib", [POD_MEMORY_MIB, INFO.data_mib])
def test_the_writable_memory_it_maps_is_what_the_table_says(
    tmp_path: Path, mcp_server: HttpMcpServer, mib: int
) -> None:
    # The cause of the in-pod abort on the process node: a memory limit enforced as
    # RLIMIT_DATA counts the arenas Bun reserves and never touches. At the table's
    # data_mib the whole tool round trip completes; at the example pods' 512Mi the CLI
    # dies on its own (a Bun abort or segfault), which the runner now refuses up front.
    assert INFO.data_mib is not None
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=call_echo_then_finish, api_key=token) as model:
        inv = invocation(tmp_path, model.url, token, mcp_server)
        outcome, done = run_cli(inv, data_limit=mib * 1024 * 1024)
    if mib == INFO.data_mib:
        assert done.returncode == 0, done.stderr[-2000:]
        assert "conformance-ping" in outcome.final_text and outcome.error_reason is None
    else:
        assert done.returncode in (-6, -11), (done.returncode, done.stderr[-2000:])
        assert outcome.error_reason is not None
