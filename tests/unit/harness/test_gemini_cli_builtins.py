"""Why Gemini CLI's built-in tools stay refused: the pinned CLI's hook does not fail closed.

Issue 40 asks that a harness's own built-ins be switched on only as far as the Agent's
permission allows, each use asked of the runner's decision point, failing closed (Claude
Code: a use its ``PreToolUse`` hook did not allow is denied by ``dontAsk``; Codex likewise).
The real pinned ``gemini`` (the version of ``swarmkit_api.harness.HARNESSES``) runs here with
the argv, environment and settings :class:`~swarmkit_runner.harness.gemini_cli.GeminiCli`
builds, plus what a wiring would add (a ``--policy`` file, a ``BeforeTool`` command hook),
against the scripted model server, the model asking for ``write_file``:

* what can be switched on and off holds: a policy ``allow`` rule runs a granted
  ``write_file`` without ``--approval-mode yolo``, and in yolo mode a policy ``deny`` of
  every tool removes the built-ins ``tools.exclude`` cannot name;
* a hook that answers ``decision: block`` (or exits 2 saying why) blocks the write;
* but every way a hook can fail lets the write run: the CLI's own timeout, a hook killed by
  a signal, an exit 1, an exit 2 without a word, output that is not JSON. No allow/deny
  layer behind the hook would deny a use the hook never allowed (a policy ``allow`` is what
  lets the tool run at all), so gemini-cli lists no ``tool-hook`` and admission refuses
  ``builtinTools`` for it. When a pinned version fails closed, these tests fail: wire it.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.harness import HARNESSES
from swarmkit_runner.harness.gemini_cli import NATIVE_TOOLS, OTHER_TOOLS, GeminiCli
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call

from .conformance import RUN_TIMEOUT, install_dir, invocation
from .test_gemini_cli_conformance import MODEL

MARK = "written-by-gemini"
#: A policy rule that lets the granted write run without asking (headless: no one to ask).
ALLOW_WRITE = '[[rule]]\ntoolName = "write_file"\ndecision = "allow"\npriority = 500\n'
#: Every tool denied but the gateway's and the granted write (user tier beats the defaults).
DENY_ALL_BUT_GRANTED = (
    '[[rule]]\ntoolName = "*"\ndecision = "deny"\npriority = 100\n\n'
    '[[rule]]\nmcpName = "swarmkit"\ntoolName = "*"\ndecision = "allow"\npriority = 500\n\n'
    + ALLOW_WRITE
)
#: Built-ins 0.61.0 offers in yolo mode that ``tools.exclude`` does not name.
BACKGROUND = {"list_background_processes", "read_background_output"}
#: What a wrapping shell prints when the hook program fails.
WRAPPER_BLOCK = '{"decision": "block", "reason": "the hook failed"}'
#: Milliseconds the CLI waits for the hook here (its default: 60 000).
HOOK_TIMEOUT_MS = 2000


@dataclass(frozen=True)
class Run:
    offered: set[str]
    written: bool
    write_results: list[str]
    seconds: float
    done: subprocess.CompletedProcess[str]


def gemini(
    tmp: Path,
    mcp: HttpMcpServer,
    *,
    mode: str = "default",
    policy: str = ALLOW_WRITE,
    hook: str | None = None,
) -> Run:
    """One run of the pinned CLI whose model asks for ``write_file`` once; ``tools.exclude``
    names every built-in but ``write_file``."""
    target = tmp / "work" / "notes.txt"

    def reply(request: RecordedRequest) -> Reply:
        results = request.tool_results()
        if results:
            return text(f"Tool said: {results[0][0]}")
        if "write_file" in request.tool_names:
            return tool_call("write_file", file_path=str(target), content=MARK)
        return text("write_file was not offered")

    harness, token = GeminiCli(), secrets.token_urlsafe(24)
    with ScriptedModelServer(default=reply, api_key=token) as model:
        inv = invocation(tmp, MODEL, model.url, token, mcp)
        files = harness.files(inv)
        settings: dict[str, Any] = json.loads(files[harness.settings_path(inv)])
        every = (*NATIVE_TOOLS.every, *OTHER_TOOLS)
        settings["tools"]["exclude"] = [t for t in every if t != "write_file"]
        if hook is not None:
            entry = {"type": "command", "command": hook, "timeout": HOOK_TIMEOUT_MS}
            settings["hooks"] = {"BeforeTool": [{"matcher": ".*", "hooks": [entry]}]}
            settings["hooksConfig"] = {"enabled": True}
        files[harness.settings_path(inv)] = json.dumps(settings)
        files[inv.home_dir / "policy.toml"] = policy
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        argv = harness.argv(harness.executable(install_dir()), inv)
        argv[argv.index("--approval-mode") + 1] = mode
        argv += ["--policy", str(inv.home_dir / "policy.toml")]
        started = time.monotonic()
        done = subprocess.run(
            argv,
            cwd=inv.work_dir,
            env=harness.env(inv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        seconds = time.monotonic() - started
    outcome = harness.parse_events(done.stdout.splitlines())
    assert done.returncode == 0 and outcome.unmapped == (), done.stderr[-2000:]
    return Run(
        offered={n for r in model.requests for n in r.tool_names},
        written=target.exists(),
        write_results=[c.result for c in outcome.tool_calls if c.name == "write_file"],
        seconds=seconds,
        done=done,
    )


def gateway_only(offered: set[str]) -> set[str]:
    return {n for n in offered if not n.startswith("mcp_swarmkit_")}


def test_a_policy_switches_on_exactly_the_granted_built_ins_without_yolo(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    run = gemini(tmp_path / "default", conformance_mcp)
    assert gateway_only(run.offered) == {"write_file"}, run.offered
    assert run.written, "a policy allow rule runs the granted write in default mode"
    # yolo mode offers built-ins tools.exclude cannot name; a policy deny of '*' removes them.
    yolo = gemini(tmp_path / "yolo", conformance_mcp, mode="yolo", policy="")
    assert yolo.offered >= BACKGROUND, yolo.offered
    denied = gemini(tmp_path / "denied", conformance_mcp, mode="yolo", policy=DENY_ALL_BUT_GRANTED)
    assert gateway_only(denied.offered) == {"write_file"}, denied.offered


@pytest.mark.parametrize(
    ("hook", "said"),
    [
        ("""echo '{"decision": "block", "reason": "the hook says no"}'""", "the hook says no"),
        ("echo the hook says no >&2; exit 2", "the hook says no"),
        # A wrapper turns its program's death into a block; the wrapper's own death is not.
        (f"sh -c 'kill -9 $$' || {{ echo '{WRAPPER_BLOCK}'; exit 2; }}", "the hook failed"),
    ],
    ids=["decision-block", "exit-2-with-reason", "wrapped-program-killed"],
)
def test_a_hook_that_answers_blocks_the_write(
    tmp_path: Path, conformance_mcp: HttpMcpServer, hook: str, said: str
) -> None:
    run = gemini(tmp_path, conformance_mcp, hook=hook)
    assert not run.written
    assert run.write_results == [f"Tool execution blocked: {said}"], run.write_results


@pytest.mark.parametrize(
    "hook",
    [
        "exec sleep 90",  # killed at its timeout (SIGTERM), no decision
        "kill -9 $$",  # killed by a signal (the OOM killer's), no output
        "echo the hook crashed >&2; exit 1",  # an uncaught error's exit status
        "exit 2",  # the blocking status, but nothing said
        "echo not json",  # output that is not a decision
    ],
    ids=["timed-out", "killed", "exit-1", "exit-2-silent", "not-json"],
)
def test_a_hook_that_fails_lets_the_write_run(
    tmp_path: Path, conformance_mcp: HttpMcpServer, hook: str
) -> None:
    run = gemini(tmp_path, conformance_mcp, hook=hook)
    # The hook's `timeout` is honoured (the run ends long before the 90 s sleep)...
    assert run.seconds < 60, run.seconds
    # ...and a failed hook is no decision: the tool runs. This is why built-ins are refused.
    assert run.written, (run.write_results, run.done.stderr[-2000:])
    info = HARNESSES["gemini-cli"]
    assert "tool-hook" not in info.capabilities, (
        "gemini-cli lists tool-hook but its BeforeTool hook fails open"
    )
