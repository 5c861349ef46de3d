"""Gemini CLI's built-in tools asked of the runner's decision point, failing closed.

The real pinned ``gemini`` (the version of ``swarmkit_api.harness.HARNESSES``) runs with the
argv, environment and files :class:`~swarmkit_runner.harness.gemini_cli.GeminiCli` builds,
against the scripted model server, the model asking for ``write_file``.

Part one is what the CLI does on its own, the reason for the wiring: a policy ``allow`` rule
runs a granted ``write_file`` without ``--approval-mode yolo`` (in yolo mode it offers
built-ins ``tools.exclude`` cannot name); its ``BeforeTool`` hook blocks with
``decision: block`` or an exit 2 with a reason, but every way a hook can fail (its timeout,
a signal, exit 1, exit 2 without a word, output that is not JSON) lets the tool run.

Part two is the wiring (the capabilities ``tool-hook``, ``native-file-read`` and
``native-file-write``): the runner's hook command (:mod:`swarmkit_runner.harness.hook_cli`)
asks a decision point (a recording HTTP server answering a fixed decision) and an allow hands
the tool's input back with the per-Run allow value the ``--policy`` file requires; a deny
holds, an allow runs, and a hook that cannot reach the decision point, times out, is killed,
or answers without the value is denied by the policy.

Part three is the whole node in the runner (``python -m swarmkit_runner run``, a real
process, the real CLI): the decision point is the runner's governance (:mod:`.hooks`), so
the node's ``builtinToolsPermission`` tier decides, each use is audited, and a ``strict``
tier parks the Run for a Review.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.harness import HARNESSES
from swarmkit_api.model_provider import ModelProvider
from swarmkit_runner.harness.base import HarnessInvocation, NativeGrant
from swarmkit_runner.harness.gemini_cli import NATIVE_TOOLS, OTHER_TOOLS, GeminiCli
from swarmkit_runner.harness.hook_cli import ALLOW_KEY, for_gemini
from swarmkit_runner.harness.hooks import hook_command
from tests.support.bundles import agent, bundle
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput

from .conformance import RUN_TIMEOUT, install_dir, invocation
from .resume import resume_args
from .test_builtin_hooks import Decisions, work_file
from .test_claude_code_node import KEY_REF, PROVIDER_KEY, harness_topology, run
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
#: Milliseconds the CLI waits for the hook in these runs (the runner's: 600 000).
HOOK_TIMEOUT_MS = 2000
#: What a wrapping shell prints when the hook program fails.
WRAPPER_BLOCK = '{"decision": "block", "reason": "the hook failed"}'
#: Hooks that fail: each is no decision to the CLI.
FAILING_HOOKS = {
    "timed-out": "exec sleep 90",  # killed at its timeout (SIGTERM), no decision
    "killed": "kill -9 $$",  # killed by a signal (the OOM killer's), no output
    "exit-1": "echo the hook crashed >&2; exit 1",  # an uncaught error's exit status
    "exit-2-silent": "exit 2",  # the blocking status, but nothing said
    "not-json": "echo not json",  # output that is not a decision
}


@dataclass(frozen=True)
class Run:
    requests: list[str]
    offered: set[str]
    written: bool
    write_results: list[str]
    #: Every built-in call: its name and whether it failed.
    calls: list[tuple[str, bool]]
    seconds: float
    done: subprocess.CompletedProcess[str]


Prepare = Callable[[HarnessInvocation], tuple[HarnessInvocation, dict[Path, str], list[str]]]


def gemini(
    tmp: Path, mcp: HttpMcpServer, prepare: Prepare, call: tuple[str, dict[str, Any]] | None = None
) -> Run:
    """One run of the pinned CLI whose model asks for ``write_file`` once (or ``call``),
    with the files and argv ``prepare`` makes of the invocation."""
    target = tmp / "work" / "notes.txt"
    name, args = call or ("write_file", {"file_path": str(target), "content": MARK})

    def reply(request: RecordedRequest) -> Reply:
        results = request.tool_results()
        if results:
            return text(f"Tool said: {results[0][0]}")
        if name in request.tool_names:
            return tool_call(name, **args)
        return text(f"{name} was not offered")

    harness, token = GeminiCli(), secrets.token_urlsafe(24)
    with ScriptedModelServer(default=reply, api_key=token) as model:
        inv = invocation(tmp, MODEL, model.url, token, mcp)
        inv, files, argv = prepare(inv)
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
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
        requests=[json.dumps(r.body) for r in model.requests],
        offered={n for r in model.requests for n in r.tool_names},
        written=target.exists(),
        write_results=[c.result for c in outcome.tool_calls if c.name == "write_file"],
        calls=[(c.name, c.is_error) for c in outcome.tool_calls if c.server is None],
        seconds=seconds,
        done=done,
    )


def edited(*, mode: str = "default", policy: str = ALLOW_WRITE, hook: str | None = None) -> Prepare:
    """Part one: the runner's files with built-ins off, then ``tools.exclude`` naming every
    built-in but ``write_file``, ``policy`` as ``--policy`` and ``hook`` as the BeforeTool
    command."""

    def prepare(inv: HarnessInvocation) -> tuple[HarnessInvocation, dict[Path, str], list[str]]:
        harness = GeminiCli()
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
        argv = harness.argv(harness.executable(install_dir()), inv)
        argv[argv.index("--approval-mode") + 1] = mode
        return inv, files, [*argv, "--policy", str(inv.home_dir / "policy.toml")]

    return prepare


def wired(
    decisions: Decisions, hook: str | None = None, native: NativeGrant | None = None
) -> Prepare:
    """Part two: exactly the runner's files and argv with file reading and writing switched
    on and the runner's hook asking ``decisions`` (``hook``: another hook command instead,
    with a short timeout)."""

    def prepare(inv: HarnessInvocation) -> tuple[HarnessInvocation, dict[Path, str], list[str]]:
        harness = GeminiCli()
        inv = replace(
            inv,
            native=native or NativeGrant(file_read=True, file_write=True),
            hook_command=hook_command(),
            hook_url=decisions.url,
            hook_token=decisions.token,
        )
        files = harness.files(inv)
        if hook is not None:
            settings: dict[str, Any] = json.loads(files[harness.settings_path(inv)])
            [entry] = settings["hooks"]["BeforeTool"]
            entry["hooks"][0].update(command=hook, timeout=HOOK_TIMEOUT_MS)
            files[harness.settings_path(inv)] = json.dumps(settings)
        return inv, files, harness.argv(harness.executable(install_dir()), inv)

    return prepare


def built_ins(offered: set[str]) -> set[str]:
    return {n for n in offered if not n.startswith("mcp_swarmkit_")}


# Part one: the CLI on its own.


def test_a_policy_switches_on_exactly_the_granted_built_ins_without_yolo(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    none = gemini(tmp_path / "none", conformance_mcp, edited(policy=""))
    assert built_ins(none.offered) == set(), "headless default mode drops a write that asks"
    run = gemini(tmp_path / "default", conformance_mcp, edited())
    assert built_ins(run.offered) == {"write_file"}, run.offered
    assert run.written, "a policy allow rule runs the granted write in default mode"
    # yolo mode offers built-ins tools.exclude cannot name; a policy deny of '*' removes them.
    yolo = gemini(tmp_path / "yolo", conformance_mcp, edited(mode="yolo", policy=""))
    assert yolo.offered >= BACKGROUND, yolo.offered
    denied = gemini(
        tmp_path / "denied", conformance_mcp, edited(mode="yolo", policy=DENY_ALL_BUT_GRANTED)
    )
    assert built_ins(denied.offered) == {"write_file"}, denied.offered


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
    run = gemini(tmp_path, conformance_mcp, edited(hook=hook))
    assert not run.written
    assert run.write_results == [f"Tool execution blocked: {said}"], run.write_results


@pytest.mark.parametrize("hook", FAILING_HOOKS.values(), ids=FAILING_HOOKS.keys())
def test_on_its_own_a_hook_that_fails_lets_the_write_run(
    tmp_path: Path, conformance_mcp: HttpMcpServer, hook: str
) -> None:
    run = gemini(tmp_path, conformance_mcp, edited(hook=hook))
    # The hook's `timeout` is honoured (the run ends long before the 90 s sleep)...
    assert run.seconds < 60, run.seconds
    # ...and a failed hook is no decision: the tool runs. Hence the policy's allow value.
    assert run.written, (run.write_results, run.done.stderr[-2000:])


# Part two: the runner's wiring.


@pytest.mark.parametrize("decision", ["deny", "allow"])
def test_the_runners_hook_decides_a_write(
    tmp_path: Path, conformance_mcp: HttpMcpServer, decision: str
) -> None:
    decisions = Decisions(decision, secrets.token_urlsafe(24))
    try:
        run = gemini(tmp_path, conformance_mcp, wired(decisions))
    finally:
        decisions.close()
    detail = (run.write_results, run.done.stderr[-2000:])
    # Only the built-ins switched on are offered (fileIo: reading and edits, no shell).
    assert built_ins(run.offered) == {
        "read_file",
        "list_directory",
        "glob",
        "grep_search",
        "write_file",
        "replace",
    }, run.offered
    [asked] = decisions.asked
    assert asked["hook_event_name"] == "BeforeTool" and asked["tool_name"] == "write_file"
    target = tmp_path / "work" / "notes.txt"
    assert asked["tool_input"] == {"file_path": str(target), "content": MARK}
    if decision == "deny":
        assert not run.written, detail
        assert run.write_results == ["Tool execution blocked: the test decided deny"], detail
    else:
        assert run.written and target.read_text() == MARK, detail
        # The allow value reached neither the model nor the transcript.
        assert "swarmkit_allow" not in run.done.stdout + "".join(run.requests)


def test_the_model_cannot_read_or_supply_the_allow_value(
    tmp_path: Path, conformance_mcp: HttpMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    decisions = Decisions("allow", secrets.token_urlsafe(24))
    policy_file = tmp_path / "home" / ".gemini" / "swarmkit-policy.toml"
    try:
        run = gemini(
            tmp_path,
            conformance_mcp,
            wired(decisions),
            ("read_file", {"file_path": str(policy_file)}),
        )
    finally:
        decisions.close()
    # Its file tools refuse a path outside the work dir before any hook is asked.
    assert "read_file" in run.offered and decisions.asked == []
    assert "project temp directory" in "".join(run.requests)  # its path refusal
    [value] = set(re.findall(r"[0-9a-f]{64}", policy_file.read_text()))
    assert value not in "".join(run.requests) + run.done.stdout
    # An input that already names the allow key is blocked, whatever the decision point said.
    body = json.dumps({"hook_event_name": "BeforeTool", "tool_input": {ALLOW_KEY: value}})
    allowed = json.dumps({"hookSpecificOutput": {"permissionDecision": "allow"}})
    monkeypatch.setenv("SWARMKIT_HOOK_ALLOW", value)
    answer = json.loads(for_gemini(body.encode(), allowed))
    assert answer == {"decision": "block", "reason": f"{ALLOW_KEY} is reserved"}


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"file_path": "GEMINI.md"}),
        ("list_directory", {"dir_path": "."}),
        ("glob", {"pattern": "*.md"}),
        ("grep_search", {"pattern": "careful"}),
        (
            "replace",
            {
                "file_path": "GEMINI.md",
                "old_string": "careful",
                "new_string": "bold",
                "instruction": "make it bold",
            },
        ),
    ],
)
def test_each_file_tool_runs_once_allowed(
    tmp_path: Path, conformance_mcp: HttpMcpServer, tool: str, args: dict[str, Any]
) -> None:
    # The hook's extra argument passes each tool's own validation (native-file-read/-write).
    if "file_path" in args:
        args = {**args, "file_path": str(tmp_path / "work" / args["file_path"])}
    decisions = Decisions("allow", secrets.token_urlsafe(24))
    try:
        run = gemini(tmp_path, conformance_mcp, wired(decisions), (tool, args))
    finally:
        decisions.close()
    assert [a["tool_name"] for a in decisions.asked] == [tool]
    assert run.calls == [(tool, False)], (run.calls, run.done.stdout[-2000:])
    if tool == "replace":
        assert "bold assistant" in (tmp_path / "work" / "GEMINI.md").read_text()


def test_a_hook_that_cannot_reach_the_decision_point_blocks(
    tmp_path: Path, conformance_mcp: HttpMcpServer
) -> None:
    decisions = Decisions("allow", secrets.token_urlsafe(24))
    decisions.close()  # nothing listens on its port
    run = gemini(tmp_path, conformance_mcp, wired(decisions))
    assert not run.written
    [result] = run.write_results
    assert "decision point did not answer" in result, result


@pytest.mark.parametrize(
    "hook",
    [*FAILING_HOOKS.values(), """echo '{"decision": "allow"}'"""],
    ids=[*FAILING_HOOKS.keys(), "allow-without-the-value"],
)
def test_a_hook_that_fails_is_denied_by_the_policy(
    tmp_path: Path, conformance_mcp: HttpMcpServer, hook: str
) -> None:
    decisions = Decisions("allow", secrets.token_urlsafe(24))
    try:
        run = gemini(tmp_path, conformance_mcp, wired(decisions, hook))
    finally:
        decisions.close()
    assert not run.written, (run.write_results, run.done.stderr[-2000:])
    assert run.write_results == ["Tool execution denied by policy."], run.write_results


@pytest.mark.parametrize(
    ("command", "runs"),
    [("touch from-shell.txt", True), ("echo hi > from-shell.txt", False)],
    ids=["atomic", "redirected"],
)
def test_its_shell_is_not_offered_as_a_built_in_because_the_policy_splits_commands(
    tmp_path: Path, conformance_mcp: HttpMcpServer, command: str, runs: bool
) -> None:
    # The policy checks each part of a compound or redirected command on its own, without
    # the hook's allow value: denied although the decision point allowed the whole command.
    # So gemini-cli lists no native-shell (admission refuses builtinTools with bash).
    decisions = Decisions("allow", secrets.token_urlsafe(24))
    call = ("run_shell_command", {"command": command})
    try:
        run = gemini(
            tmp_path, conformance_mcp, wired(decisions, native=NativeGrant(shell=True)), call
        )
    finally:
        decisions.close()
    assert [a["tool_name"] for a in decisions.asked] == ["run_shell_command"]
    assert (tmp_path / "work" / "from-shell.txt").exists() is runs
    if not runs:
        assert "Tool execution denied by policy." in run.done.stdout
    assert "native-shell" not in HARNESSES["gemini-cli"].capabilities


# Part three: the whole node in the runner (``python -m swarmkit_runner run``, the real CLI),
# the decision point being the runner's governance: the node's builtinToolsPermission tier.


def run_node(tier: str, run_dir: Path, args: list[str] | None = None) -> RunOutput:
    target = work_file(run_dir)

    def reply(request: RecordedRequest) -> Reply:
        results = request.tool_results()
        if results:
            return text(f"Tool said: {results[0][0]}")
        if "write_file" in request.tool_names:
            return tool_call("write_file", file_path=str(target), content=MARK)
        return text("write_file was not offered")

    with ScriptedModelServer(default=reply, api_key=PROVIDER_KEY) as server:
        provider = ModelProvider(name="m", type="gemini", base_url=server.url, api_key=KEY_REF)
        b = bundle(
            agents=[agent("coder", provider="m", native={"fileIo": True}, model=MODEL)],
            providers=[provider],
            topology=harness_topology(
                kind="gemini-cli", builtinTools=True, builtinToolsPermission=tier
            ),
            input="Write the release notes to notes.txt.",
            timeout_seconds=180,
        )
        return run(b, run_dir, args)


def test_a_gemini_write_under_a_readonly_tier_is_denied_and_audited(tmp_path: Path) -> None:
    out = run_node("readonly", tmp_path)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    assert not work_file(tmp_path).exists(), "a readonly tier must not let the write run"
    [refused] = [e for e in out.events("tool.refused") if e.get("tool") == "write_file"]
    assert (refused["reason"], refused["kind"]) == ("ReadOnlyTier", "native")
    assert (refused["tier"], refused["effects"]) == ("readonly", "write")
    assert out.tool_calls("write_file") == []
    assert "Tool execution blocked" in out.result["output"], out.result["output"]
    [start] = out.events("harness.start")
    assert start["builtins"] == list(NATIVE_TOOLS.granted(NativeGrant(file_write=True)))


def test_a_gemini_write_under_a_cautious_tier_runs_and_is_audited(tmp_path: Path) -> None:
    out = run_node("cautious", tmp_path)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    assert work_file(tmp_path).read_text() == MARK
    assert "Successfully created and wrote" in out.result["output"], out.result["output"]
    [call] = out.tool_calls("write_file")
    assert (call["outcome"], call["kind"], call["tier"], call["effects"]) == (
        "ok",
        "native",
        "cautious",
        "write",
    )
    assert "swarmkit_allow" not in out.stdout + str(out.result)


def test_a_gemini_write_under_a_strict_tier_parks_for_a_review_and_runs_once_approved(
    tmp_path: Path,
) -> None:
    parked = run_node("strict", tmp_path / "run")
    assert parked.outcome == "AwaitingReview", (parked.result, parked.stderr[-3000:])
    [item] = parked.result["reviewItems"]
    assert item["kind"] == "approval" and "write_file" in item["question"], item
    assert not work_file(tmp_path / "run").exists(), "nothing runs before a person approves"
    decision = {"verdict": "approve", "decidedBy": "carol"}
    resumed = run_node("strict", tmp_path / "run", resume_args(parked, tmp_path, decision))
    assert resumed.outcome == "Succeeded", (resumed.result, resumed.stderr[-3000:])
    assert work_file(tmp_path / "run").read_text() == MARK
    [call] = resumed.tool_calls("write_file")
    assert (call["outcome"], call["tier"]) == ("ok", "strict")
