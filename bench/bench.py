"""``make bench``: every scale benchmark in one command, one table, ``bench/results.json``.

Runs :mod:`bench_scale` (reconcile 1,000 / 5,000 / 20,000 Skills with Agents and Topologies
in proportion against a bare-client floor, hot-skill fan-out, restart; issue 43's goals as
ratios to their floors) and :mod:`bench_burst`
(500 Runs at once against the Job controller alone) on one control plane, prints one
table (min / median / max over the repeats, the load average around every run) and writes
the raw numbers with the machine's load and core count to ``--out``.

``--tiny`` (what ``make test`` runs) uses N = 20, 40 and 10 Runs, once: it proves the
scripts work, its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

import bench_burst as bb
import bench_scale as bs

from swarmkit_devcluster.testing import apply_crds, session_cluster

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 5000, 20000]
    )
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the reconcile benchmark")
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--runs-repeat", type=int, default=3, help="repeats of the Runs burst")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, once (make test)")
    parser.add_argument("--out", default=str(HERE / "results.json"))
    args = parser.parse_args()
    if args.tiny:
        args.sizes, args.repeat, args.runs, args.runs_repeat = [20, 40], 1, 10, 1
    started = time.monotonic()
    with session_cluster() as cluster:
        apply_crds(cluster)
        scale = asyncio.run(
            bs.bench(
                argparse.Namespace(sizes=args.sizes, repeat=args.repeat, timeout=args.timeout),
                cluster.kubeconfig,
            )
        )
        # Keep the reconcile numbers even if the burst fails (rewritten with both below).
        Path(args.out).write_text(json.dumps({"reconcile": scale}, indent=1))
        burst = asyncio.run(
            bb.bench(
                argparse.Namespace(runs=args.runs, repeat=args.runs_repeat, timeout=args.timeout),
                cluster.kubeconfig,
            )
        )
    machine = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "loadAtEnd": bs.load(),
        "wallSeconds": round(time.monotonic() - started, 1),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "tiny": args.tiny,
    }
    print()
    print(
        f"make bench: {machine['cores']} cores, load at end {machine['loadAtEnd']}, "
        f"{machine['wallSeconds']} s"
    )
    print(bs.table(scale["summary"], args.sizes))
    print(bs.goals_table(scale["goals"]))
    print(bb.table(burst["summary"]))
    Path(args.out).write_text(
        json.dumps({"machine": machine, "reconcile": scale, "runs": burst}, indent=1)
    )
    print(f"raw results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
