"""Tracing off (the default) costs a Run nothing: the OpenTelemetry SDK is never imported.

The real runner subprocess runs with ``-X importtime`` (every imported module is on its
stderr), once without and once with an OTLP endpoint, so the check can fail both ways.
Also records the GenAI convention values the runner maps its own names to, bounds what a
dead collector costs, and checks the GenAI client metrics with an OTLP receiver.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from swarmkit_runner import otel, traced
from tests.support.bundles import (
    agent,
    bundle,
    openai_provider,
    replay_provider,
    skill,
    write_bundle,
)
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.otlp_receiver import OtlpMetricsReceiver
from tests.support.runner import run_subprocess, runner_env

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")

#: ``gen_ai.provider.name`` well-known values, from the registry
#: (open-telemetry/semantic-conventions docs/registry/attributes/gen-ai.md at 384d661,
#: since moved to open-telemetry/semantic-conventions-genai).
WELL_KNOWN_PROVIDERS = {
    "anthropic", "aws.bedrock", "azure.ai.inference", "azure.ai.openai", "cohere", "deepseek",
    "gcp.gemini", "gcp.gen_ai", "gcp.vertex_ai", "groq", "ibm.watsonx.ai", "mistral_ai",
    "openai", "perplexity", "x_ai",
}  # fmt: skip


def _imported(tmp_path: Path, env: dict[str, str]) -> set[str]:
    b = bundle(agents=[agent("solo", provider="r", replay=[{"text": "ok"}])],
               providers=[replay_provider("r")])  # fmt: skip
    layout = write_bundle(b, tmp_path)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "swarmkit_runner", "run", *layout.cli_args()],
        env=runner_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = {m.group(1) for m in map(IMPORT_LINE.match, proc.stderr.splitlines()) if m}
    assert "swarmkit_runner.runner" in modules  # the output really is the import log
    return modules


def test_without_an_endpoint_no_opentelemetry_module_is_imported(tmp_path: Path) -> None:
    modules = _imported(tmp_path / "off", {})
    assert sorted(m for m in modules if m.startswith("opentelemetry")) == []
    assert "swarmkit_runner.otel" not in modules

    # The same run with an endpoint (nothing listens: export fails quietly) loads the SDK.
    on = _imported(tmp_path / "on", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert "swarmkit_runner.otel" in on
    assert "opentelemetry.sdk.trace" in on


def test_sdk_disabled_wins_over_an_endpoint(tmp_path: Path) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"}
    assert not any(m.startswith("opentelemetry") for m in _imported(tmp_path, env))


def test_provider_names_are_the_conventions_well_known_values() -> None:
    ours = {k: v for k, v in traced.PROVIDER_NAMES.items() if not v.startswith("swarmkit.")}
    assert set(ours.values()) <= WELL_KNOWN_PROVIDERS
    # Only the generic HTTP endpoint and the replay script have names of our own.
    assert set(traced.PROVIDER_NAMES) - set(ours) == {"http", "replay"}


def test_a_collector_that_never_answers_does_not_hold_the_run(tmp_path: Path) -> None:
    """A listening socket that never answers (the SDK alone would wait 10 s per attempt):
    the run succeeds and exits within the runner's shutdown bound."""
    b = bundle(agents=[agent("solo", provider="r", replay=[{"text": "ok"}])],
               providers=[replay_provider("r")])  # fmt: skip
    layout = write_bundle(b, tmp_path)
    argv = [sys.executable, "-m", "swarmkit_runner", "run", *layout.cli_args()]

    def timed(env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
        start = time.monotonic()
        proc = subprocess.run(
            argv, env=runner_env(env), capture_output=True, text=True, timeout=120
        )
        return time.monotonic() - start, proc

    off, _ = timed({})
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # accepts connections into the backlog, never reads or answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        on, proc = timed({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "TRACEPARENT": PARENT})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(layout.termination_log.read_text())["outcome"] == "Succeeded"
    assert on - off < otel.SHUTDOWN_SECONDS + 3.0, (on, off)


def test_genai_client_metrics_reach_an_otlp_receiver(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    """With ``OTEL_METRICS_EXPORTER=otlp``: the two GenAI client histograms, per the
    conventions (names, units, attributes, the token type split)."""
    model_server.push(tool_call("load_skill", name="guide"), text("done"))
    b = bundle(
        agents=[agent("solo", provider="m", model="gpt-test", skills=["guide"])],
        skills=[skill("guide", "Use when the guide is needed.", instructions="# Guide")],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    with OtlpMetricsReceiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_METRICS_EXPORTER": "otlp",
            "TRACEPARENT": PARENT,
        }
        out = run_subprocess(write_bundle(b, tmp_path), env)
        assert out.exit_code == 0, out.stderr[-2000:]
    by_name: dict[str, list[Any]] = {}
    for p in receiver.points:
        by_name.setdefault(p.metric, []).append(p)
    [duration] = by_name["gen_ai.client.operation.duration"]
    assert duration.unit == "s" and duration.count == 2  # two model calls
    assert duration.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
    }
    assert duration.bounds[:3] == (0.01, 0.02, 0.04)
    tokens = {p.attributes["gen_ai.token.type"]: p for p in by_name["gen_ai.client.token.usage"]}
    assert tokens["input"].unit == "{token}"
    # The scripted server bills 10 in / 5 out per call.
    assert (tokens["input"].count, tokens["input"].sum) == (2, 20)
    assert (tokens["output"].count, tokens["output"].sum) == (2, 10)
    assert tokens["input"].bounds[:3] == (1, 4, 16)


def test_no_metrics_unless_asked(tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.push(text("done"))
    b = bundle(agents=[agent("solo", provider="m")],
               providers=[openai_provider("m", model_server.openai_base_url)])  # fmt: skip
    with OtlpMetricsReceiver() as receiver:
        out = run_subprocess(
            write_bundle(b, tmp_path), {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        )
        assert out.exit_code == 0, out.stderr[-2000:]
    assert receiver.points == []
