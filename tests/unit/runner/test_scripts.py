"""run_skill_script: pinned, re-verified before every run, contained."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from swarmkit_api.bundle import ScriptPin
from tests.support.bundles import agent, bundle, openai_provider, sha256_text, skill, write_bundle
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process

ARGV_SCRIPT = (
    "import json, os, sys\nprint(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd()}))\n"
)
# An absolute shebang: an `env python3` lookup may hit a wrapper (pyenv shim) that sets vars.
ENV_SCRIPT = f"#!{sys.executable}\nimport json, os\nprint(json.dumps(dict(os.environ)))\n"
SLEEPER = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(600)\n"
)
FLOOD = "import sys\nchunk = 'x' * 1048576\nfor _ in range(100):\n    sys.stdout.write(chunk)\n"


def tools_skill(**kw: object) -> object:
    files = {
        "scripts/argv.py": ARGV_SCRIPT,
        "scripts/env.py": ENV_SCRIPT,
        "scripts/sleeper.py": SLEEPER,
        "scripts/flood.py": FLOOD,
        "scripts/unapproved.py": "print('nope')\n",
    }
    return skill(
        "ops-tools",
        "Use for ops scripts.",
        instructions="# Ops tools",
        files=files,
        approved_scripts=[
            "scripts/argv.py",
            "scripts/env.py",
            "scripts/sleeper.py",
            "scripts/flood.py",
        ],
        pins=[
            ScriptPin(
                path="scripts/unapproved.py",
                sha256=sha256_text("print('nope')\n"),
                approved=False,
                reason="NotAllowListed",
            )
        ],
        constraints={"timeoutSeconds": 1},
        **kw,
    )


def run_script(path: str, *args: str) -> object:
    return tool_call("run_skill_script", skill_name="ops-tools", path=path, args=list(args))


def make_bundle(server: ScriptedModelServer, allow: bool = True) -> object:
    return bundle(
        agents=[agent("ops", provider="m", skills=["ops-tools"])],
        skills=[tools_skill()],  # type: ignore[list-item]
        providers=[openai_provider("m", server.openai_base_url)],
        allow_script_execution=allow,
    )


async def test_approved_script_runs_with_literal_argv_in_a_fresh_dir(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        run_script("scripts/argv.py", "a b", "; rm -rf /", "$(whoami)"),
        run_script("scripts/unapproved.py"),
        text("done"),
    )
    b = make_bundle(model_server)
    layout = write_bundle(b, tmp_path)  # type: ignore[arg-type]
    out = await run_in_process(b, layout)  # type: ignore[arg-type]

    assert "run_skill_script" in model_server.requests[0].tool_names
    result = json.loads(model_server.requests[1].tool_results()[0][0])
    assert result["exit_code"] == 0
    printed = json.loads(result["stdout"])
    assert printed["argv"] == ["a b", "; rm -rf /", "$(whoami)"]
    assert Path(printed["cwd"]).parent == layout.scratch / "script-runs"
    assert not Path(printed["cwd"]).exists()  # the fresh dir is removed afterwards
    refused, is_error = model_server.requests[2].tool_results()[0]
    assert is_error and "ScriptNotApproved" in refused
    [run] = out.events("script.run")
    assert (run["skill"], run["path"], run["exit_code"]) == ("ops-tools", "scripts/argv.py", 0)
    [usage] = out.result["skills"]
    assert usage["scripts"] == [
        {
            "skill": "ops-tools",
            "path": "scripts/argv.py",
            "runs": 1,
            "failures": 0,
            "lastExitCode": 0,
        }
    ]
    assert (usage["scriptRuns"], usage["scriptFailures"], usage["loaded"]) == (1, 0, [])


async def test_script_tampered_after_pinning_is_refused(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(run_script("scripts/argv.py"), text("done"))
    b = make_bundle(model_server)
    layout = write_bundle(b, tmp_path)  # type: ignore[arg-type]
    marker = tmp_path / "pwned"
    (layout.skill_dir("ops-tools") / "scripts" / "argv.py").write_text(
        f"open({str(marker)!r}, 'w')\n"
    )
    out = await run_in_process(b, layout)  # type: ignore[arg-type]

    content, is_error = model_server.requests[1].tool_results()[0]
    assert is_error and content.startswith("ERROR: ScriptHashMismatch:")
    assert not marker.exists()
    [refused] = out.events("script.refused")
    assert refused["reason"] == "ScriptHashMismatch"
    assert refused["pinned_sha256"] == sha256_text(ARGV_SCRIPT)
    assert not out.events("script.run")


async def test_script_sees_an_empty_environment(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    os.environ["SWARMKIT_SECRET_SCRIPTLEAK"] = "leak-me-not"
    model_server.push(run_script("scripts/env.py"), text("done"))
    try:
        b = make_bundle(model_server)
        await run_in_process(b, write_bundle(b, tmp_path))  # type: ignore[arg-type]
    finally:
        del os.environ["SWARMKIT_SECRET_SCRIPTLEAK"]
    result = json.loads(model_server.requests[1].tool_results()[0][0])
    env = json.loads(result["stdout"])
    assert "leak-me-not" not in result["stdout"]
    # Python itself may add LC_CTYPE when coercing the C locale; nothing is inherited.
    assert set(env) <= {"LC_CTYPE"}


async def test_script_sleeping_forever_is_killed_with_its_children(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(run_script("scripts/sleeper.py"), text("done"))
    b = make_bundle(model_server)
    start = time.monotonic()
    out = await run_in_process(b, write_bundle(b, tmp_path))  # type: ignore[arg-type]
    elapsed = time.monotonic() - start

    content, is_error = model_server.requests[1].tool_results()[0]
    assert is_error and "ScriptTimedOut" in content and "after 1s" in content
    assert elapsed < 8
    [run] = out.events("script.run")
    assert run["timed_out"] is True and run["outcome"] == "timeout"
    [script] = out.result["skills"][0]["scripts"]
    assert (script["runs"], script["failures"], script.get("lastExitCode")) == (1, 1, None)
    # The grandchild (same process group) is gone too: no sleep(600) of this run survives
    # (other test runs on the machine may have their own: only ours, by working directory).
    survivors = [
        p
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and "time.sleep(600)" in _cmdline(p) and str(tmp_path) in _cwd(p)
    ]
    assert survivors == []


def _cwd(proc: Path) -> str:
    try:
        return os.readlink(proc / "cwd")
    except OSError:
        return ""


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


async def test_script_printing_100_mb_is_capped(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(run_script("scripts/flood.py"), text("done"))
    b = make_bundle(model_server)
    start = time.monotonic()
    out = await run_in_process(b, write_bundle(b, tmp_path))  # type: ignore[arg-type]

    assert time.monotonic() - start < 8
    content, is_error = model_server.requests[1].tool_results()[0]
    assert not is_error
    assert len(content) < 2 * 1024 * 1024  # capped at 1 MiB of output
    result = json.loads(content) if len(content) < 100_000 else None
    [run] = out.events("script.run")
    assert run["truncated"] is True
    assert result is None or result["output_truncated"] is True


async def test_run_skill_script_needs_execution_allowed_and_an_approved_script(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("a"), text("b"))
    b = make_bundle(model_server, allow=False)
    await run_in_process(b, write_bundle(b, tmp_path / "off"))  # type: ignore[arg-type]
    assert "run_skill_script" not in model_server.requests[0].tool_names

    plain = bundle(
        agents=[agent("ops", provider="m", skills=["docs"])],
        skills=[skill("docs", files={"scripts/x.py": "print(1)\n"})],  # a script, not approved
        providers=[openai_provider("m", model_server.openai_base_url)],
        allow_script_execution=True,
    )
    await run_in_process(plain, write_bundle(plain, tmp_path / "plain"))
    assert "run_skill_script" not in model_server.requests[1].tool_names
