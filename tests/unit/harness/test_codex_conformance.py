"""Conformance of the pinned Codex CLI: its events still map, its controls still hold.

The real ``codex`` of ``@openai/codex`` (the version of ``swarmkit_api.harness.HARNESSES``,
installed by ``make harness-clis``) runs with exactly the argv, environment and config
:class:`swarmkit_runner.harness.codex.Codex` builds, against the scripted model server (the
OpenAI Responses API, streamed, every body checked against the openai SDK's request types)
and a real MCP server over streamable HTTP behind a bearer token. Codex 0.169 defers MCP
tools: the scripted model first runs Codex's ``tool_search``, then calls the tool it loaded
(``mcp__swarmkit.echo``), then answers. Each capability the table lists for codex is shown
here; a CLI version whose events no longer map fails (``unmapped``).
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.harness import HARNESSES
from swarmkit_devcluster.harness_clis import ensure_harness_clis, pinned
from swarmkit_runner.harness import harness_for
from swarmkit_runner.harness.base import HarnessInvocation, HarnessOutcome
from swarmkit_runner.harness.codex import Codex
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call

INFO = HARNESSES["codex"]
ECHO = "mcp__swarmkit.echo"  # namespace mcp__swarmkit, tool echo (after tool_search)
#: Seconds one CLI run may take on a loaded 2-core machine.
RUN_TIMEOUT = 180


@functools.cache
def install_dir() -> Path:
    return ensure_harness_clis()


def search_call_then_finish(request: RecordedRequest) -> Reply:
    """Find the echo tool, call it once, then answer with what it returned."""
    results = request.tool_results()
    if results:
        return text(f"The tool said: {results[0][0]}")
    if ECHO in request.tool_names:
        return tool_call(ECHO, text="conformance-ping")
    if "tool_search" in request.tool_names:
        return tool_call("tool_search", query="echo text")
    return text("no tool found")


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
        model="gpt-5.5",
        work_dir=work,
        home_dir=home,
        skills_dir=None,
        mcp_url=mcp.url,
        mcp_token=mcp.token,
        model_proxy_url=model_url,
        model_token=model_token,
        max_turns=5,
    )


def run_cli(inv: HarnessInvocation) -> tuple[HarnessOutcome, subprocess.CompletedProcess[str]]:
    harness = harness_for("codex")
    for path, content in harness.files(inv).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    (inv.home_dir / "tmp").mkdir(exist_ok=True)
    done = subprocess.run(
        harness.argv(harness.executable(install_dir()), inv),
        cwd=inv.work_dir,
        env=harness.env(inv),
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
    assert isinstance(harness_for("codex"), Codex)
    executable = harness_for("codex").executable(install_dir())
    assert os.access(executable, os.X_OK)
    version = subprocess.run([executable, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.split() == ["codex-cli", INFO.version]


def test_an_mcp_tool_call_and_the_final_answer_map(
    tmp_path: Path, mcp_server: HttpMcpServer
) -> None:
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=search_call_then_finish, api_key=token) as model:
        inv = invocation(tmp_path, model.url, token, mcp_server)
        outcome, done = run_cli(inv)
    detail = f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    # final-answer: the last agent_message, every event and item type known.
    assert outcome.unmapped == (), detail
    assert outcome.finished and outcome.error_reason is None, detail
    assert done.returncode == 0, detail
    assert outcome.final_text.startswith("The tool said: "), detail
    assert "conformance-ping" in outcome.final_text
    # mcp-tools: the call to the gateway's tool and its result, as the harness reports it.
    echo = [c for c in outcome.tool_calls if c.name == "mcp__swarmkit__echo"]
    assert len(echo) == 1, outcome.tool_calls
    assert echo[0].server == "swarmkit" and echo[0].arguments == {"text": "conformance-ping"}
    assert echo[0].result == "conformance-ping" and not echo[0].is_error
    # usage: what the harness reports is what the model server answered, every request.
    assert model.refused == [], [r.problems for r in model.refused]
    assert outcome.usage.output_tokens == 5 * len(model.requests)
    assert outcome.usage.input_tokens + outcome.usage.cache_read_tokens == 10 * len(model.requests)
    # Neither token is on the command line or in what it printed (the transcript).
    argv = " ".join(harness_for(INFO.kind).argv(Path("cli"), inv))
    for secret in (token, inv.mcp_token):
        assert secret not in argv and secret not in done.stdout and secret not in done.stderr
    # Every model call went to the proxy URL with the per-Run token, for the Agent's model,
    # over the Responses API.
    assert {r.path for r in model.requests} == {"/v1/responses"}
    assert {r.headers.get("authorization") for r in model.requests} == {f"Bearer {token}"}
    assert {r.body.get("model") for r in model.requests} == {inv.model}


def test_built_in_tools_are_off_and_only_the_gateway_is_reachable(
    tmp_path: Path, mcp_server: HttpMcpServer
) -> None:
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=search_call_then_finish, api_key=token) as model:
        _, done = run_cli(invocation(tmp_path, model.url, token, mcp_server))
    assert done.returncode == 0, done.stderr[-2000:]
    offered = {name for r in model.requests for name in r.tool_names}
    assert ECHO in offered
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
    kinds = {t.get("type") for r in model.requests for t in r.body.get("tools") or []}
    assert kinds <= {"function", "custom", "tool_search", "namespace"}, kinds


def test_a_refused_request_ends_the_node_failed(tmp_path: Path, mcp_server: HttpMcpServer) -> None:
    refused = Reply(
        status=400,
        error_body='{"error": {"type": "invalid_request_error", "code": "model_not_found", '
        '"message": "model gpt-x is retired"}}',
    )
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=refused, api_key=token) as model:
        outcome, done = run_cli(invocation(tmp_path, model.url, token, mcp_server))
    assert model.requests, "the CLI never called the model"
    assert outcome.unmapped == ()
    assert outcome.error_reason == "HarnessFailed", (outcome, done.stdout[-2000:])
    assert "model gpt-x is retired" in outcome.error_message
    assert done.returncode != 0


def test_a_question_never_waits_for_a_person(tmp_path: Path, mcp_server: HttpMcpServer) -> None:
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

    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=ask_then_finish, api_key=token) as model:
        outcome, done = run_cli(invocation(tmp_path, model.url, token, mcp_server))
    assert "request_user_input" in model.requests[0].tool_names
    assert outcome.unmapped == () and outcome.question is None, done.stdout[-2000:]
    assert outcome.error_reason is None and done.returncode == 0
    assert outcome.final_text == "Asked, got: request_user_input is unavailable in Default mode"
