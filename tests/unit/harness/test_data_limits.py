"""The writable memory each harness CLI maps is what its row's ``data_mib`` says.

Where a pod's memory limit is an ``RLIMIT_DATA`` (the process node without a cgroup), the
runner refuses to start a harness whose ``data_mib`` is above it (``HarnessFailed``, naming
the Workspace's memory limit) instead of letting it die mid-run. Codex and Gemini CLI run
here as their conformance tests run them (the scripted model asks for the MCP echo tool,
then answers) under a data rlimit: at ``data_mib`` the whole round trip completes, at half
of it the CLI dies. ``bench/bench_harness_data.py`` bisects the smallest completing limit
with :func:`completes` (codex 0.169.1: 159 MiB, gemini-cli 0.61.0: 286 MiB, to 16 MiB;
Claude Code's own test is in its conformance module).
"""

from __future__ import annotations

import importlib
import resource
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from swarmkit_api.harness import HARNESSES
from swarmkit_runner.harness import harness_for
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import ScriptedModelServer

MIB = 1024 * 1024
#: Per kind: its conformance test module and that module's scripted model (MCP echo, then
#: the answer holding the tool's result).
CONFORMANCE = {
    "claude-code": ("tests.unit.harness.test_claude_code_conformance", "call_echo_then_finish"),
    "codex": ("tests.unit.harness.test_codex_conformance", "search_call_then_finish"),
    "gemini-cli": ("tests.unit.harness.test_gemini_cli_conformance", "call_then_finish"),
}


def completes(kind: str, mib: int, mcp: HttpMcpServer) -> tuple[bool, float, str]:
    """Whether the round trip completes under a data rlimit of ``mib`` MiB: exit 0, no
    error, the tool's result in the final answer (and its seconds, and why not)."""
    module = importlib.import_module(CONFORMANCE[kind][0])
    script = getattr(module, CONFORMANCE[kind][1])
    harness = harness_for(kind)
    token = secrets.token_urlsafe(24)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (mib * MIB, mib * MIB))

    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(default=script, api_key=token) as model,
    ):
        inv = module.invocation(Path(tmp), model.url, token, mcp)
        for path, content in harness.files(inv).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        (inv.home_dir / "tmp").mkdir(exist_ok=True)
        started = time.monotonic()
        done = subprocess.run(
            harness.argv(harness.executable(module.install_dir()), inv),
            cwd=inv.work_dir,
            env=harness.env(inv),
            preexec_fn=limit,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        seconds = time.monotonic() - started
    outcome = harness.parse_events(done.stdout.splitlines())
    ok = done.returncode == 0 and outcome.error_reason is None
    ok = ok and "conformance-ping" in outcome.final_text
    why = "" if ok else f"exit {done.returncode}: {' '.join(done.stderr.split())[-300:]}"
    return ok, seconds, why


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[HttpMcpServer]:
    with HttpMcpServer("conformance", token=secrets.token_hex(24)) as server:
        yield server


@pytest.mark.parametrize("kind", ["codex", "gemini-cli"])
def test_the_round_trip_completes_at_data_mib_and_dies_at_half(
    kind: str, mcp_server: HttpMcpServer
) -> None:
    need = HARNESSES[kind].data_mib
    assert need is not None, f"{kind} has no data_mib"
    ok, _seconds, why = completes(kind, need, mcp_server)
    assert ok, why
    ok, _seconds, why = completes(kind, need // 2, mcp_server)
    assert not ok, f"{kind} completed under {need // 2} MiB: data_mib overstates it"
