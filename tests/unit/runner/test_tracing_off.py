"""Tracing off (the default) costs a Run nothing: the OpenTelemetry SDK is never imported.

The real runner subprocess runs with ``-X importtime`` (every imported module is on its
stderr), once without and once with an OTLP endpoint, so the check can fail both ways.
Also records the GenAI convention values the runner maps its own names to.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from swarmkit_runner import otel, traced
from tests.support.bundles import agent, bundle, replay_provider, write_bundle
from tests.support.runner import runner_env

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
