"""Benchmark Runs against the real local control plane (``make bench-runs``).

Starts a private local cluster (its process node gets one extra image,
``bench.local/instant-runtime``: a shell one-liner that writes a successful RunResult to the
termination log and exits, so 200 pods cost no Python start-up) and the operator as deployed
(``python -m swarmkit_operator``). Everything is timed from the same client process through
watches, so both ends of every interval carry the same watch-delivery delay.

1. **Run created → Job created** (operator overhead): ``--runs`` (200) Runs of a one-agent
   Topology, created at ``--rate`` per second; per Run, the time between the watch seeing
   the Run ADDED and the Job ADDED. p50/p95/max.
2. **Job finished → Run condition set**: per Run, from the watch seeing the runner's pod
   terminated (``Succeeded``) to the Run's final ``Succeeded`` condition. The operator
   concludes from the pod; the Job controller marks the Job ``Complete`` only later (seconds
   later under this load), so "Job Complete → Run condition" is negative: it is in the
   ``--json`` output only.
3. **Runner cold start** with ``--skills`` (20) granted skills: the real runner
   (``*swarmkit-runtime`` → ``python -m swarmkit_runner``) against a local OpenAI-compatible
   endpoint; from the runner process's start time (``/proc/<pid>/stat``) to the first model
   request arriving at the endpoint. ``--cold-starts`` (5) runs, one after another.

Prints a table and, with ``--json``, the raw numbers.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image"):
    sys.path.insert(0, str(REPO / sub))

from swarmkit_devcluster.cluster import LocalCluster  # noqa: E402
from swarmkit_devcluster.kubeapi import KubeClient  # noqa: E402
from swarmkit_devcluster.testing import apply_crds, wait_for  # noqa: E402

GV = "swarmkit.dev/v1alpha1"
INSTANT_IMAGE = "bench.local/instant-runtime:1"
RESULT = '{"outcome":"Succeeded","output":"ok","steps":1}'
IMAGE_MAP = {
    "images": [
        {
            "match": "bench.local/instant-runtime",
            "entrypoint": [
                "/bin/sh",
                "-c",
                f"printf '%s' '{RESULT}' > \"$SWARMKIT_PATH_PREFIX/dev/termination-log\"",
            ],
        }
    ],
    "includeBuiltins": True,
}


def custom(ns: str, plural: str, name: str | None = None) -> str:
    base = f"/apis/swarmkit.dev/v1alpha1/namespaces/{ns}/{plural}"
    return f"{base}/{name}" if name else base


def obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": GV, "kind": kind, "metadata": {"name": name}, "spec": spec}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 0.5), 1),
        "p95_ms": round(pct(ms, 0.95), 1),
        "max_ms": round(max(ms), 1) if ms else float("nan"),
        "mean_ms": round(statistics.fmean(ms), 1) if ms else float("nan"),
    }


class Operator:
    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.log = workdir / "operator.log"
        cmd = [sys.executable, "-m", "swarmkit_operator"]
        try:
            import importlib.util

            if importlib.util.find_spec("swarmkit_operator.__main__") is None:
                cmd = [sys.executable, "-m", "kopf", "run", "--standalone", "-A", "-m",
                       "swarmkit_operator.handlers"]  # fmt: skip
        except ImportError:
            pass
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PYTHONUNBUFFERED": "1",
            "SWARMKIT_METRICS_PORT": "0",
            "SWARMKIT_LIVENESS": "",
        }
        if os.environ.get("SWARMKIT_RUNS_TRACE"):
            env["SWARMKIT_RUNS_TRACE"] = "1"
        self.proc = subprocess.Popen(
            cmd, stdout=self.log.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=REPO,
            start_new_session=True,
        )  # fmt: skip
        wait_for(lambda: "runs controller started" in self.log.read_text(errors="replace"), 60)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Watcher(threading.Thread):
    """Records, per run uid, when a watch first saw something about it."""

    def __init__(self, client: KubeClient, path: str, on_event: Any) -> None:
        super().__init__(daemon=True)
        self.client, self.path, self.on_event = client, path, on_event
        self.stopped = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        rv = self.client.get(self.path)["metadata"]["resourceVersion"]
        self.ready.set()
        while not self.stopped.is_set():
            for ev in self.client.watch(self.path, resource_version=rv, timeout_seconds=30):
                now = time.monotonic()
                obj = ev.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                if ev.get("type") in ("ADDED", "MODIFIED"):
                    self.on_event(now, obj)
                if self.stopped.is_set():
                    return


def wait_ready(client: KubeClient, ns: str, plural: str, name: str) -> None:
    def ready() -> bool:
        o = client.get(custom(ns, plural, name))
        return any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (o.get("status") or {}).get("conditions") or ()
        )

    wait_for(ready, 120, message=f"{plural}/{name} Ready")


def new_namespace(client: KubeClient, name: str) -> str:
    client.create("/api/v1/namespaces", {"metadata": {"name": name}})
    wait_for(lambda: client.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"), 30)
    return name


def bench_latency(client: KubeClient, runs: int, rate: float) -> dict[str, Any]:
    ns = new_namespace(client, "bench-runs")
    client.create(
        custom(ns, "workspaces"),
        obj(
            "Workspace",
            "default",
            {
                "modelProviders": [{"name": "replay", "type": "replay"}],
                "runtime": {"image": INSTANT_IMAGE, "jobTtlSecondsAfterFinished": 3600},
            },
        ),
    )
    client.create(
        custom(ns, "agents"),
        obj("Agent", "fast", {"model": {"provider": "replay"}, "replay": [{"text": "ok"}]}),
    )
    client.create(
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
    wait_ready(client, ns, "topologies", "fast")

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
            for c in (o.get("status") or {}).get("conditions") or ():
                if c.get("type") == "Succeeded" and c.get("status") in ("True", "False"):
                    run_final.setdefault(uid, now)

    def on_job(now: float, o: dict[str, Any]) -> None:
        uid = (o["metadata"].get("labels") or {}).get("swarmkit.dev/run-uid")
        if not uid:
            return
        with lock:
            job_added.setdefault(uid, now)
            for c in (o.get("status") or {}).get("conditions") or ():
                if c.get("type") == "Complete" and c.get("status") == "True":
                    job_complete.setdefault(uid, now)

    def on_pod(now: float, o: dict[str, Any]) -> None:
        uid = (o["metadata"].get("labels") or {}).get("swarmkit.dev/run-uid")
        if uid and (o.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            with lock:
                pod_done.setdefault(uid, now)

    watchers = [
        Watcher(KubeClient.from_kubeconfig(client_kubeconfig), path, fn)
        for path, fn in (
            (custom(ns, "runs"), on_run),
            (f"/apis/batch/v1/namespaces/{ns}/jobs", on_job),
            (f"/api/v1/namespaces/{ns}/pods", on_pod),
        )
    ]
    for w in watchers:
        w.start()
        w.ready.wait(10)

    start = time.monotonic()
    for i in range(runs):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        client.create(
            custom(ns, "runs"),
            obj("Run", f"r-{i:04d}", {"topologyRef": {"name": "fast"}, "timeoutSeconds": 300}),
        )
    wait_for(lambda: len(run_final) >= runs, 300, message=lambda: f"{len(run_final)}/{runs} final")
    for w in watchers:
        w.stopped.set()
    with lock:
        created = [job_added[u] - run_added[u] for u in run_added if u in job_added]
        from_pod = [run_final[u] - pod_done[u] for u in run_final if u in pod_done]
        from_job = [run_final[u] - job_complete[u] for u in run_final if u in job_complete]
    return {
        "runs": runs,
        "rate_per_s": rate,
        "run_created_to_job_created": summary(created),
        "pod_finished_to_run_condition": summary(from_pod),
        "job_complete_to_run_condition": summary(from_job),
        "wall_s": round(time.monotonic() - start, 1),
    }


class ModelEndpoint(http.server.ThreadingHTTPServer):
    """A minimal OpenAI-compatible chat endpoint that records request arrival times."""

    def __init__(self) -> None:
        self.requests: list[float] = []
        super().__init__(("127.0.0.1", 0), _ModelHandler)


class _ModelHandler(http.server.BaseHTTPRequestHandler):
    server: ModelEndpoint

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.server.requests.append(time.time())
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = json.dumps(
            {
                "id": "bench",
                "object": "chat.completion",
                "model": "bench",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "done"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def process_start_time(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    ticks = int(stat.rsplit(")", 1)[1].split()[19])
    btime = next(
        int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime")
    )  # fmt: skip
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def _one_cold_start(client: KubeClient, ns: str, server: ModelEndpoint, name: str) -> list[float]:
    before = len(server.requests)
    client.create(
        custom(ns, "runs"),
        obj("Run", name, {"agentRef": {"name": "cold"}, "timeoutSeconds": 120}),
    )

    def running_pid() -> int | None:
        for p in client.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
            if not p["metadata"]["name"].startswith(f"run-{name}-"):
                continue
            for cs in (p.get("status") or {}).get("containerStatuses") or ():
                cid = cs.get("containerID") or ""
                if cid.startswith("process://"):
                    return int(cid.removeprefix("process://"))
        return None

    pid = wait_for(running_pid, 60, interval=0.02, message="the runner process")
    try:
        started: float | None = process_start_time(pid)
    except OSError:
        started = None
    wait_for(lambda: len(server.requests) > before, 60, interval=0.02, message="a model call")

    def final() -> bool:
        run = client.get(custom(ns, "runs", name))
        return any(
            c.get("type") == "Succeeded" and c.get("status") in ("True", "False")
            for c in (run.get("status") or {}).get("conditions") or ()
        )

    wait_for(final, 60)
    return [server.requests[before] - started] if started is not None else []


def bench_cold_start(client: KubeClient, count: int, skills: int) -> dict[str, Any]:
    ns = new_namespace(client, "bench-cold")
    server = ModelEndpoint()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    client.create(
        custom(ns, "workspaces"),
        obj(
            "Workspace",
            "default",
            {
                "modelProviders": [
                    {
                        "name": "local",
                        "type": "openai",
                        "baseUrl": f"http://127.0.0.1:{port}/v1",
                        "defaultModel": "bench",
                        "maxRetries": 0,
                    }
                ]
            },
        ),
    )
    names = []
    for i in range(skills):
        name = f"skill-{i:02d}"
        names.append(name)
        client.create(
            custom(ns, "skills"),
            obj(
                "Skill",
                name,
                {
                    "description": f"Use when benchmark task {i} comes up.",
                    "category": "capability",
                    "instructions": f"# Skill {i}\n\nStep one, then step two.\n",
                    "files": [{"path": "reference/notes.md", "content": f"notes {i}\n"}],
                    "provenance": {"authoredBy": "human", "version": "1.0.0"},
                },
            ),
        )
    client.create(
        custom(ns, "agents"),
        obj("Agent", "cold", {"systemPrompt": "Benchmark.", "skills": names}),
    )
    wait_ready(client, ns, "agents", "cold")
    deltas: list[float] = []
    for i in range(count):
        deltas.extend(_one_cold_start(client, ns, server, f"cold-{i}"))
    server.shutdown()
    return {"runs": count, "granted_skills": skills, "cold_start": summary(deltas)}


client_kubeconfig: Path


def main() -> None:
    global client_kubeconfig
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="Runs created per second")
    parser.add_argument("--cold-starts", type=int, default=5)
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="swarmkit-bench-runs-"))
    image_map = workdir / "images.yaml"
    image_map.write_text(json.dumps(IMAGE_MAP))
    print(f"starting a private cluster in {workdir} ...", flush=True)
    cluster = LocalCluster(workdir / "cluster", image_map=str(image_map), verbose=False).start()
    operator = None
    try:
        apply_crds(cluster)
        client_kubeconfig = cluster.kubeconfig
        client = KubeClient.from_kubeconfig(cluster.kubeconfig)
        operator = Operator(cluster.kubeconfig, workdir)
        print("operator log:", operator.log, flush=True)
        print(
            f"operator up (log {operator.log}); {args.runs} runs at {args.rate}/s ...", flush=True
        )
        latency = bench_latency(client, args.runs, args.rate)
        print(f"cold starts with {args.skills} granted skills ...", flush=True)
        try:
            cold = bench_cold_start(client, args.cold_starts, args.skills)
        except Exception as exc:  # keep the latency numbers
            print(f"cold start benchmark failed: {exc}", flush=True)
            cold = {"runs": 0, "granted_skills": args.skills, "cold_start": summary([])}
    finally:
        if operator is not None:
            operator.stop()
        cluster.stop()
    results = {"latency": latency, "cold": cold}
    if args.json:
        print(json.dumps(results, indent=2))
    c, p = latency["run_created_to_job_created"], latency["pod_finished_to_run_condition"]
    k = cold["cold_start"]
    print()
    print(f"| measure ({latency['runs']} runs at {latency['rate_per_s']}/s) | p50 | p95 | max |")
    print("|---|---|---|---|")
    print(f"| Run created → Job created | {c['p50_ms']} ms | {c['p95_ms']} ms | {c['max_ms']} ms |")
    print(
        f"| pod finished → Run condition set | {p['p50_ms']} ms | {p['p95_ms']} ms "
        f"| {p['max_ms']} ms |"
    )
    print(
        f"| runner cold start, {cold['granted_skills']} skills ({k['n']} runs) "
        f"| {k['p50_ms']} ms | {k['p95_ms']} ms | {k['max_ms']} ms |"
    )


if __name__ == "__main__":
    main()
