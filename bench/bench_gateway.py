"""MCP gateway benchmark (``make bench-gateway``); prints the numbers.

What a harness pays for going through the governed gateway instead of calling the upstream
MCP server itself. One upstream: the SDK test server over streamable HTTP. Three paths, each
a public ``mcp`` SDK client session over streamable HTTP calling ``echo``:

* **direct**: harness → upstream;
* **gateway, listed tool**: harness → ``python -m swarmkit_runner gateway`` (bearer auth,
  default-deny catalog, tier gate, audit line) → upstream (``t.echo``);
* **gateway, skill**: the same through an ``mcp_tool`` skill (the full skill pipeline:
  provenance, scopes, tiers, constraints, audit).

Each run makes ``--calls`` sequential calls per path after a warm-up and reports p50/p95
(and each gateway path's ratio to the direct call of the same run: the goal is <= 1.5x),
and the gateway process's CPU time per call (user + system, from ``/proc``: what the
gateway costs, barely moved by other load, unlike latency on a shared machine);
``--runs`` runs (default 3) give min/median/max of each. The machine's load average is
printed before and after.

Usage: ``python bench/bench_gateway.py [--runs 3] [--calls 300] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.bundles import (  # noqa: E402
    agent,
    bundle,
    http_server,
    mcp_tool_skill,
    replay_provider,
    write_bundle,
)
from tests.support.gateway import GatewayProcess, mcp_client  # noqa: E402
from tests.support.mcp_servers import HttpMcpServer  # noqa: E402

from swarmkit_api.agent import GatewayToken  # noqa: E402
from swarmkit_api.bundle import BundleGateway, secret_env_name  # noqa: E402
from swarmkit_api.common import SecretKeyRef  # noqa: E402

TOKEN_REF = SecretKeyRef(name="gateway-tokens", key="bench")
TOKEN = "bench-gateway-token-77a1"
WARMUP = 20


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def timed(call: Callable[[], Awaitable[Any]], calls: int) -> dict[str, float]:
    for _ in range(WARMUP):
        await call()
    samples: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        result = await call()
        samples.append((time.perf_counter() - start) * 1000)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"call failed: {result}")
    return {"p50_ms": percentile(samples, 0.5), "p95_ms": percentile(samples, 0.95)}


async def direct(url: str, token: str, calls: int) -> dict[str, float]:
    async with mcp_client(url, token) as client:
        return await timed(lambda: client.call_tool("echo", {"text": "hello"}), calls)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def through(url: str, tool: str, calls: int, pid: int) -> dict[str, float]:
    async with mcp_client(url, TOKEN) as client:
        await timed(lambda: client.call_tool(tool, {"text": "hello"}), WARMUP)
        before = cpu_seconds(pid)
        result = await timed(lambda: client.call_tool(tool, {"text": "hello"}), calls)
        # CPU the gateway process spent per call: unlike latency, barely moved by load.
        result["cpu_ms"] = (cpu_seconds(pid) - before) * 1000 / (calls + WARMUP)
        return result


def one_run(upstream: HttpMcpServer, calls: int, root: Path) -> dict[str, dict[str, float]]:
    b = bundle(
        agents=[agent("bench", provider="replay", skills=["echo-skill"], tools=["t.echo"])],
        skills=[mcp_tool_skill("echo-skill", "t", "echo")],
        providers=[replay_provider()],
        mcp_servers=[
            http_server(
                "t",
                upstream.url,
                headers=[{"name": "Authorization", "prefix": "Bearer ", "secretKeyRef": TOKEN_REF}],
            )
        ],
    )
    b = b.model_copy(
        update={
            "gateway": BundleGateway(
                port=0, tokens=[GatewayToken(name="bench", secret_key_ref=TOKEN_REF)]
            )
        }
    )
    layout = write_bundle(b, root)
    # The upstream wants its own bearer token; the gateway's clients use the gateway's.
    env = {secret_env_name(TOKEN_REF): TOKEN}
    assert upstream.token == TOKEN
    with GatewayProcess(layout, env) as gateway:
        assert gateway.proc is not None
        pid = gateway.proc.pid

        async def measure() -> dict[str, dict[str, float]]:
            return {
                "direct": await direct(upstream.url, TOKEN, calls),
                "gateway_tool": await through(gateway.url, "t.echo", calls, pid),
                "gateway_skill": await through(gateway.url, "echo-skill", calls, pid),
            }

        result = asyncio.run(measure())
        audited = len(gateway.audit("tool.call"))
    expected = 2 * (calls + 2 * WARMUP)
    if audited < expected:
        raise RuntimeError(f"only {audited} of {expected} gateway calls were audited")
    return result


def spread(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()
    runs: list[dict[str, dict[str, float]]] = []
    with HttpMcpServer(name="upstream", token=TOKEN) as upstream:
        for n in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
                runs.append(one_run(upstream, args.calls, Path(tmp)))
            print(f"run {n + 1}/{args.runs}: {json.dumps(runs[-1])}", file=sys.stderr)
    load_after = os.getloadavg()
    summary: dict[str, Any] = {
        "calls_per_run": args.calls,
        "runs": args.runs,
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_1m_before": round(load_before[0], 2),
            "loadavg_1m_after": round(load_after[0], 2),
        },
    }
    for path in ("direct", "gateway_tool", "gateway_skill"):
        summary[path] = {q: spread([r[path][q] for r in runs]) for q in ("p50_ms", "p95_ms")}
    for path in ("gateway_tool", "gateway_skill"):
        summary[f"{path}_cpu_ms"] = spread([r[path]["cpu_ms"] for r in runs])
    for path in ("gateway_tool", "gateway_skill"):
        summary[f"{path}_overhead"] = {
            q: spread([r[path][q] - r["direct"][q] for r in runs]) for q in ("p50_ms", "p95_ms")
        }
    for path in ("gateway_tool", "gateway_skill"):
        # Issue 43's goal (<= 1.5x at p50 and p95): each run's ratio to the direct call
        # measured in that run, so a run on a loaded machine is compared with itself.
        summary[f"{path}_x_direct"] = {
            q: spread([r[path][q] / r["direct"][q] for r in runs]) for q in ("p50_ms", "p95_ms")
        }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    machine = summary["machine"]
    print(
        f"MCP gateway overhead ({args.runs} runs x {args.calls} calls; {machine['cpus']} CPUs, "
        f"load {machine['loadavg_1m_before']} → {machine['loadavg_1m_after']})"
    )
    labels = {
        "direct": "direct SDK call to the upstream (streamable HTTP)",
        "gateway_tool": "through the gateway, listed tool t.echo",
        "gateway_skill": "through the gateway, mcp_tool skill",
        "gateway_tool_overhead": "overhead, listed tool",
        "gateway_skill_overhead": "overhead, skill",
    }
    for key, label in labels.items():
        p50, p95 = summary[key]["p50_ms"], summary[key]["p95_ms"]
        print(
            f"  {label}: p50 {p50['median']} ms (min {p50['min']}, max {p50['max']}); "
            f"p95 {p95['median']} ms (min {p95['min']}, max {p95['max']})"
        )
    for path, label in (("gateway_tool", "listed tool"), ("gateway_skill", "skill")):
        x = summary[f"{path}_x_direct"]
        print(
            f"  ratio to the direct call, {label} (goal <= 1.5x): "
            f"p50 {x['p50_ms']['median']}x (max {x['p50_ms']['max']}x); "
            f"p95 {x['p95_ms']['median']}x (max {x['p95_ms']['max']}x)"
        )
    for path, label in (("gateway_tool", "listed tool"), ("gateway_skill", "skill")):
        cpu = summary[f"{path}_cpu_ms"]
        print(
            f"  gateway process CPU per call, {label}: {cpu['median']} ms "
            f"(min {cpu['min']}, max {cpu['max']})"
        )


if __name__ == "__main__":
    main()
