"""The writable memory each harness CLI maps is what its row's ``data_mib`` says.

Where a pod's memory limit is an ``RLIMIT_DATA`` (the process node without a cgroup), the
runner refuses to start a harness whose ``data_mib`` is above it (``HarnessFailed``, naming
the Workspace's memory limit) instead of letting it die mid-run. Codex and Gemini CLI run
here as their conformance tests run them (the scripted model asks for the MCP echo tool,
then answers) under a data rlimit: at ``data_mib`` the whole round trip completes, with the
CPUs busy too (what Codex maps grows with its threads alive at once, and load keeps more of
them alive), and under the least any run has needed the CLI dies.
``bench/bench_harness_data.py`` prints the distribution of each CLI's peak ``VmData`` over
many runs, idle and loaded (docs/concepts/harness-nodes.md has the figures; Claude Code's
own test is in its conformance module).
"""

from __future__ import annotations

import importlib
import secrets
import tempfile
import time
from pathlib import Path

import pytest

from swarmkit_api.harness import HARNESSES
from tests.support.load import spinning
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


#: Per kind: a data rlimit under the least any of its round trips has needed
#: (bench_harness_data.py: Codex's smallest peak was 126 MiB, and under 112 MiB it died 20
#: times of 20 at start; Gemini CLI's was 321 MiB, and V8 dies under 270).
STARVED_MIB = {"codex": 96, "gemini-cli": 192}
#: CPU-spinning processes while the round trip runs at ``data_mib`` (load ~5 on 2 cores).
BUSY = 3


@pytest.mark.parametrize("kind", ["codex", "gemini-cli"])
def test_the_round_trip_completes_at_data_mib_under_load_and_dies_starved(
    kind: str, conformance_mcp: HttpMcpServer
) -> None:
    need = HARNESSES[kind].data_mib
    assert need is not None, f"{kind} has no data_mib"
    with spinning(BUSY):
        for _ in range(3):
            ok, _seconds, why = completes(kind, need, conformance_mcp)
            assert ok, why
    ok, _seconds, why = completes(kind, STARVED_MIB[kind], conformance_mcp)
    assert not ok, f"{kind} completed under {STARVED_MIB[kind]} MiB: the rlimit did not bind"
