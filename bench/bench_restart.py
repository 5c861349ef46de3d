"""Benchmark: the operator's restart alone, at two (or three) git revisions, with its CPU time.

``bench_ab.py`` measures a restart as one figure inside a whole ``bench_scale`` run (an
apply of N Skills, a fan-out, a floor), once per run. This measures only the restart, many
times per revision, so that a difference of a tenth of a second shows above the noise:

1. Per revision (``--a``, ``--b``, optionally ``--c``; ``git archive`` into a scratch
   directory, byte-compiled as the image is, first on ``PYTHONPATH``, as ``bench_ab``
   does): a fresh namespace with ``bench_scale``'s objects at ``--size`` N (a Workspace,
   N Skills, N/5 Agents, N/50 Topologies), reconciled by that revision's operator until
   every object is Ready and the operator has written nothing for 2 s.
2. ``--repeat`` restarts of that revision's operator over them: wall time until /healthz
   answers and until a Skill created right after the start is Ready (the first reconcile,
   ``bench_scale``'s ``restartFirstReconcileSeconds``), the operator's CPU time (user +
   system, all threads) at that moment, and its status writes to the unchanged objects.
3. The floor, each restart: a fresh interpreter importing the API client and LISTing the
   namespace's kinds and its ConfigMaps' metadata as the operator's start-up does
   (``bench_scale.bare_restart``); the watch streams the operator opened and
   how many had to LIST (its log); once, the cost of one more LIST (an empty kind).

The revisions run one after the other (each on its own namespace: an operator LISTs every
namespace, and objects last written by another revision would be rewritten; the next
revision starts once the namespace of the last is gone). CPU time is
the robust comparison on a loaded machine; the load average is printed with each figure.
``--profile DIR`` records each restart with py-spy (``--format raw``, all threads, from the
start until the probe is Ready; ``--settled``: until 3 s later). Memory: the operator's RSS
at the first reconcile and its peak ``--hold`` seconds later (default 3; the background
checks of every listed object run after the first reconcile, ~30 s at 20,000 Skills: give
``--hold 40`` to see their peak). ``--json`` prints the results as one JSON document, last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_reconcile as br
from bench_ab import _tree
from bench_scale import (
    Watched,
    _quiet_writes,
    apiserver_metrics,
    bare_restart,
    load,
    manifests,
    namespaces_gone,
    start_operator,
    wait_up,
)
from bench_support import Profile, wait_quiet_apiserver

from swarmkit_devcluster.testing import apply_crds, session_cluster
from swarmkit_operator import k8s
from swarmkit_operator.indexes import Resource, list_all


async def settle(tree: Path, kubeconfig: Path, ns: str, n: int, log: Path) -> None:
    """``ns`` with ``bench_scale``'s objects at size ``n``, all Ready, written by ``tree``."""
    docs = manifests(n)
    total = len(docs) + 1
    proc, port, live = start_operator(kubeconfig, log, tree)
    watched = None
    try:
        await wait_up(proc, None, live, log, interval=0.02)
        await br.create_namespace(ns)
        watched = Watched(kubeconfig, ns)
        await k8s.create_custom("workspaces", ns, br.WORKSPACE)
        await br.bounded(br.creator(ns, d) for d in docs)
        await watched.wait(lambda: watched.all_ready(total), 900, f"{total} objects Ready")
        await _quiet_writes(port, limit=240.0)
    finally:
        if watched is not None:
            watched.stop()
        br.stop(proc)


async def restart(
    tree: Path,
    kubeconfig: Path,
    ns: str,
    log: Path,
    profile: Path | None,
    settled: bool = False,
    hold: float = 3.0,
) -> dict[str, Any]:
    """One restart of ``tree``'s operator over ``ns``: what ``bench_scale`` times, CPU, and
    memory (RSS at the first reconcile; the peak ``hold`` seconds later: the checks of every
    listed object run in the background after it)."""
    r: dict[str, Any] = {"loadBefore": load()}
    r["listSeconds"] = await asyncio.to_thread(bare_restart, kubeconfig, ns)
    name = f"after-restart-{secrets.token_hex(3)}"
    probe = dict(manifests(2)[0], metadata={"name": name})
    started = time.monotonic()
    proc, port, live = start_operator(kubeconfig, log, tree)
    spy = Profile(proc.pid, profile, rate=250) if profile is not None else None
    try:
        await k8s.create_custom("skills", ns, probe)
        await wait_up(proc, None, live, log, interval=0.02)
        r["upSeconds"] = round(time.monotonic() - started, 3)
        r["upCpuSeconds"] = br.cpu_seconds(proc.pid)

        async def ready() -> bool:
            skill = await k8s.get_custom("skills", ns, name)
            conds = ((skill or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        await br.wait_until(ready, 120, 0.02, "a skill created after the restart Ready")
        r["firstReconcileSeconds"] = round(time.monotonic() - started, 3)
        r["cpuSeconds"] = br.cpu_seconds(proc.pid)
        r["rssFirstReconcileMB"] = round(br.rss_mb(proc.pid)[0], 1)
        if spy is not None and not settled:
            r["profile"] = str(spy.stop())
            spy = None
        await asyncio.sleep(hold)
        r["peakRssMB"] = round(br.rss_mb(proc.pid)[1], 1)
        if spy is not None:
            r["profile"] = str(spy.stop())
            spy = None
        text = br.scrape(port)
        after = br.writes_by_resource(text)
        r["statusWrites"] = sum(v for k, v in after.items() if k.startswith("PATCH")) - 1
        r["requestsBy"] = requests_by(text)
        r["cpuSecondsSettled"] = br.cpu_seconds(proc.pid)
        r.update(streams(log))
    finally:
        if spy is not None:
            spy.stop()
        br.stop(proc)
    await k8s.request("DELETE", k8s.custom_path("skills", ns, name))
    r["loadAfter"] = load()
    return r


FIELDS = (
    "upSeconds",
    "upCpuSeconds",
    "firstReconcileSeconds",
    "cpuSeconds",
    "cpuSecondsSettled",
    "rssFirstReconcileMB",
    "peakRssMB",
    "listSeconds",
    "statusWrites",
    "streams",
    "listing",
)


async def one_more_list(resource: str, times: int = 20) -> dict[str, float]:
    """What one more LIST stream costs a start-up: an empty kind LISTed cluster-wide (what a
    new kind's stream and index add with no objects of it) by the operator's own client,
    ``times`` times in a row; median wall and CPU (this process, every thread) per LIST."""
    walls, cpus = [], []
    for _ in range(times):
        wall, cpu = time.monotonic(), time.process_time()
        await list_all(Resource("swarmkit.dev", "v1alpha1", resource), [])
        walls.append(time.monotonic() - wall)
        cpus.append(time.process_time() - cpu)
    return {
        "wallMs": round(statistics.median(walls) * 1000, 2),
        "cpuMs": round(statistics.median(cpus) * 1000, 2),
    }


def requests_by(metrics: str) -> dict[str, int]:
    """The operator's API requests so far by ``"VERB resource"`` (every verb, reads too)."""
    out: dict[str, int] = {}
    for line in metrics.splitlines():
        if line.startswith("swarmkit_api_requests_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
            key = f"{labels.get('verb')} {labels.get('resource')}"
            out[key] = out.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


def streams(log: Path) -> dict[str, int]:
    """The watch streams the operator's last start opened, and how many of them had to LIST
    (not started from the start-up's own listing), from its ``watching ...`` log line."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if "watching " in line]
    if not lines:
        return {"streams": 0, "listing": 0}
    opened = lines[-1].split("watching ", 1)[1].split(", ")
    return {
        "streams": len(opened),
        "listing": sum(1 for o in opened if not o.endswith("from the start-up listing")),
    }


def _mmm(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


async def bench(args: argparse.Namespace, kubeconfig: Path, scratch: Path) -> dict[str, Any]:
    k8s.configure(workers=br.CONCURRENCY, kubeconfig=str(kubeconfig))
    revs = {"a": args.a, **({"b": args.b} if args.b else {}), **({"c": args.c} if args.c else {})}
    commits = {key: _tree(rev, scratch / key) for key, rev in revs.items()}
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in revs}
    try:
        for key in revs:
            ns = f"bench-restart-{key}-{secrets.token_hex(3)}"
            log = scratch / f"{key}.log"
            await settle(scratch / key, kubeconfig, ns, args.size, log)
            for i in range(args.repeat):
                await asyncio.to_thread(wait_quiet_apiserver, apiserver_metrics(kubeconfig))
                profile = (
                    Path(args.profile) / f"restart-{key}-{commits[key]}-{i}.txt"
                    if args.profile
                    else None
                )
                r = await restart(
                    scratch / key, kubeconfig, ns, log, profile, args.settled, args.hold
                )
                runs[key].append(r)
                print(
                    f"  {key}={commits[key]} [{i + 1}/{args.repeat}] first reconcile "
                    f"{r['firstReconcileSeconds']} s, cpu {r['cpuSeconds']:.2f} s "
                    f"(up {r['upSeconds']} s, cpu {r['upCpuSeconds']:.2f} s), "
                    f"LIST floor {r['listSeconds']} s, writes {r['statusWrites']}, "
                    f"RSS {r['rssFirstReconcileMB']} MB, peak {r['peakRssMB']} MB, "
                    f"load {r['loadBefore']} -> {r['loadAfter']}",
                    file=sys.stderr,
                    flush=True,
                )
            await br.delete_namespace(ns)
            # The next revision's operator watches the cluster: it must not find these.
            await namespaces_gone((ns,), 2 * args.size)
        extra = await one_more_list("evalsets")
        print(f"  one more LIST (an empty kind): {extra}", file=sys.stderr)
    finally:
        await k8s.close_connections()
        k8s.shutdown()
    return {
        "size": args.size,
        "repeat": args.repeat,
        "revisions": {k: {"rev": revs[k], "commit": commits[k]} for k in revs},
        "summary": {k: {f: _mmm([float(r[f]) for r in runs[k]]) for f in FIELDS} for k in runs},
        "oneMoreList": extra,
        "runs": runs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--a", required=True, help="revision A (e.g. the code before a change)")
    parser.add_argument("--b", default="HEAD", help="revision B (default HEAD; '' for A alone)")
    parser.add_argument("--c", help="a third revision (e.g. the change's base)")
    parser.add_argument("--size", type=int, default=1000, help="Skills (bench_scale's N)")
    parser.add_argument("--repeat", type=int, default=5, help="restarts per revision")
    parser.add_argument("--profile", help="py-spy each restart into this directory")
    parser.add_argument(
        "--settled", action="store_true", help="profile until 3 s after the first reconcile"
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=3.0,
        help="seconds after the first reconcile before writes and peak RSS are read (the "
        "background checks of every listed object take ~30 s at 20,000 Skills)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON, last")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="swarmkit-bench-restart-"))
    try:
        with session_cluster() as cluster:
            apply_crds(cluster)
            result = asyncio.run(bench(args, cluster.kubeconfig, scratch))
    finally:
        logs = Path(tempfile.gettempdir()) / "bench-restart-logs"
        logs.mkdir(exist_ok=True)
        for log in scratch.glob("*.log"):
            shutil.copy(log, logs / log.name)
        shutil.rmtree(scratch, ignore_errors=True)
    for key, s in result["summary"].items():
        print(f"{key} = {result['revisions'][key]['commit']}:", file=sys.stderr)
        for f, v in s.items():
            print(f"  {f:22} {v['min']:8} {v['median']:8} {v['max']:8}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
