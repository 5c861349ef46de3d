"""Run the runner: as a real subprocess (``python -m swarmkit_runner run``) or in-process.

Both return a :class:`RunOutput` with the exit code (subprocess), the parsed result from the
termination log and every audit line, so tests assert what a user would see.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from swarmkit_api.bundle import RunBundle

from .bundles import BundleLayout, write_bundle

#: Environment a Job would give the runner (plus whatever secrets a test adds).
BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "TMPDIR")


@dataclass
class RunOutput:
    exit_code: int | None
    result: dict[str, Any]
    audit: list[dict[str, Any]]
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    layout: BundleLayout | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        return str(self.result.get("outcome"))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.audit if e.get("event") == name]

    def tool_calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        calls = self.events("tool.call")
        return [c for c in calls if tool is None or c.get("tool") == tool]


def runner_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def parse_audit(stdout: str) -> list[dict[str, Any]]:
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            events.append(json.loads(line))
    return events


def run_subprocess(
    layout: BundleLayout,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    args: list[str] | None = None,
) -> RunOutput:
    """``python -m swarmkit_runner run`` on ``layout`` with a Job-like environment."""
    argv = [sys.executable, "-m", "swarmkit_runner", "run", *(args or layout.cli_args())]
    start = time.monotonic()
    proc = subprocess.run(
        argv, env=runner_env(env), capture_output=True, text=True, timeout=timeout
    )
    duration = time.monotonic() - start
    result: dict[str, Any] = {}
    if layout.termination_log.exists():
        result = json.loads(layout.termination_log.read_text(encoding="utf-8"))
    return RunOutput(
        proc.returncode,
        result,
        parse_audit(proc.stdout),
        proc.stdout,
        proc.stderr,
        duration,
        layout,
    )


async def run_in_process(
    b: RunBundle, layout: BundleLayout | None = None, environ: Mapping[str, str] | None = None
) -> RunOutput:
    """Run ``b`` inside the test's event loop (faster; same code path minus the CLI)."""
    from swarmkit_runner.audit import AuditLog
    from swarmkit_runner.paths import RunnerPaths
    from swarmkit_runner.runner import execute
    from swarmkit_runner.secrets import SecretStore

    assert layout is not None, "write the bundle first (write_bundle)"
    paths = RunnerPaths.resolve(
        str(layout.bundle_dir),
        str(layout.skills_dir),
        str(layout.scratch),
        str(layout.termination_log),
    )
    secrets = SecretStore(dict(environ or {}))
    sink = io.StringIO()
    audit = AuditLog(b.run.uid, b.run.correlation_id, secrets, sink=sink)
    start = time.monotonic()
    result = await execute(b, paths, audit, secrets)
    out = sink.getvalue()
    return RunOutput(
        None,
        json.loads(result.to_termination_message()),
        parse_audit(out),
        out,
        "",
        time.monotonic() - start,
        layout,
    )


__all__ = ["RunOutput", "parse_audit", "run_in_process", "run_subprocess", "write_bundle"]
