"""A burst of Runs against the real local control plane (part of ``make bench``).

1. With the operator running, create ``--runs`` (default 500) Runs of a one-turn replay
   Agent at once from a 16-way client. Watches on Jobs, pods and Runs timestamp, per Run:
   create → its Job exists, its pod finished → its ``Succeeded`` condition, and the time
   until all of them are Succeeded.
2. The floor: stop the operator and give the Job controller alone the same Jobs (the
   operator's Job specs, renamed, without owner or run labels, against the same bundle
   ConfigMaps): the time until all their pods Succeeded, and until every Job is Complete.

The Workspace requests 100m CPU per runner pod, so the scheduler runs at most 20 at a time
on a 2-CPU process node (both for the Runs and for the floor). Uses ``$SWARMKIT_KUBECONFIG``
if set, else a private cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import secrets
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import bench_reconcile as br
import bench_scale as bs

from swarmkit_devcluster.testing import apply_crds, session_cluster
from swarmkit_operator import k8s

AGENT = {
    "apiVersion": br.GROUP_VERSION,
    "kind": "Agent",
    "metadata": {"name": "burst"},
    "spec": {
        "workspaceRef": {"name": "default"},
        "model": {"provider": "replay"},
        "systemPrompt": "You answer at once.",
        "replay": [{"text": "done"}],
    },
}
WORKSPACE = {
    **br.WORKSPACE,
    "spec": {
        **br.WORKSPACE["spec"],
        "runtime": {
            "jobTtlSecondsAfterFinished": 3600,
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        },
    },
}


class Watcher:
    """Background watches (``kubernetes`` client) timestamping what the benchmark waits for."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        from kubernetes import client, config

        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.ns = namespace
        self.job_seen: dict[str, float] = {}  # run name → first time its Job was seen
        self.pod_done: dict[str, float] = {}  # job name → pod terminal
        self.job_complete: dict[str, float] = {}  # job name → Complete
        self.run_done: dict[str, float] = {}  # run name → Succeeded True/False
        self.stop = threading.Event()
        core, batch = client.CoreV1Api(self.api), client.BatchV1Api(self.api)
        custom = client.CustomObjectsApi(self.api)
        self.threads = [
            threading.Thread(
                target=self._loop, args=(batch.list_namespaced_job, self._job), daemon=True
            ),
            threading.Thread(
                target=self._loop, args=(core.list_namespaced_pod, self._pod), daemon=True
            ),
            threading.Thread(
                target=self._loop,
                args=(
                    lambda ns, **kw: custom.list_namespaced_custom_object(
                        "swarmkit.dev", "v1alpha1", ns, "runs", **kw
                    ),
                    self._run,
                ),
                daemon=True,
            ),
        ]
        for t in self.threads:
            t.start()

    def _loop(self, lister: Any, handle: Any) -> None:
        from kubernetes import watch

        while not self.stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(lister, self.ns, timeout_seconds=5):
                    handle(ev["object"], time.monotonic())
                    if self.stop.is_set():
                        break
            except Exception:
                time.sleep(0.2)
            finally:
                w.stop()

    def _job(self, job: Any, now: float) -> None:
        labels = job.metadata.labels or {}
        run = labels.get("swarmkit.dev/run")
        if run:
            self.job_seen.setdefault(run, now)
        for c in (job.status.conditions or []) if job.status else []:
            if c.type == "Complete" and c.status == "True":
                self.job_complete.setdefault(job.metadata.name, now)

    def _pod(self, pod: Any, now: float) -> None:
        if pod.status and pod.status.phase in ("Succeeded", "Failed"):
            job = (pod.metadata.labels or {}).get("job-name", "")
            self.pod_done.setdefault(job, now)

    def _run(self, run: dict[str, Any], now: float) -> None:
        for c in (run.get("status") or {}).get("conditions") or ():
            if c["type"] == "Succeeded" and c["status"] in ("True", "False"):
                self.run_done.setdefault(run["metadata"]["name"], now)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)
        self.api.close()


def pct(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 1)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "max": round(ordered[-1] * 1000, 1)}


def floor_job(job: dict[str, Any], name: str) -> dict[str, Any]:
    """The operator's Job as a plain Job: renamed, no owner, no run labels, no finalizer."""
    spec = copy.deepcopy(job["spec"])
    spec.pop("selector", None)
    meta = spec["template"].setdefault("metadata", {})
    meta.pop("finalizers", None)
    meta["labels"] = {"bench": "floor"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"bench": "floor"}},
        "spec": spec,
    }


async def one(runs: int, kubeconfig: Path, timeout: float) -> dict[str, Any]:
    ns = f"bench-burst-{secrets.token_hex(3)}"
    log = Path(br.tempfile.mkdtemp(prefix="bench-burst-")) / "operator.log"
    r: dict[str, Any] = {"runs": runs, "loadBefore": bs.load(), "log": str(log)}
    proc, port, live = bs.start_operator(kubeconfig, log)
    watcher: Watcher | None = None
    try:
        await bs.wait_up(proc, port, live, log)
        await br.create_namespace(ns)
        await k8s.create_custom("workspaces", ns, WORKSPACE)
        await k8s.create_custom("agents", ns, AGENT)

        async def agent_ready() -> bool:
            a = await k8s.get_custom("agents", ns, "burst")
            conds = ((a or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        await br.wait_until(agent_ready, 300, 0.1, "the burst agent Ready")
        watcher = Watcher(kubeconfig, ns)
        await asyncio.sleep(1)  # the watches are established
        created: dict[str, float] = {}

        def make(i: int) -> Any:
            name = f"burst-{i:04d}"
            body = {
                "apiVersion": br.GROUP_VERSION,
                "kind": "Run",
                "metadata": {"name": name},
                "spec": {"agentRef": {"name": "burst"}, "input": "go", "timeoutSeconds": 600},
            }

            async def go() -> None:
                await k8s.create_custom("runs", ns, body)
                created[name] = time.monotonic()

            return go

        started = time.monotonic()
        await br.bounded(make(i) for i in range(runs))
        r["createSeconds"] = round(time.monotonic() - started, 2)
        w = watcher

        async def all_done() -> bool:
            return len(w.run_done) >= runs

        await br.wait_until(all_done, timeout, 0.2, f"{runs} Runs finished")
        r["allSucceededSeconds"] = round(max(w.run_done.values()) - started, 2)
        items = await br.list_custom("runs", ns)
        outcomes: dict[str, int] = {}
        job_of: dict[str, str] = {}
        for item in items:
            st = item.get("status") or {}
            cond = next(c for c in st["conditions"] if c["type"] == "Succeeded")
            outcomes[cond["reason"]] = outcomes.get(cond["reason"], 0) + 1
            job_of[item["metadata"]["name"]] = st.get("jobName", "")
        r["outcomes"] = outcomes
        r["createToJobMs"] = pct([w.job_seen[n] - created[n] for n in created if n in w.job_seen])
        r["podDoneToConditionMs"] = pct(
            [
                max(0.0, w.run_done[n] - w.pod_done[job_of[n]])
                for n in created
                if n in w.run_done and job_of.get(n) in w.pod_done
            ]
        )
        _, peak = br.rss_mb(proc.pid)
        r["operatorPeakRssMB"] = round(peak, 1)

        # --- the floor: the Job controller alone, the same Jobs ---
        br.stop(proc)
        _, payload = await k8s.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs")
        jobs = [
            j
            for j in payload["items"]
            if (j["metadata"].get("labels") or {}).get("swarmkit.dev/run")
        ]
        floor = [floor_job(j, f"floor-{i:04d}") for i, j in enumerate(jobs)]
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        started = time.monotonic()

        def create_job(body: dict[str, Any]) -> Any:
            async def go() -> None:
                code, out = await k8s.request("POST", path, body)
                if code >= 300:
                    raise RuntimeError(f"creating floor Job: {code} {out}")

            return go

        await br.bounded(create_job(b) for b in floor)

        async def floor_pods_done() -> bool:
            return sum(1 for j in w.pod_done if j.startswith("floor-")) >= len(floor)

        await br.wait_until(floor_pods_done, timeout, 0.2, "the floor's pods finished")
        r["floorPodsDoneSeconds"] = round(time.monotonic() - started, 2)

        async def floor_complete() -> bool:
            return sum(1 for j in w.job_complete if j.startswith("floor-")) >= len(floor)

        await br.wait_until(floor_complete, timeout, 0.5, "the floor's Jobs Complete")
        r["floorJobsCompleteSeconds"] = round(time.monotonic() - started, 2)
        r["xFloor"] = round(r["allSucceededSeconds"] / r["floorPodsDoneSeconds"], 2)
    finally:
        if watcher is not None:
            watcher.close()
        br.stop(proc)
        await br.delete_namespace(ns)
    r["loadAfter"] = bs.load()
    return r


async def bench(args: argparse.Namespace, kubeconfig: Path) -> dict[str, Any]:
    k8s.configure(workers=br.CONCURRENCY, kubeconfig=str(kubeconfig))
    results = []
    try:
        for rep in range(args.repeat):
            r = await one(args.runs, kubeconfig, args.timeout)
            r["repeat"] = rep
            results.append(r)
            print(
                f"  [{rep + 1}/{args.repeat}] {args.runs} Runs: all Succeeded "
                f"{r['allSucceededSeconds']} s, "
                f"floor {r['floorPodsDoneSeconds']} s (load {r['loadBefore']} -> {r['loadAfter']})",
                file=sys.stderr,
                flush=True,
            )
    finally:
        await k8s.close_connections()
        k8s.shutdown()
    return {"runs": results, "summary": summarize(results)}


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    def spread(key: str, sub: str | None = None) -> dict[str, float]:
        values = [float(r[key][sub] if sub else r[key]) for r in results]
        return {"min": min(values), "median": statistics.median(values), "max": max(values)}

    return {
        "runs": results[0]["runs"],
        "createToJobMs": {p: spread("createToJobMs", p) for p in ("p50", "p95", "p99")},
        "podDoneToConditionMs": {
            p: spread("podDoneToConditionMs", p) for p in ("p50", "p95", "p99")
        },
        "allSucceededSeconds": spread("allSucceededSeconds"),
        "floorPodsDoneSeconds": spread("floorPodsDoneSeconds"),
        "floorJobsCompleteSeconds": spread("floorJobsCompleteSeconds"),
        "xFloor": spread("xFloor"),
        "outcomes": [r["outcomes"] for r in results],
        "load": [r["loadBefore"] for r in results],
    }


def table(s: dict[str, Any]) -> str:
    def f(d: dict[str, float]) -> str:
        return f"{d['min']:g} / {d['median']:g} / {d['max']:g}"

    lines = [f"{s['runs']} Runs created at once (min / median / max over repeats)"]
    for key, label in (
        ("createToJobMs", "Run created -> Job (ms)"),
        ("podDoneToConditionMs", "pod done -> Run condition (ms)"),
    ):
        for p in ("p50", "p95", "p99"):
            lines.append(f"  {label + ' ' + p:<50}{f(s[key][p]):>30}")
    lines.append(f"  {'all Succeeded (s)':<50}{f(s['allSucceededSeconds']):>30}")
    lines.append(
        f"  {'floor: Job controller alone, pods done (s)':<50}{f(s['floorPodsDoneSeconds']):>30}"
    )
    lines.append(
        f"  {'floor: Job controller alone, Jobs Complete (s)':<50}"
        f"{f(s['floorJobsCompleteSeconds']):>30}"
    )
    lines.append(f"  {'ratio to the floor (pods done)':<50}{f(s['xFloor']):>30}")
    lines.append(f"  outcomes: {s['outcomes']}; load before each: {s['load']}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    with session_cluster() as cluster:
        apply_crds(cluster)
        result = asyncio.run(bench(args, cluster.kubeconfig))
    print(table(result["summary"]))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
