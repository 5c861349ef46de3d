"""Tracing cost (``make bench-tracing``): the runner with tracing off versus on.

1. Cold start: ``python -m swarmkit_runner run`` end to end (process start → exit, the
   spans' export included when on) for a replay agent answering in one turn.
2. Per-call overhead: a replay agent making 50 tool calls (``load_skill``, in two turns of
   25), measured inside the runner (``run.end`` ``duration_ms``); the difference on - off
   divided by the number of spans the run opened (50 ``execute_tool`` + 3 ``chat`` + 1
   ``invoke_agent``).

"On" exports to a real Jaeger (``swarmkit_devcluster.jaeger``, OTLP/HTTP on loopback) under
a ``TRACEPARENT``. Each configuration runs ``--runs`` times (3) after one warm-up, off and on
alternating; min / median / max and the load average are printed, ``--json`` prints them as
one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.bundles import agent, bundle, replay_provider, skill, write_bundle  # noqa: E402
from tests.support.runner import parse_audit, runner_env  # noqa: E402

from swarmkit_devcluster.jaeger import Jaeger  # noqa: E402

CALLS = 50


def _bundles(root: Path) -> dict[str, Any]:
    guide = skill("guide", "Use when the guide is needed.", instructions="# Guide\n\nStep.")
    cold = bundle(agents=[agent("solo", provider="r", replay=[{"text": "ok"}])],
                  providers=[replay_provider("r")])  # fmt: skip
    turn = {"toolCalls": [{"name": "load_skill", "arguments": {"name": "guide"}}] * (CALLS // 2)}
    calls = bundle(
        agents=[agent("solo", provider="r", skills=["guide"], replay=[turn, turn, {"text": "ok"}])],
        skills=[guide],
        providers=[replay_provider("r")],
        governance={"maxStepsPerRun": 100, "maxStepsPerAgent": 100},
    )
    return {"cold": write_bundle(cold, root / "cold"), "calls": write_bundle(calls, root / "calls")}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(layout: Any, env: dict[str, str]) -> tuple[float, float, float]:
    """(wall seconds of the process, its CPU seconds, the runner's own run duration in ms)."""
    argv = [sys.executable, "-m", "swarmkit_runner", "run", *layout.cli_args()]
    start, cpu = time.perf_counter(), _cpu()
    proc = subprocess.run(argv, env=runner_env(env), capture_output=True, text=True, timeout=120)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"runner failed:\n{proc.stderr[-2000:]}")
    end = [e for e in parse_audit(proc.stdout) if e["event"] == "run.end"][-1]
    return wall, cpu, float(end["duration_ms"])


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"runs": args.runs, "loadavg_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp, Jaeger() as jaeger:
        layouts = _bundles(Path(tmp))

        def env(on: bool) -> dict[str, str]:
            if not on:
                return {}
            return {
                "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_endpoint,
                "TRACEPARENT": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01",
            }

        for name in ("cold", "calls"):
            _run(layouts[name], env(False))  # warm-up (page cache, .pyc)
            _run(layouts[name], env(True))
            measured: dict[str, list[tuple[float, float, float]]] = {"off": [], "on": []}
            for _ in range(args.runs):
                for mode in ("off", "on"):
                    measured[mode].append(_run(layouts[name], env(mode == "on")))
            results[name] = {
                mode: {
                    "wall_s": _spread([w for w, _, _ in runs]),
                    "cpu_s": _spread([c for _, c, _ in runs]),
                    "run_ms": _spread([d for _, _, d in runs]),
                }
                for mode, runs in measured.items()
            }
    spans = CALLS + 3 + 1
    off = results["calls"]["off"]["run_ms"]["median"]
    on = results["calls"]["on"]["run_ms"]["median"]
    results["per_span_overhead_ms"] = round((on - off) / spans, 3)
    results["loadavg_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    rows = (("cold", "wall_s", "cold start, process wall time (s)"),
            ("cold", "cpu_s", "cold start, process CPU (s)"),
            ("calls", "run_ms", f"{CALLS} tool calls, run duration (ms)"))  # fmt: skip
    for name, key, label in rows:
        for mode in ("off", "on"):
            s = results[name][mode][key]
            print(f"{label:<40} tracing {mode:<3}  min {s['min']:.3f}  "
                  f"median {s['median']:.3f}  max {s['max']:.3f}")  # fmt: skip
    print(f"per-span overhead (median on - off, / {spans} spans): "
          f"{results['per_span_overhead_ms']} ms")  # fmt: skip
    print(f"load average (1 min) before/after: {results['loadavg_before']:.2f} / "
          f"{results['loadavg_after']:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
