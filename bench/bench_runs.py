"""Benchmark Runs against the real local control plane (``make bench-runs``).

Starts a private local cluster and the operator as deployed (``python -m
swarmkit_operator``), then measures two things that must not be confused:

* **Series A, operator overhead**: ``--standin-runs`` (200) Runs at ``--standin-rate``
  (20/s) whose image is a *runner stand-in*: the process node maps
  ``bench.local/instant-runtime`` to a shell one-liner that writes a successful RunResult to
  the termination log and exits at once. No Python starts per Run, so what is timed is the
  operator (and the apiserver), not a saturated node.
* **Series B, the real runner**: ``--runner-runs`` (30) Runs of the real runner
  (``*swarmkit-runtime`` → ``python -m swarmkit_runner``, a replay-provider agent) at
  ``--runner-rate`` (1/s), a rate this 2-core node sustains: a runner pod costs about
  0.75 s of CPU (runner + the process node's container launcher; measured 2026-12-03 as
  node+pods CPU / Runs), and the control plane about 0.5 s per Run, so 2/s needs more than
  the 2 cores and measures a saturated node, as series A at 20/s does.

Per Run, from the same client process through watches (so both ends of an interval carry
the same watch-delivery delay):

1. **Run created → Job created**: the watch seeing the Run ADDED → the Job ADDED.
2. **pod finished → Run condition set**: the watch seeing the pod ``Succeeded`` → the Run's
   final ``Succeeded`` condition. (The Job controller marks the Job ``Complete`` only later,
   so "Job Complete → Run condition" is negative; it is in ``--json`` only.)

And **runner cold start** with ``--skills`` (20) granted skills (series C): the real runner
against a local OpenAI-compatible endpoint, from the runner process's start time
(``/proc/<pid>/stat``) to the first model request; ``--cold-starts`` (3) Runs one after
another per repeat.

Every series runs ``--repeats`` (3) times, each in a fresh namespace. Each run starts once
the operator, the control plane (kube-controller-manager included) and the node together
use under a quarter of a core over 3 s and the apiserver serves under 2 writes/s, leases
aside (at most 180 s; the wait is printed): otherwise a series B run right after a series A
run measures A's aftermath (200 pods being deleted, the rate-limited Job controller still
writing Job status, pod finalizers and Events) on the same 2 cores, which gave p95s of
0.1-2 s against 10-20 ms alone. Each run prints the apiserver's writes per Run (all
clients) and the operator's own. Before each run the machine's
load average is printed; beside each run the CPU the operator, the control plane
(apiserver + etcd) and the process node with its pods used during it. The summary table
gives, per measure, min / median / max over the repeats of p50, p95 and max: the last
column of each is the worst of three. ``--profile DIR`` also records the operator with
py-spy during each run (collapsed stacks, and the top frames printed). ``--trace`` runs the
operator with ``$SWARMKIT_RUNS_TRACE`` and cuts each interval where the operator's own
milestones fall (event received, reconcile started, Job POSTed, condition written: the
operator and the bench's watches read the same CLOCK_MONOTONIC), so a tail shows whether
it is watch delivery, queueing or API calls.

Usage: ``python bench/bench_runs.py [--repeats 3] [--json] [--profile DIR] [--trace]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", "bench"):
    sys.path.insert(0, str(REPO / sub))

from bench_reconcile import free_port, scrape, writes_by_resource  # noqa: E402
from bench_runs_cold import bench_cold_start, custom, obj, wait_ready  # noqa: E402
from bench_support import (  # noqa: E402
    Profile,
    apiserver_writes,
    busy_writes,
    cpu_seconds,
    diff_counts,
    fmt_spread,
    loadavg,
    machine,
    spread,
    summary,
    top_frames,
)

from swarmkit_devcluster.cluster import LocalCluster  # noqa: E402
from swarmkit_devcluster.kubeapi import KubeClient  # noqa: E402
from swarmkit_devcluster.testing import apply_crds, wait_for  # noqa: E402

INSTANT_IMAGE = "bench.local/instant-runtime:1"
RESULT = '{"outcome":"Succeeded","output":"ok","steps":1}'
# The process node gives each container its own /dev with the termination-log file in it.
IMAGE_MAP = {
    "images": [
        {
            "match": "bench.local/instant-runtime",
            "entrypoint": [
                "/bin/sh",
                "-c",
                f"printf '%s' '{RESULT}' > /dev/termination-log",
            ],
        }
    ],
    "includeBuiltins": True,
}
TARGET_MS = 100.0


class Operator:
    """The operator as deployed, in its own session; its log in the bench's workdir."""

    def __init__(self, kubeconfig: Path, workdir: Path, trace: bool = False) -> None:
        self.log = workdir / "operator.log"
        self.metrics_port = free_port()
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PYTHONUNBUFFERED": "1",
            "SWARMKIT_METRICS_PORT": str(self.metrics_port),
            "SWARMKIT_LIVENESS": "",
            **({"SWARMKIT_RUNS_TRACE": "1"} if trace else {}),
        }
        self.env = env
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "swarmkit_operator"],
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        wait_for(lambda: "swarmkit-operator started" in self.log.read_text(errors="replace"), 60)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Watcher(threading.Thread):
    """Calls ``on_event(monotonic time, object)`` for every ADDED/MODIFIED on ``path``."""

    def __init__(self, kubeconfig: Path, path: str, on_event: Callable[..., None]) -> None:
        super().__init__(daemon=True)
        self.client = KubeClient.from_kubeconfig(kubeconfig)
        self.path, self.on_event = path, on_event
        self.stopped = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        rv = self.client.get(self.path)["metadata"]["resourceVersion"]
        self.ready.set()
        while not self.stopped.is_set():
            for ev in self.client.watch(self.path, resource_version=rv, timeout_seconds=30):
                now = time.monotonic()
                o = ev.get("object") or {}
                rv = (o.get("metadata") or {}).get("resourceVersion", rv)
                if ev.get("type") in ("ADDED", "MODIFIED"):
                    self.on_event(now, o)
                if self.stopped.is_set():
                    return


def new_namespace(client: KubeClient, name: str) -> str:
    client.create("/api/v1/namespaces", {"metadata": {"name": name}})
    wait_for(lambda: client.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"), 30)
    return name


class Bench:
    """The cluster, the operator and the CPU/profile bookkeeping around each run."""

    def __init__(
        self,
        cluster: LocalCluster,
        operator: Operator,
        profile_dir: Path | None,
        egress: str = "declared",
    ) -> None:
        self.cluster, self.operator, self.profile_dir = cluster, operator, profile_dir
        self.egress = egress
        self.client = KubeClient.from_kubeconfig(cluster.kubeconfig)
        procs = cluster.state["procs"]
        self.control_plane = [procs[n]["pid"] for n in ("kube-apiserver", "etcd")]
        self.controllers = [procs[n]["pid"] for n in ("kube-controller-manager",) if n in procs]
        self.node = procs["process-node"]["pid"]

    def cpu(self) -> dict[str, float]:
        return {
            "operator": cpu_seconds(self.operator.proc.pid),
            "control_plane": sum(cpu_seconds(p) for p in self.control_plane),
            "node_and_pods": cpu_seconds(self.node, children=True),
        }

    def metrics(self) -> str:
        status, body = self.client.request_raw("GET", "/metrics")
        return body.decode() if status == 200 else ""

    def api_writes(self) -> dict[str, int]:
        return apiserver_writes(self.metrics())

    def wait_quiet(
        self, cores: float = 0.25, writes: float = 2.0, window: float = 3.0, limit: float = 180.0
    ) -> str:
        """Wait until the operator, the control plane (the controllers included) and the node
        with its pods together use less than ``cores`` over ``window`` seconds and the
        apiserver serves fewer than ``writes`` writes a second (leases aside): the previous
        series' aftermath is not measured as this one's latency. The Job controller's own
        client is rate-limited (20 requests/s), so after 200 Runs it keeps writing Job
        status, pod finalizers and Events for a while on little CPU. Returns what was
        waited, for the log."""
        began = time.monotonic()
        while True:
            before = sum(self.cpu().values()) + sum(cpu_seconds(p) for p in self.controllers)
            written = busy_writes(self.metrics())
            time.sleep(window)
            after = sum(self.cpu().values()) + sum(cpu_seconds(p) for p in self.controllers)
            rate = (after - before) / window
            write_rate = (busy_writes(self.metrics()) - written) / window
            waited = time.monotonic() - began
            if (rate < cores and write_rate < writes) or waited >= limit:
                return (
                    f"waited {waited:.0f} s for quiet ({rate:.2f} cores busy, "
                    f"{write_rate:.1f} writes/s)"
                )

    def latency_run(
        self, label: str, ns: str, image: str | None, runs: int, rate: float
    ) -> dict[str, Any]:
        """One repeat of series A or B in namespace ``ns``; returns its numbers."""
        c = self.client
        runtime = {"jobTtlSecondsAfterFinished": 3600, **({"image": image} if image else {})}
        c.create(
            custom(ns, "workspaces"),
            obj(
                "Workspace",
                "default",
                {
                    "modelProviders": [{"name": "replay", "type": "replay"}],
                    "runtime": runtime,
                    **bench_egress(self.egress),
                },
            ),
        )
        c.create(
            custom(ns, "agents"),
            obj("Agent", "fast", {"model": {"provider": "replay"}, "replay": [{"text": "ok"}]}),
        )
        c.create(
            custom(ns, "topologies"),
            obj(
                "Topology",
                "fast",
                {
                    "workspaceRef": {"name": "default"},
                    "agents": [{"name": "root", "agentRef": {"name": "fast"}, "role": "root"}],
                },
            ),
        )
        wait_ready(c, ns, "topologies", "fast")

        lock = threading.Lock()
        run_added: dict[str, float] = {}
        run_final: dict[str, float] = {}
        job_added: dict[str, float] = {}
        job_complete: dict[str, float] = {}
        pod_done: dict[str, float] = {}

        def on_run(now: float, o: dict[str, Any]) -> None:
            uid = o["metadata"]["uid"]
            with lock:
                run_added.setdefault(uid, now)
                for cond in (o.get("status") or {}).get("conditions") or ():
                    if cond.get("type") == "Succeeded" and cond.get("status") in ("True", "False"):
                        run_final.setdefault(uid, now)

        def on_job(now: float, o: dict[str, Any]) -> None:
            uid = (o["metadata"].get("labels") or {}).get("swarmkit.dev/run-uid")
            if not uid:
                return
            with lock:
                job_added.setdefault(uid, now)
                for cond in (o.get("status") or {}).get("conditions") or ():
                    if cond.get("type") == "Complete" and cond.get("status") == "True":
                        job_complete.setdefault(uid, now)

        def on_pod(now: float, o: dict[str, Any]) -> None:
            uid = (o["metadata"].get("labels") or {}).get("swarmkit.dev/run-uid")
            if uid and (o.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                with lock:
                    pod_done.setdefault(uid, now)

        watchers = [
            Watcher(self.cluster.kubeconfig, path, fn)
            for path, fn in (
                (custom(ns, "runs"), on_run),
                (f"/apis/batch/v1/namespaces/{ns}/jobs", on_job),
                (f"/api/v1/namespaces/{ns}/pods", on_pod),
            )
        ]
        for w in watchers:
            w.start()
            w.ready.wait(10)

        quiet = self.wait_quiet()
        load = loadavg()
        print(
            f"  {label}: {quiet}; load average before {load[0]} / {load[1]} / {load[2]}",
            flush=True,
        )
        profile = None
        if self.profile_dir is not None:
            profile = Profile(self.operator.proc.pid, self.profile_dir / f"{label}.txt")
        writes0, ours0 = self.api_writes(), writes_by_resource(scrape(self.operator.metrics_port))
        cpu0, start = self.cpu(), time.monotonic()
        for i in range(runs):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            c.create(
                custom(ns, "runs"),
                obj("Run", f"r-{i:04d}", {"topologyRef": {"name": "fast"}, "timeoutSeconds": 300}),
            )
        wait_for(
            lambda: len(run_final) >= runs, 300, message=lambda: f"{len(run_final)}/{runs} final"
        )
        wall = time.monotonic() - start
        cpu1 = self.cpu()
        for w in watchers:
            w.stopped.set()
        # The writes each Run costs the apiserver, from every client (the Runs' own trailing
        # writes, such as the pods' outcome finalizers, included: counted once it is quiet).
        self.wait_quiet()
        writes = diff_counts(self.api_writes(), writes0)
        ours = diff_counts(writes_by_resource(scrape(self.operator.metrics_port)), ours0)
        with lock:
            created = [job_added[u] - run_added[u] for u in run_added if u in job_added]
            from_pod = [run_final[u] - pod_done[u] for u in run_final if u in pod_done]
            from_job = [run_final[u] - job_complete[u] for u in run_final if u in job_complete]
        result: dict[str, Any] = {
            "label": label,
            "runs": runs,
            "rate_per_s": rate,
            "loadavg_before": load,
            "quiet_before": quiet,
            "wall_s": round(wall, 1),
            "cpu_s": {k: round(cpu1[k] - cpu0[k], 2) for k in cpu0},
            "run_created_to_job_created": summary(created),
            "pod_finished_to_run_condition": summary(from_pod),
            "job_complete_to_run_condition": summary(from_job),
            "api_writes_per_run": round(sum(writes.values()) / runs, 1),
            "api_writes": writes,
            "operator_writes_per_run": round(sum(ours.values()) / runs, 2),
            "operator_writes": ours,
        }
        if "SWARMKIT_RUNS_TRACE" in self.operator.env:
            marks = operator_traces(self.operator.log)
            with lock:
                seen = {
                    "run_added": run_added,
                    "job_added": job_added,
                    "pod_done": pod_done,
                    "run_final": run_final,
                }
                result["segments"] = segments(seen, marks)
            print("    " + segments_line(result["segments"]), flush=True)
        if profile is not None:
            result["profile"] = str(profile.stop())
            result["profile_self"] = top_frames(Path(result["profile"]))
            path = Path(result["profile"])
            result["profile_operator"] = top_frames(path, 10, "swarmkit_operator/")
            result["profile_kopf"] = top_frames(path, 6, "kopf/")
        print("    " + run_line(result), flush=True)
        return result


def bench_egress(policy: str) -> dict[str, Any]:
    """The Workspace fields of ``--egress``: ``declared`` declares an HTTP MCP server (by
    name) and an HTTP tool (by address), which no agent uses, so each Run's start resolves
    them and POSTs a NetworkPolicy with two destinations; ``none`` renders no policy."""
    if policy == "none":
        return {"egress": {"policy": "none"}}
    return {
        "mcpServers": [{"id": "kb", "transport": "http", "url": "http://localhost:9000/mcp"}],
        "tools": [
            {
                "name": "ticket",
                "description": "File a ticket.",
                "http": {"url": "http://127.0.0.1:9001/tickets"},
            }
        ],
        "egress": {"allow": [{"cidr": "10.20.0.0/16", "ports": [5432]}]},
    }


#: ``--trace``: each interval cut where the operator's milestones fall (the bench's watches
#: and the operator share CLOCK_MONOTONIC): (name, from, to), from/to a bench watch
#: (``run_added``, ``job_added``, ``pod_done``, ``run_final``) or an operator milestone.
SEGMENTS = (
    ("Run ADDED: bench watch → operator event", "run_added", "kicked"),
    ("operator: event → reconcile starts", "kicked", "reconcile_start"),
    ("operator: target resolved", "reconcile_start", "resolved"),
    ("operator: egress plan (resolve + render)", "resolved", "egress_planned"),
    ("operator: NetworkPolicy POSTed", "egress_planned", "policy_created"),
    ("operator: bundle + Job POSTed", "policy_created", "job_created"),
    ("Job ADDED: POST returned → bench watch", "job_created", "job_added"),
    ("pod done: bench watch → operator event", "pod_done", "pod_done_seen"),
    ("operator: pod event → condition written", "pod_done_seen", "condition_final"),
    ("Run final: written → bench watch", "condition_final", "run_final"),
)


def operator_traces(log: Path) -> dict[str, dict[str, float]]:
    """uid → the operator's milestones (the last ``trace <uid> <json>`` line of each)."""
    out: dict[str, dict[str, float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):  # the operator's JSON log format
            try:
                line = str(json.loads(line).get("message", ""))
            except ValueError:
                continue
        _, sep, rest = line.partition("trace ")
        uid, _, doc = rest.partition(" ")
        if sep and doc.startswith("{"):
            try:
                out[uid] = json.loads(doc)
            except ValueError:
                continue
    return out


def segments(
    seen: dict[str, dict[str, float]], marks: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Each of :data:`SEGMENTS` over the Runs of this series (those the bench saw added)."""
    out: dict[str, dict[str, float]] = {}
    for name, start, end in SEGMENTS:
        values = []
        for uid in seen["run_added"]:
            m = marks.get(uid, {})
            a = seen[start].get(uid) if start in seen else m.get(start)
            b = seen[end].get(uid) if end in seen else m.get(end)
            if a is not None and b is not None:
                values.append(b - a)
        out[name] = summary(values)
    return out


def segments_line(segs: dict[str, dict[str, float]]) -> str:
    return "segments p50/p95/max ms: " + "; ".join(
        f"{name} {v['p50_ms']}/{v['p95_ms']}/{v['max_ms']}" for name, v in segs.items()
    )


def run_line(r: dict[str, Any]) -> str:
    c, p = r["run_created_to_job_created"], r["pod_finished_to_run_condition"]
    cpu = r["cpu_s"]
    return (
        f"wall {r['wall_s']} s; CPU: operator {cpu['operator']} s, apiserver+etcd "
        f"{cpu['control_plane']} s, node+pods {cpu['node_and_pods']} s; Run→Job p50/p95/max "
        f"{c['p50_ms']}/{c['p95_ms']}/{c['max_ms']} ms; pod finished→condition "
        f"{p['p50_ms']}/{p['p95_ms']}/{p['max_ms']} ms; apiserver writes per Run "
        f"{r['api_writes_per_run']} ("
        + ", ".join(f"{k} {v / r['runs']:.2g}" for k, v in list(r["api_writes"].items())[:12])
        + f"); the operator's {r['operator_writes_per_run']} ("
        + ", ".join(f"{k} {v / r['runs']:.2g}" for k, v in r["operator_writes"].items())
        + ")"
    )


SERIES = {
    "A": "runner stand-in (exits at once)",
    "B": "real runner (python -m swarmkit_runner)",
}
MEASURES = {
    "run_created_to_job_created": "Run created → Job created",
    "pod_finished_to_run_condition": "pod finished → Run condition set",
}


def report(results: dict[str, list[dict[str, Any]]], cold: list[dict[str, Any]]) -> None:
    """Readable tables on stdout (``--json`` prints the raw results bench/record.py keeps)."""
    print()
    print("Per run (load average 1/5/15 min before it; CPU used during it):")
    print()
    print(
        "| series | run | load before | wall | operator CPU | apiserver+etcd CPU | node+pods CPU "
        "| Run→Job p50 / p95 / max | pod finished→condition p50 / p95 / max |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for key, runs in results.items():
        for i, r in enumerate(runs, 1):
            c, p, cpu = (
                r["run_created_to_job_created"],
                r["pod_finished_to_run_condition"],
                r["cpu_s"],
            )
            load = " / ".join(str(x) for x in r["loadavg_before"])
            print(
                f"| {key} | {i} | {load} | {r['wall_s']} s | {cpu['operator']} s "
                f"| {cpu['control_plane']} s | {cpu['node_and_pods']} s "
                f"| {c['p50_ms']} / {c['p95_ms']} / {c['max_ms']} ms "
                f"| {p['p50_ms']} / {p['p95_ms']} / {p['max_ms']} ms |"
            )
    print()
    print("Min / median / max over the repeats (the max is the worst of them):")
    print()
    print("| series | measure | p50 | p95 | max | target (p95) |")
    print("|---|---|---|---|---|---|")
    for key, runs in results.items():
        if not runs:
            continue
        head = f"{key}: {SERIES[key]}, {runs[0]['runs']} runs at {runs[0]['rate_per_s']:g}/s"
        for measure, title in MEASURES.items():
            cells = [
                fmt_spread(spread([r[measure][f] for r in runs])) for f in ("p50_ms", "p95_ms")
            ]
            cells.append(fmt_spread(spread([r[measure]["max_ms"] for r in runs])))
            print(f"| {head} | {title} | {' | '.join(cells)} | < {TARGET_MS:g} ms |")
    if cold:
        per = [c["cold_start"] for c in cold]
        skills = cold[0]["granted_skills"]
        n = sum(p["n"] for p in per)
        print(
            f"| C: real runner, {skills} granted skills ({n} cold starts) | process start → "
            f"first model request | {fmt_spread(spread([p['p50_ms'] for p in per]))} "
            f"| {fmt_spread(spread([p['p95_ms'] for p in per]))} "
            f"| {fmt_spread(spread([p['max_ms'] for p in per]))} | < 800 ms |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each series")
    parser.add_argument("--standin-runs", type=int, default=200)
    parser.add_argument("--standin-rate", type=float, default=20.0, help="Runs per second")
    parser.add_argument("--runner-runs", type=int, default=30)
    parser.add_argument("--runner-rate", type=float, default=1.0, help="Runs per second")
    parser.add_argument("--cold-starts", type=int, default=3, help="per repeat")
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--series", default="ABC", help="which series to run (default ABC)")
    parser.add_argument("--profile", type=Path, help="py-spy the operator into this directory")
    parser.add_argument("--json", action="store_true", help="also print the raw results")
    parser.add_argument(
        "--egress",
        choices=("declared", "none"),
        default="declared",
        help="the bench Workspace's egress policy (declared: two destinations and an allow)",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="cut each interval at the operator's milestones ($SWARMKIT_RUNS_TRACE)",
    )
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="swarmkit-bench-runs-"))
    image_map = workdir / "images.yaml"
    image_map.write_text(json.dumps(IMAGE_MAP))
    print(f"machine: {machine()}", flush=True)
    print(f"starting a private cluster in {workdir} ...", flush=True)
    began = time.monotonic()
    cluster = LocalCluster(workdir / "cluster", image_map=str(image_map), verbose=False).start()
    operator = None
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in SERIES if k in args.series}
    cold: list[dict[str, Any]] = []
    try:
        apply_crds(cluster)
        operator = Operator(cluster.kubeconfig, workdir, trace=args.trace)
        print(f"operator up (pid {operator.proc.pid}, log {operator.log})", flush=True)
        bench = Bench(cluster, operator, args.profile, args.egress)
        plan = {
            "A": (INSTANT_IMAGE, args.standin_runs, args.standin_rate),
            "B": (None, args.runner_runs, args.runner_rate),
        }
        for rep in range(1, args.repeats + 1):
            for key in results:
                image, runs, rate = plan[key]
                ns = new_namespace(bench.client, f"bench-{key.lower()}-{rep}")
                print(f"series {key} ({SERIES[key]}), repeat {rep}: {runs} runs at {rate:g}/s")
                results[key].append(bench.latency_run(f"{key}-{rep}", ns, image, runs, rate))
            if "C" in args.series:
                ns = new_namespace(bench.client, f"bench-c-{rep}")
                quiet = bench.wait_quiet()
                load = loadavg()
                print(
                    f"series C (cold start, {args.skills} skills), repeat {rep}: {quiet}; "
                    f"load {load}"
                )
                one = bench_cold_start(bench.client, ns, args.cold_starts, args.skills)
                one["loadavg_before"] = load
                one["quiet_before"] = quiet
                print(f"    {one['cold_start']}", flush=True)
                cold.append(one)
    finally:
        if operator is not None:
            operator.stop()
        cluster.stop()
    report(results, cold)
    print(f"\nmachine after: {machine()}; whole benchmark {time.monotonic() - began:.0f} s")
    if args.profile:
        for runs in results.values():
            for r in runs:
                print(f"operator profile {r['label']} ({r.get('profile')}), share of samples:")
                for title, key in (
                    ("self", "profile_self"),
                    ("swarmkit_operator", "profile_operator"),
                    ("kopf", "profile_kopf"),
                ):
                    top = "; ".join(f"{f} {share}%" for f, share in r.get(key, []))
                    print(f"  {title}: {top}")
    if args.json:
        print(json.dumps({"series": results, "cold": cold, "machine": machine()}, indent=2))


if __name__ == "__main__":
    main()
