"""Served-topology benchmarks (``make bench-serve``); prints the numbers.

1. Served-task overhead: the same one-agent topology (replay provider, 5 granted skills, so
   the catalog is built like in a real run) run in-process with
   :func:`swarmkit_runner.runner.execute` versus as a served A2A task
   (``python -m swarmkit_runner serve`` subprocess; one blocking ``SendMessage`` over HTTP
   with a bearer token per task, sequential). p50/p95 of each and the difference.
2. Sustained throughput of one replica: ``--clients`` concurrent callers (each a loop of
   blocking ``SendMessage``) against one serve process with ``maxConcurrentTasks`` =
   clients, for ``--seconds``; completed tasks per second (and any refusals).

Every measurement is repeated ``--runs`` times (default 3) and reported as min/median/max;
the load average is printed before and after.

Usage: ``python bench/bench_serve.py [--runs 3] [--tasks 200] [--clients 8] [--seconds 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.bundles import (  # noqa: E402
    BundleLayout,
    agent,
    bundle,
    replay_provider,
    skill,
    topology_of,
    write_bundle,
)
from tests.support.served import ServedRunner  # noqa: E402

from swarmkit_api.bundle import RunBundle  # noqa: E402
from swarmkit_runner.audit import AuditLog  # noqa: E402
from swarmkit_runner.paths import RunnerPaths  # noqa: E402
from swarmkit_runner.runner import execute  # noqa: E402
from swarmkit_runner.secrets import SecretStore  # noqa: E402

TOKEN = "bench-token-0123456789"
SKILLS = 5


def served_bundle() -> RunBundle:
    skills = [
        skill(f"fact-{i}", instructions=f"# Fact {i}\nThe answer is {i}.") for i in range(SKILLS)
    ]
    root = agent(
        "answerer",
        provider="replay",
        skills=[s.name for s in skills],
        replay=[{"text": "the served answer is 42"}],
    )
    return bundle(
        agents=[root],
        skills=skills,
        providers=[replay_provider()],
        topology=topology_of("oracle", "answerer", description="Answers with 42."),
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


async def in_process(b: RunBundle, layout: BundleLayout, tasks: int) -> list[float]:
    paths = RunnerPaths.resolve(
        str(layout.bundle_dir), str(layout.skills_dir), str(layout.scratch), None
    )
    secrets = SecretStore({})
    out: list[float] = []
    for i in range(tasks):
        run = b.run.model_copy(update={"uid": str(uuid.uuid4()), "input": f"question {i}"})
        one = b.model_copy(update={"run": run})
        audit = AuditLog(run.uid, run.uid, secrets, sink=io.StringIO())
        t0 = time.perf_counter()
        result = await execute(one, paths, audit, secrets)
        out.append(time.perf_counter() - t0)
        assert result.outcome == "Succeeded", result
    return out


def send_body(i: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": f"question {i}"}],
            }
        },
    }


async def served_latency(served: ServedRunner, tasks: int) -> list[float]:
    headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
    out: list[float] = []
    async with httpx.AsyncClient(headers=headers, timeout=60) as client:
        for i in range(tasks):
            t0 = time.perf_counter()
            response = await client.post(f"{served.base_url}/a2a", json=send_body(i))
            out.append(time.perf_counter() - t0)
            state = response.json()["result"]["task"]["status"]["state"]
            assert state == "TASK_STATE_COMPLETED", response.text
    return out


async def throughput(served: ServedRunner, clients: int, seconds: float) -> tuple[float, int]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    done = 0
    refused = 0
    deadline = time.perf_counter() + seconds

    async def caller(n: int) -> None:
        nonlocal done, refused
        async with httpx.AsyncClient(headers=headers, timeout=60) as client:
            i = 0
            while time.perf_counter() < deadline:
                i += 1
                response = await client.post(f"{served.base_url}/a2a", json=send_body(i))
                if response.status_code == 429:
                    refused += 1
                    continue
                state = response.json()["result"]["task"]["status"]["state"]
                assert state == "TASK_STATE_COMPLETED", response.text
                done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(caller(n) for n in range(clients)))
    return done / (time.perf_counter() - t0), refused


def summary(values: list[float], unit: str = "ms", scale: float = 1000.0) -> str:
    return (
        f"min {min(values) * scale:.2f} {unit}, median {statistics.median(values) * scale:.2f} "
        f"{unit}, max {max(values) * scale:.2f} {unit}"
    )


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    print(f"load average before: {load()}")
    b = served_bundle()
    results: dict[str, list[float]] = {
        "inproc_p50": [],
        "inproc_p95": [],
        "served_p50": [],
        "served_p95": [],
        "overhead_p50": [],
        "overhead_p95": [],
        "tasks_per_s": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        layout = write_bundle(b, Path(tmp))
        for run in range(1, args.runs + 1):
            await in_process(b, layout, 20)  # warm-up (imports, caches)
            local = await in_process(b, layout, args.tasks)
            with ServedRunner(
                layout, tokens=[TOKEN], max_concurrent=args.clients, drain_seconds=5
            ) as served:
                await served_latency(served, 20)  # warm-up
                remote = await served_latency(served, args.tasks)
                rate, refused = await throughput(served, args.clients, args.seconds)
            row = {
                "inproc_p50": pct(local, 0.5),
                "inproc_p95": pct(local, 0.95),
                "served_p50": pct(remote, 0.5),
                "served_p95": pct(remote, 0.95),
            }
            row["overhead_p50"] = row["served_p50"] - row["inproc_p50"]
            row["overhead_p95"] = row["served_p95"] - row["inproc_p95"]
            for key, value in row.items():
                results[key].append(value)
            results["tasks_per_s"].append(rate)
            print(
                f"run {run}: in-process p50 {row['inproc_p50'] * 1000:.2f} ms p95 "
                f"{row['inproc_p95'] * 1000:.2f} ms; served p50 {row['served_p50'] * 1000:.2f} ms "
                f"p95 {row['served_p95'] * 1000:.2f} ms; {rate:.1f} tasks/s with "
                f"{args.clients} clients ({refused} refused); load {load()}"
            )
    print()
    print(f"tasks per measurement: {args.tasks} sequential; throughput {args.seconds:g} s")
    for key, label in (
        ("inproc_p50", "in-process run, p50"),
        ("inproc_p95", "in-process run, p95"),
        ("served_p50", "served task (HTTP round trip), p50"),
        ("served_p95", "served task (HTTP round trip), p95"),
        ("overhead_p50", "served overhead, p50"),
        ("overhead_p95", "served overhead, p95"),
    ):
        print(f"{label:40s} {summary(results[key])}")
    print(
        f"{'sustained tasks/s, one replica':40s} {summary(results['tasks_per_s'], 'tasks/s', 1.0)}"
    )
    print(f"load average after: {load()}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
