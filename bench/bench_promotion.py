"""Spec change → promoted, graded by the real EvalRun controller (``make bench-promotion``).

On the local control plane (``$SWARMKIT_KUBECONFIG``'s cluster, else a private one), with
the operator as a process and the runner in Jobs (replay model): the scenario of
``tests/integration/test_promotion_graded.py`` with ``--cases`` (20) cases. An Agent with
``spec.promotion`` is promoted at its first version; the benchmark then edits it (a new
prompt and answer, as good on every case) and measures, from just before the edit (wall
clock, polled every 0.2 s), until its ``status.promotion.active`` is the new version. In
between: the candidate version, its EvalRun, every case as a Run of each side (the
EvalRun's default parallelism, 4 at once), the grading and the verdict ``Pass``.

``--runs`` (3) repeats, each in a fresh namespace; prints each, min/median/max and the load
average before and after (the machine is shared: the load is part of the figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", "."):
    sys.path.insert(0, str(REPO / sub))

from bench_support import loadavg  # noqa: E402
from tests.integration.runs_support import OperatorProcess  # noqa: E402
from tests.integration.test_promotion_graded import (  # noqa: E402
    REWORDED,
    edit_until_settled,
    setup,
)

from swarmkit_devcluster.testing import Kube, session_cluster, temp_namespace  # noqa: E402


def at(text: str) -> float:
    """An RFC 3339 timestamp of the apiserver, as epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="also print the raw results")
    args = parser.parse_args(argv)
    load_before = loadavg()
    took: list[float] = []
    evaluated: list[float] = []
    with session_cluster() as cluster:
        kube = Kube.from_kubeconfig(cluster.kubeconfig)
        cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        op = OperatorProcess(cluster.kubeconfig)
        op.start()
        try:
            for n in range(args.runs):
                with temp_namespace(kube, f"bench-promotion-{n}") as ns:
                    v1 = setup(kube, ns, args.cases)
                    _, evalrun, seconds = edit_until_settled(
                        kube, ns, REWORDED, args.cases, v1, 900
                    )
                    status = evalrun["status"]
                    if status.get("verdict") != "Pass":
                        raise SystemExit(f"expected Pass: {json.dumps(status)[:2000]}")
                    created = evalrun["metadata"]["creationTimestamp"]
                    evaluated.append(at(status["completionTime"]) - at(created))
                    took.append(seconds)
                    print(
                        f"run {n}: spec change -> promoted {seconds:.1f} s "
                        f"(EvalRun created -> verdict {evaluated[-1]:.0f} s, 1 s resolution)",
                        flush=True,
                    )
        finally:
            op.stop()
            kube.close()
    load_after = loadavg()
    print(f"load average before {load_before}, after {load_after} (1, 5, 15 min)")
    print(f"{args.cases} cases, {2 * args.cases} case Runs per evaluation")
    print(f"{'':34} {'min':>7} {'median':>7} {'max':>7}")
    for label, values in (
        ("spec change -> promoted (s)", took),
        ("EvalRun created -> verdict (s)", evaluated),
    ):
        print(f"{label:34} {min(values):7.1f} {statistics.median(values):7.1f} {max(values):7.1f}")
    if args.json:
        print(
            json.dumps(
                {
                    "what": "spec change -> promoted, graded by the EvalRun controller",
                    "cases": args.cases,
                    "runs": args.runs,
                    "load_before": load_before,
                    "load_after": load_after,
                    "spec_change_to_promoted_s": [round(v, 2) for v in took],
                    "evalrun_created_to_verdict_s": [round(v) for v in evaluated],
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
