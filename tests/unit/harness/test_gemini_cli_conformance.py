"""Conformance of the pinned Gemini CLI: its events still map, its controls still hold.

The real ``gemini`` of ``@google/gemini-cli`` (the version of
``swarmkit_api.harness.HARNESSES``, installed by ``make harness-clis``) runs with exactly the
argv, environment and settings :class:`swarmkit_runner.harness.gemini_cli.GeminiCli` builds,
against the scripted model server (the Gemini API, ``:streamGenerateContent?alt=sse``, every
body checked against the google-genai SDK's types) and a real MCP server over streamable
HTTP behind a bearer token. Each capability the table lists for gemini-cli is shown here; a
CLI version whose events no longer map fails (``unmapped``).
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
from swarmkit_runner.harness.gemini_cli import GeminiCli
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call

INFO = HARNESSES["gemini-cli"]
ECHO = "mcp_swarmkit_echo"
#: Seconds one CLI run may take on a loaded 2-core machine.
RUN_TIMEOUT = 180


@functools.cache
def install_dir() -> Path:
    return ensure_harness_clis()


def call_then_finish(request: RecordedRequest) -> Reply:
    """Call the echo tool once, then answer with what it returned."""
    results = request.tool_results()
    if results:
        return text(f"The tool said: {results[0][0]}")
    if ECHO in request.tool_names:
        return tool_call(ECHO, text="conformance-ping")
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
        model="gemini-2.5-flash",
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
    harness = harness_for("gemini-cli")
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
    assert isinstance(harness_for("gemini-cli"), GeminiCli)
    executable = harness_for("gemini-cli").executable(install_dir())
    assert os.access(executable, os.X_OK)
    version = subprocess.run([executable, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.split() == [INFO.version]


def test_an_mcp_tool_call_and_the_final_answer_map(
    tmp_path: Path, mcp_server: HttpMcpServer
) -> None:
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=call_then_finish, api_key=token) as model:
        inv = invocation(tmp_path, model.url, token, mcp_server)
        outcome, done = run_cli(inv)
    detail = f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    # final-answer: what it said after its last tool call, every event type known.
    assert outcome.unmapped == (), detail
    assert outcome.finished and outcome.error_reason is None, detail
    assert done.returncode == 0, detail
    assert outcome.final_text.startswith("The tool said: "), detail
    assert "conformance-ping" in outcome.final_text
    # mcp-tools: the call to the gateway's tool and its result, as the harness reports it.
    echo = [c for c in outcome.tool_calls if c.name == ECHO]
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
    # streamed.
    paths = {r.path for r in model.requests}
    assert paths == {f"/v1beta/models/{inv.model}:streamGenerateContent"}, paths
    assert {r.query.get("alt") for r in model.requests} == {"sse"}
    assert {r.headers.get("x-goog-api-key") for r in model.requests} == {token}


def test_built_in_tools_are_off_and_only_the_gateway_is_reachable(
    tmp_path: Path, mcp_server: HttpMcpServer
) -> None:
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=call_then_finish, api_key=token) as model:
        _, done = run_cli(invocation(tmp_path, model.url, token, mcp_server))
    assert done.returncode == 0, done.stderr[-2000:]
    offered = {name for r in model.requests for name in r.tool_names}
    assert ECHO in offered
    # No file, shell, web, memory, planning or sub-agent tool: only the gateway's tools.
    assert offered == {n for n in offered if n.startswith("mcp_swarmkit_")}, offered


def test_a_refused_request_ends_the_node_failed(tmp_path: Path, mcp_server: HttpMcpServer) -> None:
    refused = Reply(
        status=400,
        error_body='{"error": {"code": 400, "status": "INVALID_ARGUMENT", '
        '"message": "model gemini-x is retired"}}',
    )
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=refused, api_key=token) as model:
        outcome, done = run_cli(invocation(tmp_path, model.url, token, mcp_server))
    assert model.requests, "the CLI never called the model"
    assert outcome.unmapped == ()
    assert outcome.error_reason == "HarnessFailed", (outcome, done.stdout[-2000:])
    assert "model gemini-x is retired" in outcome.error_message
    assert done.returncode != 0
