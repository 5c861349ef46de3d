"""What the three harness conformance modules share (Claude Code, Codex, Gemini CLI).

Each module runs its pinned, real CLI with exactly the argv, environment and files its
:class:`~swarmkit_runner.harness.base.Harness` builds, laid out as the runner lays them out
(:func:`swarmkit_runner.harness.node.run_harness`: ``work``, ``home`` and ``home/tmp``, the
harness's files with their folders), against the scripted model server behind a per-Run
token and a real MCP server over streamable HTTP behind a bearer (the ``conformance_mcp``
fixture, ``conftest.py``). Here: that run (:func:`round_trip`) and the checks every CLI must
pass the same way; each module keeps its model script, its wire format's checks and what its
CLI does differently.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import secrets
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from swarmkit_api.harness import HARNESSES
from swarmkit_devcluster.harness_clis import ensure_harness_clis, pinned
from swarmkit_runner.harness import harness_for
from swarmkit_runner.harness.base import HarnessInvocation, HarnessOutcome, HarnessToolCall
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer

#: Seconds one CLI run may take on a loaded 2-core machine.
RUN_TIMEOUT = 180
#: What the model asks the echo tool to say, and finds in its answer.
PING = "conformance-ping"
PROMPT = f"Call the echo tool with the text {PING} and tell me what it said."


@functools.cache
def install_dir() -> Path:
    return ensure_harness_clis()


def assert_pinned_version_installed(kind: str, harness_type: type) -> Path:
    """The table's version is the one ``make harness-clis`` pins and installed; the CLI's
    executable, for a module to ask its ``--version``."""
    info = HARNESSES[kind]
    assert pinned()[info.npm_package] == info.version
    manifest = install_dir() / "node_modules" / info.npm_package / "package.json"
    assert json.loads(manifest.read_text())["version"] == info.version
    harness = harness_for(kind)
    assert isinstance(harness, harness_type)
    executable = harness.executable(install_dir())
    assert os.access(executable, os.X_OK)
    return executable


def invocation(
    tmp: Path, model: str, model_url: str, model_token: str, mcp: HttpMcpServer
) -> HarnessInvocation:
    work, home = tmp / "work", tmp / "home"
    for directory in (work, home, home / "tmp"):
        directory.mkdir(parents=True)
    assert mcp.token is not None
    return HarnessInvocation(
        prompt=PROMPT,
        system_prompt="You are a careful assistant.",
        model=model,
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
    kind: str, inv: HarnessInvocation, data_limit: int | None = None
) -> tuple[HarnessOutcome, subprocess.CompletedProcess[str]]:
    """Run the CLI as the runner does (``data_limit``: an ``RLIMIT_DATA``, a memory limit
    as the process node enforces it without a cgroup)."""
    harness = harness_for(kind)
    for path, content in harness.files(inv).items():
        path.parent.mkdir(parents=True, exist_ok=True)
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


@dataclass(frozen=True)
class RoundTrip:
    """One CLI run against the scripted model: what the harness made of it, the process,
    and what the model server saw."""

    inv: HarnessInvocation
    token: str
    model: ScriptedModelServer
    outcome: HarnessOutcome
    done: subprocess.CompletedProcess[str]

    @property
    def detail(self) -> str:
        done = self.done
        return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"


def round_trip(
    kind: str,
    model: str,
    script: Reply | Callable[[RecordedRequest], Reply],
    tmp: Path,
    mcp: HttpMcpServer,
    data_limit: int | None = None,
) -> RoundTrip:
    """The CLI of ``kind`` run once for ``model``, the model server answering ``script``."""
    token = secrets.token_urlsafe(24)
    with ScriptedModelServer(default=script, api_key=token) as server:
        inv = invocation(tmp, model, server.url, token, mcp)
        outcome, done = run_cli(kind, inv, data_limit)
    return RoundTrip(inv, token, server, outcome, done)


def assert_echoed_and_answered(rt: RoundTrip, echo_name: str) -> HarnessToolCall:
    """final-answer and mcp-tools: every event mapped, the run finished with the answer
    after the tool's result, and the one call of the gateway's echo tool (as the harness
    reports it, ``echo_name``) with its arguments; the call, for its result."""
    outcome, detail = rt.outcome, rt.detail
    assert outcome.unmapped == (), detail
    assert outcome.finished and outcome.error_reason is None, detail
    assert rt.done.returncode == 0, detail
    assert outcome.final_text.startswith("The tool said: "), detail
    assert PING in outcome.final_text
    echo = [c for c in outcome.tool_calls if c.name == echo_name]
    assert len(echo) == 1, outcome.tool_calls
    assert echo[0].server == "swarmkit" and echo[0].arguments == {"text": PING}
    return echo[0]


def assert_usage_is_what_was_answered(rt: RoundTrip) -> None:
    """usage: what the harness reports is what the model server answered, every request
    (input counts cache reads too; the server answers 10 in, 5 out)."""
    model, usage = rt.model, rt.outcome.usage
    answered = [r for r in model.requests if not r.problems]
    assert model.refused == [], [r.problems for r in model.refused]
    assert usage.output_tokens == 5 * len(answered)
    assert usage.input_tokens + usage.cache_read_tokens == 10 * len(answered)


def assert_no_token_in_argv_or_transcript(rt: RoundTrip, kind: str) -> None:
    """Neither token is on the command line or in what it printed (the transcript)."""
    argv = " ".join(harness_for(kind).argv(Path("cli"), rt.inv))
    done = rt.done
    for secret in (rt.token, rt.inv.mcp_token):
        assert secret not in argv and secret not in done.stdout and secret not in done.stderr


def offered_tools(rt: RoundTrip, echo_name: str) -> set[str]:
    """The tools the CLI offered the model over the run (the gateway's echo among them)."""
    assert rt.done.returncode == 0, rt.done.stderr[-2000:]
    offered = {name for r in rt.model.requests for name in r.tool_names}
    assert echo_name in offered
    return offered


def assert_refused_ends_failed(rt: RoundTrip, message: str) -> None:
    """A request the model API refuses (a 400, not retried) ends the node failed, the
    API's message in its error."""
    outcome = rt.outcome
    assert rt.model.requests, "the CLI never called the model"
    assert outcome.unmapped == ()
    assert outcome.error_reason == "HarnessFailed", (outcome, rt.done.stdout[-2000:])
    assert message in outcome.error_message
    assert rt.done.returncode != 0
