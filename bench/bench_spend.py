"""SpendQuota figures: reservation overhead on Run start, and concurrent Runs without overspend.

On a private local control plane with the operator as deployed (a process under the
chart's ServiceAccount) and the real runner (replay provider, priced, usage scripted):

* **Overhead**: ``--runs`` (20) Runs created one every ``--gap`` (0.5) s, once in a
  namespace without a SpendQuota and once with one that covers every Run (a limit they
  never reach, so only the reservation is paid: listing the quotas, the intent status
  write, the resourceVersion-guarded quota write). Two intervals per Run: the budget gate
  itself, from the operator's own milestones (``$SWARMKIT_RUNS_TRACE``: ``budget_start`` →
  ``budget_checked``), and end to end, the create call's return → the Job's ADDED event
  (a Jobs watch in this process). ``--repeats`` (3) times, fresh namespaces; p50 / p95.
* **Concurrency**: ``--concurrent`` (50) Runs (that spend nothing) created at once against
  a quota whose limit covers five caps; checks, from the Runs' own start/completion times,
  that no more than five ever held a Job at the same time, and that the quota's spent +
  reserved never went past its limit (polled every 0.2 s); prints how many waited
  (BudgetExhausted).

Usage: ``python bench/bench_spend.py [--runs 20] [--repeats 3] [--concurrent 50]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", ".", "bench"):
    sys.path.insert(0, str(REPO / sub))

from bench_runs import operator_traces  # noqa: E402
from tests.integration.runs_support import (  # noqa: E402
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    doc,
    epoch,
    finished,
    get,
    run_manifest,
    succeeded,
    wait_ready,
)

from swarmkit_devcluster.imagebuild import current_images_store  # noqa: E402
from swarmkit_devcluster.testing import Kube, session_cluster, temp_namespace, wait_for  # noqa: E402

USAGE = {"inputTokens": 1000, "outputTokens": 100}


def _setup(kube: Kube, ns: str, usage: dict[str, int] | None = USAGE) -> None:
    def priced(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            for provider in doc["spec"]["modelProviders"]:
                provider["prices"] = {"currency": "USD", "input": "3", "output": "15"}
        return doc

    apply_examples(kube, ns, priced)
    turn: dict[str, Any] = {"text": "done"}
    if usage:
        turn["usage"] = usage
    apply(kube, ns, agent_with("one-shot", [turn]))
    wait_ready(kube, ns, "Agent", "one-shot")


def _quota(cost: str) -> dict[str, Any]:
    return doc("SpendQuota", "team", {"cost": cost, "currency": "USD", "window": "daily"})


class JobWatch:
    """Monotonic time of each Job's ADDED event, by the Run it belongs to."""

    def __init__(self, kube: Kube, ns: str) -> None:
        from kubernetes import watch

        self.seen: dict[str, float] = {}
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._loop, args=(kube, ns), daemon=True)
        self._thread.start()

    def _loop(self, kube: Kube, ns: str) -> None:
        try:
            for event in self._watch.stream(kube.batch.list_namespaced_job, ns):
                if event["type"] == "ADDED":
                    run = (event["object"].metadata.labels or {}).get("swarmkit.dev/run", "")
                    self.seen.setdefault(run, time.monotonic())
        except Exception:  # the namespace went away under the watch: the series is over
            return

    def stop(self) -> None:
        self._watch.stop()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def overhead(
    kube: Kube, op: OperatorProcess, runs: int, gap: float, with_quota: bool
) -> tuple[list[float], list[float]]:
    """(gate ms, Run created → Job ADDED ms) per Run."""
    with temp_namespace(kube, "bench-spend") as ns:
        _setup(kube, ns)
        if with_quota:
            create(kube, ns, _quota("1000000"))
        jobs = JobWatch(kube, ns)
        created: dict[str, float] = {}
        uids: dict[str, str] = {}
        try:
            for i in range(runs):
                name = f"r{i:03d}"
                obj = create(kube, ns, run_manifest(name, agent="one-shot", maxCost="0.1"))
                created[name] = time.monotonic()
                uids[name] = obj["metadata"]["uid"]
                time.sleep(gap)
            wait_for(lambda: len(jobs.seen) >= runs, 120)
            wait_for(lambda: all(finished(get(kube, ns, "Run", n) or {}) for n in created), 180)
        finally:
            jobs.stop()
        traces = operator_traces(op.log_path)
        gate = [
            (traces[u]["budget_checked"] - traces[u]["budget_start"]) * 1000
            for u in uids.values()
            if "budget_checked" in traces.get(u, {})
        ]
        return gate, [(jobs.seen[n] - created[n]) * 1000 for n in created]


def concurrency(kube: Kube, count: int) -> dict[str, Any]:
    with temp_namespace(kube, "bench-spend-c") as ns:
        # Runs that spend nothing: only reservations fill the quota, so it holds five at a
        # time for any number of Runs (with spend, the limit runs out after about 90).
        _setup(kube, ns, usage=None)
        create(kube, ns, _quota("0.5"))  # each Run reserves 0.1: five at a time
        names = [f"c{i:03d}" for i in range(count)]
        for name in names:
            create(kube, ns, run_manifest(name, agent="one-shot", maxCost="0.1"))
        used: list[float] = []
        waited: set[str] = set()

        def done() -> bool:
            q = get(kube, ns, "SpendQuota", "team")
            if q and (q.get("status") or {}).get("used"):
                used.append(float(q["status"]["used"]))
            n = 0
            for name in names:
                run = get(kube, ns, "Run", name) or {}
                cond = succeeded(run)
                if cond and cond["reason"] == "BudgetExhausted":
                    waited.add(name)
                n += finished(run)
            return n == count

        started = time.monotonic()
        wait_for(done, 900, interval=0.2)
        elapsed = time.monotonic() - started
        runs = [get(kube, ns, "Run", n) or {} for n in names]
        ok = sum(1 for r in runs if (succeeded(r) or {}).get("reason") == "Succeeded")
        spans = [
            (epoch(r["status"]["startTime"]), epoch(r["status"]["completionTime"])) for r in runs
        ]
        most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
        return {
            "runs": count,
            "succeeded": ok,
            "waited": len(waited),
            "max_holding_a_job": most,
            "max_used": max(used) if used else 0.0,
            "seconds": elapsed,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--gap", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument(
        "--json", action="store_true", help="also print the raw results (bench/record.py)"
    )
    args = parser.parse_args(argv)
    recorded: dict[str, Any] = {"runs": args.runs, "gap_s": args.gap, "repeats": []}
    print(f"load average before {os.getloadavg()[0]:.2f} (1 min)")
    if "SWARMKIT_NODE_IMAGE_STORE" not in os.environ:
        # the runtime image of this checkout (as the integration suite does), not a cached one
        store = Path(tempfile.mkdtemp(prefix="swarmkit-images-"))
        current_images_store(REPO, store)
        os.environ["SWARMKIT_NODE_IMAGE_STORE"] = str(store)
    with session_cluster() as cluster:
        kube = Kube.from_kubeconfig(cluster.kubeconfig)
        cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        op = OperatorProcess(cluster.kubeconfig, env={"SWARMKIT_RUNS_TRACE": "1"})
        op.start()
        try:
            print(f"{args.runs} Runs every {args.gap} s; ms")
            print(
                f"{'repeat':>6} {'mode':>9} {'gate p50':>9} {'gate p95':>9} "
                f"{'→Job p50':>9} {'→Job p95':>9}"
            )
            for repeat in range(1, args.repeats + 1):
                for with_quota in (False, True):
                    gate, e2e = overhead(kube, op, args.runs, args.gap, with_quota)
                    mode = "quota" if with_quota else "no quota"
                    recorded["repeats"].append(
                        {
                            "repeat": repeat,
                            "mode": mode,
                            "gate_ms": {
                                "p50": round(statistics.median(gate), 1),
                                "p95": round(_pct(gate, 0.95), 1),
                            },
                            "run_to_job_ms": {
                                "p50": round(statistics.median(e2e), 1),
                                "p95": round(_pct(e2e, 0.95), 1),
                            },
                            "load": round(os.getloadavg()[0], 2),
                        }
                    )
                    print(
                        f"{repeat:>6} {mode:>9} {statistics.median(gate):9.1f} "
                        f"{_pct(gate, 0.95):9.1f} {statistics.median(e2e):9.1f} "
                        f"{_pct(e2e, 0.95):9.1f}   load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
            if args.concurrent:
                result = concurrency(kube, args.concurrent)
                recorded["concurrency"] = result
                print(
                    f"concurrency: {result['runs']} Runs at once against a quota for 5: "
                    f"{result['succeeded']} succeeded, {result['waited']} waited "
                    f"(BudgetExhausted), at most {result['max_holding_a_job']} held a Job at "
                    f"once, quota used at most {result['max_used']} of 0.5 USD, "
                    f"{result['seconds']:.1f} s"
                )
            denials = op.denials()
            if denials:
                print("RBAC denials:", denials)
        finally:
            op.stop()
            kube.close()
    print(f"load average after {os.getloadavg()[0]:.2f} (1 min)")
    if args.json:  # last: bench/record.py reads the last JSON document on stdout
        recorded["load_after"] = round(os.getloadavg()[0], 2)
        print(json.dumps(recorded))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
