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
import secrets
import tempfile
import time
from pathlib import Path

import pytest

from swarmkit_api.harness import HARNESSES
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import ScriptedModelServer

from .conformance import PING, invocation, run_cli

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
    token = secrets.token_urlsafe(24)
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(default=script, api_key=token) as model,
    ):
        inv = invocation(Path(tmp), module.MODEL, model.url, token, mcp)
        started = time.monotonic()
        outcome, done = run_cli(kind, inv, data_limit=mib * MIB)
        seconds = time.monotonic() - started
    ok = done.returncode == 0 and outcome.error_reason is None
    ok = ok and PING in outcome.final_text
    why = "" if ok else f"exit {done.returncode}: {' '.join(done.stderr.split())[-300:]}"
    return ok, seconds, why


@pytest.mark.parametrize("kind", ["codex", "gemini-cli"])
def test_the_round_trip_completes_at_data_mib_and_dies_at_half(
    kind: str, conformance_mcp: HttpMcpServer
) -> None:
    need = HARNESSES[kind].data_mib
    assert need is not None, f"{kind} has no data_mib"
    ok, _seconds, why = completes(kind, need, conformance_mcp)
    assert ok, why
    ok, _seconds, why = completes(kind, need // 2, conformance_mcp)
    assert not ok, f"{kind} completed under {need // 2} MiB: data_mib overstates it"
