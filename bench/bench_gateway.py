"""MCP gateway benchmark (``make bench-gateway``); prints the numbers.

What a harness pays for going through the governed gateway instead of calling the upstream
MCP server itself. One upstream: the SDK test server over streamable HTTP. Four paths, each
a public ``mcp`` SDK client session over streamable HTTP calling ``echo``:

* **direct**: harness → upstream;
* **relay** (the floor): harness → ``bench/mcp_relay.py`` → upstream: a pass-through MCP
  server made of the SDK pieces the gateway uses (low-level ``Server``, the streamable-HTTP
  session manager with JSON responses, Starlette, uvicorn, one persistent SDK client session
  to the upstream) and nothing else: what any gateway built on this SDK costs;
* **gateway, listed tool**: harness → ``python -m swarmkit_runner gateway`` (bearer auth,
  default-deny catalog, tier gate, audit line) → upstream (``t.echo``);
* **gateway, skill**: the same through an ``mcp_tool`` skill (the full skill pipeline:
  provenance, scopes, tiers, constraints, audit).

Each run opens the four sessions, warms each up, then makes ``--calls`` calls per path in
interleaved blocks (each block a few calls on every path in turn, the order rotating), so
the paths share the machine's moments; it reports p50/p95 of each path, each gateway path's
ratio to the direct call of the same run (the goal of issue 43: <= 1.5x), the relay's ratio
to the direct call (the floor of that ratio: the goal is out of reach while the relay alone
is above it) and each gateway path's ratio to the relay (what governance costs above the
SDK), and the CPU time per call (user + system, from ``/proc``: barely moved by other load,
unlike latency on a shared machine) of the gateway process and of the relay process;
``--runs`` runs (default 3) give min/median/max of each. The machine's load average is
printed before and after.

Usage: ``python bench/bench_gateway.py [--runs 3] [--calls 300] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_support import spread  # noqa: E402
from tests.support.bundles import (  # noqa: E402
    agent,
    bundle,
    http_server,
    mcp_tool_skill,
    replay_provider,
    write_bundle,
)
from tests.support.gateway import (  # noqa: E402
    GatewayProcess,
    mcp_client,
    stop_process,
    until_healthy,
)
from tests.support.mcp_servers import HttpMcpServer, free_port  # noqa: E402
from tests.support.runner import runner_env  # noqa: E402

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


#: Paths in the order of the first block; each later block starts one path further on.
PATHS = ("direct", "relay", "gateway_tool", "gateway_skill")
#: Blocks each path's ``--calls`` calls are split into (interleaving the paths).
BLOCKS = 10
RELAY = Path(__file__).resolve().parent / "mcp_relay.py"


class RelayProcess:
    """``bench/mcp_relay.py`` in front of ``upstream`` (context manager), started as the
    gateway is: its own interpreter, the runner's environment, a free loopback port."""

    def __init__(self, upstream: HttpMcpServer) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> RelayProcess:
        argv = [sys.executable, str(RELAY), "--upstream", self.upstream.url]
        env = runner_env({"RELAY_UPSTREAM_TOKEN": self.upstream.token or ""})
        self.proc = subprocess.Popen([*argv, "--port", str(self.port)], env=env)
        if until_healthy(self.proc, f"http://127.0.0.1:{self.port}/healthz", 60):
            return self
        if self.proc.poll() is not None:
            raise RuntimeError(f"the relay exited {self.proc.returncode}")
        self.__exit__()
        raise RuntimeError("the relay did not become healthy in time")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop_process(self.proc)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Call = Callable[[], Awaitable[Any]]


async def call_checked(call: Call) -> float:
    """One call: its latency (ms); a tool error fails the benchmark."""
    start = time.perf_counter()
    result = await call()
    elapsed = (time.perf_counter() - start) * 1000
    if getattr(result, "is_error", False):
        raise RuntimeError(f"call failed: {result}")
    return elapsed


async def interleaved(
    calls: Mapping[str, Call], pids: Mapping[str, int], count: int
) -> dict[str, dict[str, float]]:
    """``WARMUP`` calls on each path, then ``count`` per path in :data:`BLOCKS` rotating
    blocks: p50/p95 per path and, for a path with a server process in ``pids``, that
    process's CPU per call over its own blocks."""
    for call in calls.values():
        for _ in range(WARMUP):
            await call_checked(call)
    samples: dict[str, list[float]] = {path: [] for path in calls}
    cpu: dict[str, float] = dict.fromkeys(pids, 0.0)
    order = list(calls)
    blocks = min(BLOCKS, count)
    for b in range(blocks):
        size = count * (b + 1) // blocks - count * b // blocks
        for path in order[b % len(order) :] + order[: b % len(order)]:
            before = cpu_seconds(pids[path]) if path in pids else 0.0
            samples[path] += [await call_checked(calls[path]) for _ in range(size)]
            if path in pids:
                cpu[path] += cpu_seconds(pids[path]) - before
    result = {
        path: {"p50_ms": percentile(s, 0.5), "p95_ms": percentile(s, 0.95)}
        for path, s in samples.items()
    }
    for path, seconds in cpu.items():
        # CPU the server process spent per call: unlike latency, barely moved by load.
        result[path]["cpu_ms"] = seconds * 1000 / count
    return result


async def measure(
    urls: Mapping[str, str], pids: Mapping[str, int], count: int
) -> dict[str, dict[str, float]]:
    """One SDK client session per path (the gateway's two paths each their own), measured
    by :func:`interleaved`."""
    tools = {"direct": "echo", "relay": "echo", "gateway_tool": "t.echo"}
    tools["gateway_skill"] = "echo-skill"
    async with contextlib.AsyncExitStack() as stack:
        calls: dict[str, Call] = {}
        for path in PATHS:
            client = await stack.enter_async_context(mcp_client(urls[path], TOKEN))
            calls[path] = functools.partial(client.call_tool, tools[path], {"text": "hello"})
        return await interleaved(calls, pids, count)


def bench_bundle(upstream: HttpMcpServer) -> Any:
    """The gateway's bundle: one agent with ``t.echo`` listed and the ``echo-skill``."""
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
    gateway = BundleGateway(port=0, tokens=[GatewayToken(name="bench", secret_key_ref=TOKEN_REF)])
    return b.model_copy(update={"gateway": gateway})


def one_run(upstream: HttpMcpServer, calls: int, root: Path) -> dict[str, dict[str, float]]:
    layout = write_bundle(bench_bundle(upstream), root)
    # The upstream wants its own bearer token; the gateway's clients use the gateway's.
    env = {secret_env_name(TOKEN_REF): TOKEN}
    assert upstream.token == TOKEN
    with GatewayProcess(layout, env) as gateway, RelayProcess(upstream) as relay:
        assert gateway.proc is not None and relay.proc is not None
        urls = {"direct": upstream.url, "relay": relay.url}
        urls |= {"gateway_tool": gateway.url, "gateway_skill": gateway.url}
        pids = {"relay": relay.proc.pid}
        pids |= {"gateway_tool": gateway.proc.pid, "gateway_skill": gateway.proc.pid}
        result = asyncio.run(measure(urls, pids, calls))
        audited = len(gateway.audit("tool.call"))
    expected = 2 * (calls + WARMUP)
    if audited < expected:
        raise RuntimeError(f"only {audited} of {expected} gateway calls were audited")
    return result


def summarize(runs: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """min/median/max over the runs of each path's p50/p95, CPU per call, overhead and the
    ratios, each ratio taken within a run (a run on a loaded machine compared with itself)."""
    quantiles = ("p50_ms", "p95_ms")

    def ratio(path: str, floor: str) -> dict[str, dict[str, float]]:
        return {q: spread([r[path][q] / r[floor][q] for r in runs], 3) for q in quantiles}

    summary: dict[str, Any] = {}
    for path in PATHS:
        summary[path] = {q: spread([r[path][q] for r in runs], 3) for q in quantiles}
    for path in ("gateway_tool", "gateway_skill", "relay"):
        summary[f"{path}_cpu_ms"] = spread([r[path]["cpu_ms"] for r in runs], 3)
    for path in ("gateway_tool", "gateway_skill"):
        summary[f"{path}_overhead"] = {
            q: spread([r[path][q] - r["direct"][q] for r in runs], 3) for q in quantiles
        }
    for path in ("gateway_tool", "gateway_skill"):
        # Issue 43's goal (<= 1.5x at p50 and p95): each run's ratio to the direct call
        # measured in that run, so a run on a loaded machine is compared with itself.
        summary[f"{path}_x_direct"] = ratio(path, "direct")
    # The floor of that ratio: a pass-through relay on the same SDK, same run.
    summary["relay_x_direct"] = ratio("relay", "direct")
    for path in ("gateway_tool", "gateway_skill"):
        # What governance (auth, catalog, tiers, skill pipeline, audit) costs above the SDK.
        summary[f"{path}_x_relay"] = ratio(path, "relay")
    return summary


def report(summary: dict[str, Any]) -> None:
    """The summary, for a reader."""
    machine = summary["machine"]
    print(
        f"MCP gateway overhead ({summary['runs']} runs x {summary['calls_per_run']} calls; "
        f"{machine['cpus']} CPUs, load {machine['loadavg_1m_before']} → "
        f"{machine['loadavg_1m_after']})"
    )
    labels = {
        "direct": "direct SDK call to the upstream (streamable HTTP)",
        "relay": "through a pass-through relay on the same SDK (the floor)",
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
    for key, label in (
        ("gateway_tool_x_direct", "ratio to the direct call, listed tool (goal <= 1.5x)"),
        ("gateway_skill_x_direct", "ratio to the direct call, skill (goal <= 1.5x)"),
        ("relay_x_direct", "ratio to the direct call, relay (the floor of the two above)"),
        ("gateway_tool_x_relay", "ratio to the relay, listed tool (governance)"),
        ("gateway_skill_x_relay", "ratio to the relay, skill (governance)"),
    ):
        x = summary[key]
        print(
            f"  {label}: p50 {x['p50_ms']['median']}x (max {x['p50_ms']['max']}x); "
            f"p95 {x['p95_ms']['median']}x (max {x['p95_ms']['max']}x)"
        )
    for path, label in (
        ("gateway_tool", "gateway process, listed tool"),
        ("gateway_skill", "gateway process, skill"),
        ("relay", "relay process"),
    ):
        cpu = summary[f"{path}_cpu_ms"]
        print(f"  CPU per call, {label}: {cpu['median']} ms (min {cpu['min']}, max {cpu['max']})")


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
        **summarize(runs),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    report(summary)


if __name__ == "__main__":
    main()
