"""Built-in harness tools asked of the runner's decision point: the pinned CLIs' hooks.

Part one is the hook's conformance (the capabilities ``tool-hook`` and ``native-*`` of
``swarmkit_api.harness.HARNESSES``): the real pinned ``claude`` (and ``codex``) runs with
exactly the argv, environment and config files its harness module builds with built-ins
switched on, against the scripted model server; the model asks for a built-in (Claude
Code's ``Write``; Codex's ``exec_command`` or ``apply_patch``); the real hook command
(:mod:`swarmkit_runner.harness.hook_cli`) asks a decision point (here a recording HTTP
server answering a fixed decision). A deny must hold (nothing written, the reason reaches
the model) and an allow must let the tool run (Claude Code under ``--permission-mode
dontAsk``, Codex in its ``workspace-write`` sandbox).

Part two is the whole node in the runner (``python -m swarmkit_runner run``, a real process,
the real CLI): the decision point is the runner's governance (:mod:`.hooks`), so the
node's ``builtinToolsPermission`` tier decides, each use is audited, and a ``strict`` tier
parks the Run for a Review.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.bundle import BundleTopology, secret_env_name
from swarmkit_api.model_provider import ModelProvider
from swarmkit_api.topology import TopologySpec
from swarmkit_runner.harness import harness_for
from swarmkit_runner.harness.base import HarnessInvocation, NativeGrant
from swarmkit_runner.harness.hooks import hook_command
from tests.support.bundles import agent, anthropic_provider, bundle, write_bundle
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_subprocess

from . import test_claude_code_conformance as claude
from . import test_codex_conformance as codex
from .conformance import invocation, run_cli
from .resume import resume_args
from .test_claude_code_conformance import tool_results
from .test_claude_code_node import KEY_REF, PROVIDER_KEY, harness_dir, harness_topology, run

MARK = "written-by-the-harness"


class Decisions:
    """A decision point over real HTTP that records each hook input and answers ``decision``."""

    def __init__(self, decision: str, token: str) -> None:
        self.decision, self.token = decision, token
        self.asked: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("authorization") != f"Bearer {owner.token}":
                    self.send_response(401)
                    self.end_headers()
                    return
                owner.asked.append(json.loads(body))
                answer = {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": owner.decision,
                        "permissionDecisionReason": f"the test decided {owner.decision}",
                    }
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mcp_server() -> Iterator[HttpMcpServer]:
    with HttpMcpServer("conformance", token=secrets.token_hex(24)) as server:
        yield server


def write_then_finish(target: Path) -> Any:
    """Ask for Claude Code's Write of ``target``, then answer with what it was told."""

    def reply(request: RecordedRequest) -> Reply:
        results = tool_results(request)
        if results:
            return text(f"Write said: {results[0]}")
        if "Write" in request.tool_names:
            return tool_call("Write", file_path=str(target), content=MARK)
        return text("ok")

    return reply


def with_builtins(inv: HarnessInvocation, decisions: Decisions) -> HarnessInvocation:
    return replace(
        inv,
        native=NativeGrant(file_read=True, file_write=True),
        hook_command=hook_command(),
        hook_url=decisions.url,
        hook_token=decisions.token,
    )


@pytest.mark.parametrize("decision", ["deny", "allow"])
def test_claude_codes_pre_tool_use_hook_decides_a_write(
    tmp_path: Path, mcp_server: HttpMcpServer, decision: str
) -> None:
    token = secrets.token_urlsafe(24)
    decisions = Decisions(decision, secrets.token_urlsafe(24))
    try:
        target = tmp_path / "work" / "notes.txt"
        with ScriptedModelServer(default=write_then_finish(target), api_key=token) as model:
            inv = with_builtins(
                invocation(tmp_path, claude.MODEL, model.url, token, mcp_server), decisions
            )
            outcome, done = run_cli("claude-code", inv)
    finally:
        decisions.close()
    detail = f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    assert outcome.unmapped == (), detail
    assert done.returncode == 0 and outcome.error_reason is None, detail
    # Only the built-ins switched on are offered (fileIo: reading and edits, no shell).
    offered = {n for r in model.requests for n in r.tool_names if not n.startswith("mcp__")}
    assert offered == {"Read", "Glob", "Grep", "Edit", "Write", "NotebookEdit"}, offered
    # The hook asked the decision point once, with the tool and its input.
    [asked] = decisions.asked
    assert asked["hook_event_name"] == "PreToolUse" and asked["tool_name"] == "Write"
    assert asked["tool_input"] == {"file_path": str(target), "content": MARK}
    [write] = [c for c in outcome.tool_calls if c.name == "Write"]
    if decision == "deny":
        assert not target.exists(), "a denied Write must not run"
        assert write.is_error and "the test decided deny" in write.result, write
    else:
        assert target.read_text() == MARK, detail
        assert not write.is_error, write


def test_a_hook_that_cannot_reach_the_decision_point_denies(
    tmp_path: Path, mcp_server: HttpMcpServer
) -> None:
    # Fail closed: the decision point is gone (nothing listens on its port).
    decisions = Decisions("allow", secrets.token_urlsafe(24))
    decisions.close()
    token = secrets.token_urlsafe(24)
    target = tmp_path / "work" / "notes.txt"
    with ScriptedModelServer(default=write_then_finish(target), api_key=token) as model:
        inv = with_builtins(
            invocation(tmp_path, claude.MODEL, model.url, token, mcp_server), decisions
        )
        outcome, done = run_cli("claude-code", inv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not target.exists()
    [write] = [c for c in outcome.tool_calls if c.name == "Write"]
    assert write.is_error and "decision point did not answer" in write.result, write


def test_the_harness_environment_names_the_decision_point_only_with_built_ins() -> None:
    harness = harness_for("claude-code")
    base = HarnessInvocation(
        prompt="p",
        system_prompt="",
        model="m",
        work_dir=Path("/w"),
        home_dir=Path("/h"),
        skills_dir=None,
        mcp_url="http://127.0.0.1:1/mcp",
        mcp_token="t",
        model_proxy_url="http://127.0.0.1:2",
        model_token="k",
    )
    assert "SWARMKIT_HOOK_URL" not in harness.env(base)
    settings = json.loads(next(v for p, v in harness.files(base).items() if "settings" in p.name))
    assert "hooks" not in settings
    on = replace(
        base,
        native=NativeGrant(shell=True),
        hook_command=hook_command(),
        hook_url="http://127.0.0.1:3/hook",
        hook_token="h",
    )
    env = harness.env(on)
    assert (env["SWARMKIT_HOOK_URL"], env["SWARMKIT_HOOK_TOKEN"]) == (
        "http://127.0.0.1:3/hook",
        "h",
    )
    settings = json.loads(next(v for p, v in harness.files(on).items() if "settings" in p.name))
    [entry] = settings["hooks"]["PreToolUse"]
    assert entry["matcher"] == "Bash"
    assert "hook_cli.py" in entry["hooks"][0]["command"]


# Part two: the whole node in the runner, the decision point being the runner's governance.


def node_bundle(server: ScriptedModelServer, tier: str) -> Any:
    coder = agent("coder", provider="m", native={"fileIo": True}, model="claude-sonnet-4-5")
    return bundle(
        agents=[coder],
        providers=[anthropic_provider("m", server.url, api_key=KEY_REF)],
        topology=harness_topology(builtinTools=True, builtinToolsPermission=tier),
        input="Write the release notes to notes.txt.",
        timeout_seconds=180,
    )


def work_file(run_dir: Path) -> Path:
    """Where the harness node's Write lands: its work dir on the scratch emptyDir."""
    return run_dir / "scratch" / "harness" / "coder" / "work" / "notes.txt"


def run_node(tier: str, run_dir: Path, args: list[str] | None = None) -> RunOutput:
    target = work_file(run_dir)
    with ScriptedModelServer(default=write_then_finish(target), api_key=PROVIDER_KEY) as server:
        return run(node_bundle(server, tier), run_dir, args)


def test_a_write_under_a_readonly_tier_is_denied_and_audited(tmp_path: Path) -> None:
    out = run_node("readonly", tmp_path)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    assert not work_file(tmp_path).exists(), "a readonly tier must not let the Write run"
    [refused] = [e for e in out.events("tool.refused") if e.get("tool") == "Write"]
    assert (refused["reason"], refused["kind"]) == ("ReadOnlyTier", "native")
    assert (refused["tier"], refused["effects"]) == ("readonly", "write")
    assert out.tool_calls("Write") == []
    # The model read the refusal as the tool's error.
    assert "ReadOnlyTier" in out.result["output"] or "readonly" in out.result["output"]
    [start] = out.events("harness.start")
    assert start["builtins"] == ["Read", "Glob", "Grep", "Edit", "Write", "NotebookEdit"]


def test_a_write_under_a_cautious_tier_runs_and_is_audited(tmp_path: Path) -> None:
    out = run_node("cautious", tmp_path)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    assert work_file(tmp_path).read_text() == MARK
    assert "created successfully" in out.result["output"], out.result["output"]
    [call] = out.tool_calls("Write")
    assert (call["outcome"], call["kind"], call["tier"], call["effects"]) == (
        "ok",
        "native",
        "cautious",
        "write",
    )
    assert [e for e in out.events("tool.refused") if e.get("tool") == "Write"] == []


def test_a_write_under_a_strict_tier_parks_for_a_review_and_runs_once_approved(
    tmp_path: Path,
) -> None:
    parked = run_node("strict", tmp_path / "run")
    assert parked.outcome == "AwaitingReview", (parked.result, parked.stderr[-3000:])
    [item] = parked.result["reviewItems"]
    assert item["kind"] == "approval" and "Write" in item["question"], item
    assert not work_file(tmp_path / "run").exists(), "nothing runs before a person approves"
    decision = {"verdict": "approve", "decidedBy": "carol"}
    resumed = run_node("strict", tmp_path / "run", resume_args(parked, tmp_path, decision))
    assert resumed.outcome == "Succeeded", (resumed.result, resumed.stderr[-3000:])
    assert work_file(tmp_path / "run").read_text() == MARK
    [decided] = resumed.events("review.decided")
    assert (decided["verdict"], decided["decided_by"]) == ("approve", "carol")
    [call] = resumed.tool_calls("Write")
    assert (call["outcome"], call["tier"]) == ("ok", "strict")


# Codex: its PreToolUse hook (hooks.json in CODEX_HOME, trusted for the invocation with
# --dangerously-bypass-hook-trust since the runner wrote it) names exec_command ``Bash``
# and apply_patch ``apply_patch``; an allowed use runs in the workspace-write sandbox.

SHELL_WRITE = "echo shell-wrote > from-shell.txt"
PATCH = "*** Begin Patch\n*** Add File: from-patch.txt\n+patched\n*** End Patch\n"


def codex_script(*calls: tuple[str, dict[str, Any]]) -> Any:
    """Make each call in turn (one per model turn), then answer with every result."""
    made: list[str] = []

    def reply(request: RecordedRequest) -> Reply:
        results = [r[0] for r in request.tool_results()]
        made.extend(results)
        step = len(made)
        if step < len(calls):
            name, args = calls[step]
            if name in request.tool_names:
                return tool_call(name, **args)
        return text("Codex said: " + " | ".join(made))

    return reply


@pytest.mark.parametrize(
    ("decision", "call", "written"),
    [
        ("deny", ("exec_command", {"cmd": SHELL_WRITE}), "from-shell.txt"),
        ("allow", ("apply_patch", {"input": PATCH}), "from-patch.txt"),
    ],
)
def test_codexs_pre_tool_use_hook_decides_its_shell_and_patches(
    tmp_path: Path,
    mcp_server: HttpMcpServer,
    decision: str,
    call: tuple[str, dict[str, Any]],
    written: str,
) -> None:
    token = secrets.token_urlsafe(24)
    decisions = Decisions(decision, secrets.token_urlsafe(24))
    try:
        with ScriptedModelServer(default=codex_script(call), api_key=token) as model:
            inv = invocation(tmp_path, codex.MODEL, model.url, token, mcp_server)
            inv = replace(
                with_builtins(inv, decisions), native=NativeGrant(shell=True, file_write=True)
            )
            outcome, done = run_cli("codex", inv)
    finally:
        decisions.close()
    detail = f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    assert outcome.unmapped == () and outcome.error_reason is None, detail
    [asked] = decisions.asked
    assert asked["hook_event_name"] == "PreToolUse", asked
    if decision == "deny":
        assert asked["tool_name"] == "Bash" and asked["tool_input"] == {"command": SHELL_WRITE}
        assert not (inv.work_dir / written).exists()
        assert "blocked by PreToolUse hook: the test decided deny" in outcome.final_text
    else:
        assert asked["tool_name"] == "apply_patch" and asked["tool_input"] == {"command": PATCH}
        assert (inv.work_dir / written).read_text() == "patched\n", detail


def test_a_codex_shell_under_a_cautious_tier_runs_and_a_patch_not_switched_on_is_refused(
    tmp_path: Path,
) -> None:
    script = codex_script(("exec_command", {"cmd": SHELL_WRITE}), ("apply_patch", {"input": PATCH}))
    spec = harness_topology(builtinTools=True).spec.model_dump(by_alias=True)
    spec["agents"][0]["harness"]["kind"] = "codex"
    topology = BundleTopology(name="coding", version="v1", spec=TopologySpec.model_validate(spec))
    with ScriptedModelServer(default=script, api_key=PROVIDER_KEY) as server:
        provider = ModelProvider(
            name="m", type="openai", base_url=server.openai_base_url, api_key=KEY_REF
        )
        b = bundle(
            agents=[agent("coder", provider="m", native={"bash": True}, model="gpt-5.5")],
            providers=[provider],
            topology=topology,
            input="Write the notes.",
            timeout_seconds=180,
        )
        env = {secret_env_name(KEY_REF): PROVIDER_KEY, "SWARMKIT_HARNESS_DIR": str(harness_dir())}
        out = run_subprocess(write_bundle(b, tmp_path), env=env, timeout=240.0)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    work = tmp_path / "scratch" / "harness" / "coder" / "work"
    assert (work / "from-shell.txt").read_text() == "shell-wrote\n"
    assert not (work / "from-patch.txt").exists(), "apply_patch is not switched on (no fileIo)"
    [call] = out.tool_calls("Bash")
    assert (call["outcome"], call["kind"], call["tier"], call["effects"]) == (
        "ok",
        "native",
        "cautious",
        "unknown",
    )
    [refused] = [e for e in out.events("tool.refused") if e.get("tool") == "apply_patch"]
    assert refused["reason"] == "not granted"
    [start] = out.events("harness.start")
    assert start["builtins"] == ["Bash"]


def test_codexs_shell_sandbox_and_hook_are_on_only_with_built_ins(tmp_path: Path) -> None:
    harness = harness_for("codex")
    base = HarnessInvocation(
        prompt="p",
        system_prompt="",
        model="gpt-5.5",
        work_dir=tmp_path / "w",
        home_dir=tmp_path / "h",
        skills_dir=None,
        mcp_url="http://127.0.0.1:1/mcp",
        mcp_token="t",
        model_proxy_url="http://127.0.0.1:2",
        model_token="k",
    )
    off = harness.argv(Path("codex"), base)
    assert off[off.index("--sandbox") + 1] == "read-only"
    assert "--dangerously-bypass-hook-trust" not in off
    assert "features.shell_tool=false" in off and "features.hooks=true" not in off
    assert not [p for p in harness.files(base) if p.name == "hooks.json"]
    on = replace(
        base,
        native=NativeGrant(shell=True),
        hook_command=hook_command(),
        hook_url="http://127.0.0.1:3/hook",
        hook_token="h",
    )
    argv = harness.argv(Path("codex"), on)
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert "--dangerously-bypass-hook-trust" in argv
    assert "features.shell_tool=true" in argv and "features.hooks=true" in argv
    [hooks] = [v for p, v in harness.files(on).items() if p.name == "hooks.json"]
    [entry] = json.loads(hooks)["hooks"]["PreToolUse"]
    # apply_patch is matched even when file writes are off: the decision point refuses it.
    assert entry["matcher"] == "^(apply_patch|Bash)$"
    assert harness.env(on)["SWARMKIT_HOOK_TOKEN"] == "h"
