"""Decision → resumed latency of a parked Run (``make bench-review``).

On the local control plane (``$SWARMKIT_KUBECONFIG``'s cluster, else a private one), with
the operator as a process (``python -m swarmkit_operator``), the admission policy and the
chart's reviewer role applied: an Agent whose skill fails with ``onFailure:
escalate_to_human`` parks a Run; the benchmark then decides the Review as a reviewer
(impersonated, through the real admission policy) and measures, from just before that
patch (wall clock):

* **→ resume Job created**: the operator saw the decision, wrote the decision ConfigMap
  and created ``…-resume-1`` (its ``creationTimestamp`` has 1 s resolution, so this is
  polled: every 10 ms);
* **→ runner resumed**: the resumed runner's ``run.resume`` audit line (its own timestamp,
  ms): pod scheduled and started, Python start-up, bundle + checkpoint loaded;
* **→ Run Succeeded**: the replay, the rest of the run, and the operator's status write.

``--runs`` (3) runs, one after another; prints each and min/median/max, with the load
average before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", "."):
    sys.path.insert(0, str(REPO / sub))

from tests.integration.review_support import (  # noqa: E402
    ADMISSION,
    bind_people,
    user_roles,
    with_locked_deploy,
)
from tests.integration.runs_support import (  # noqa: E402
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    doc,
    get,
    succeeded,
    wait_ready,
)

from swarmkit_devcluster.cluster import LocalCluster  # noqa: E402
from swarmkit_devcluster.testing import Kube, session_cluster, temp_namespace, wait_for  # noqa: E402


@contextlib.contextmanager
def cluster_for_bench() -> Iterator[LocalCluster]:
    with session_cluster() as c:
        yield c


def _skill() -> dict[str, Any]:
    return doc(
        "Skill",
        "deploy",
        {
            "description": "Use when the change must be deployed.",
            "category": "capability",
            "implementation": {"type": "command", "pack": "ops", "command": "deploy"},
            "constraints": {"onFailure": "escalate_to_human"},
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    )


def one_run(kube: Kube, reviewer: Any, cluster: LocalCluster, ns: str, n: int) -> dict[str, float]:
    name = f"bench-{n}"
    create(
        kube,
        ns,
        doc(
            "Run", name, {"agentRef": {"name": "deployer"}, "input": "ship", "timeoutSeconds": 120}
        ),
    )

    def review_name() -> str | None:
        run = get(kube, ns, "Run", name) or {}
        items = (run.get("status") or {}).get("reviewItems") or []
        return items[0].get("review") if items else None

    review: str = wait_for(review_name, 120)
    patch = {"spec": {"decision": {"verdict": "answer", "text": "done", "decidedBy": "alice"}}}
    t0 = time.time()
    reviewer.patch_namespaced_custom_object(GROUP, VERSION, ns, "reviews", review, patch)
    job_at = succeeded_at = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (job_at is None or succeeded_at is None):
        if job_at is None:
            jobs = kube.batch.list_namespaced_job(ns).items
            if any(j.metadata.name.endswith("-resume-1") and name in j.metadata.name for j in jobs):
                job_at = time.time()
        if succeeded_at is None:
            cond = succeeded(get(kube, ns, "Run", name)) or {}
            if cond.get("status") == "True":
                succeeded_at = time.time()
        time.sleep(0.01)
    run = get(kube, ns, "Run", name) or {}
    log = cluster.kubectl("-n", ns, "logs", f"job/{run['status']['jobName']}").stdout
    resumed = next(json.loads(x) for x in log.splitlines() if '"run.resume"' in x)
    resumed_at = datetime.fromisoformat(resumed["ts"].replace("Z", "+00:00")).timestamp()
    assert job_at is not None and succeeded_at is not None, run.get("status")
    return {
        "job_created": job_at - t0,
        "runner_resumed": resumed_at - t0,
        "succeeded": succeeded_at - t0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--json", action="store_true", help="also print the raw results (bench/record.py)"
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with cluster_for_bench() as cluster:
        kube = Kube.from_kubeconfig(cluster.kubeconfig)
        cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        roles = user_roles()
        cluster.kubectl(
            "apply",
            "--server-side",
            "-f",
            "-",
            input="\n---\n".join(json.dumps(d) for d in roles),
        )
        cluster.kubectl("apply", "--server-side", "-f", str(ADMISSION))
        op = OperatorProcess(cluster.kubeconfig)
        op.start()
        try:
            with temp_namespace(kube, "bench-review") as ns:
                apply_examples(kube, ns, edit=with_locked_deploy)
                bind_people(cluster, ns)
                apply(kube, ns, _skill())
                replay = [
                    {"toolCalls": [{"name": "deploy", "arguments": {}}]},
                    {"text": "done"},
                ]
                apply(kube, ns, agent_with("deployer", replay, skills=["deploy"]))
                from kubernetes import client, config

                api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
                api.set_default_header("Impersonate-User", "alice")
                reviewer = client.CustomObjectsApi(api)
                wait_ready(kube, ns, "Agent", "deployer")
                results = [one_run(kube, reviewer, cluster, ns, n) for n in range(args.runs)]
        finally:
            op.stop()
            kube.close()
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)")
    print(f"{'decision →':24} {'min':>8} {'median':>8} {'max':>8}   runs (s)")
    for key, label in (
        ("job_created", "resume Job created"),
        ("runner_resumed", "runner resumed"),
        ("succeeded", "Run Succeeded"),
    ):
        values = [r[key] for r in results]
        print(
            f"{label:24} {min(values):8.3f} {statistics.median(values):8.3f} {max(values):8.3f}"
            f"   {', '.join(f'{v:.3f}' for v in values)}"
        )
    if args.json:
        summary = {
            key: {
                "min_s": round(min(r[key] for r in results), 3),
                "median_s": round(statistics.median(r[key] for r in results), 3),
                "max_s": round(max(r[key] for r in results), 3),
            }
            for key in ("job_created", "runner_resumed", "succeeded")
        }
        print(
            json.dumps(
                {
                    "what": "a parked Run decided by a reviewer: seconds from the decision",
                    "runs": args.runs,
                    "load_before": round(load_before[0], 2),
                    "load_after": round(load_after[0], 2),
                    "decision_to": summary,
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
