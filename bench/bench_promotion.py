"""Promotion's latency and an EvalRun's overhead per case (``make bench-promotion``).

On the local control plane (``$SWARMKIT_KUBECONFIG``'s cluster, else a private one), with
the operator as a process and the runner in Jobs (replay model), two measurements on the
EvalSet of ``tests/integration/test_promotion_graded.py`` (contains and regex graders,
graded by the operator itself):

* **spec change → promoted** (``--cases``, 20): the scenario of that test. An Agent with
  ``spec.promotion`` is promoted at its first version; the benchmark then edits it (a new
  prompt and answer, as good on every case) and measures, from just before the edit (wall
  clock, polled every 0.2 s), until its ``status.promotion.active`` is the new version. In
  between: the candidate version, its EvalRun, every case as a Run of each side (the
  EvalRun's default parallelism, 4 at once), the grading and the verdict ``Pass``.
* **overhead per evaluated case** (``--overhead-cases``, 6): two Agents (``triage``,
  ``triage-v2``, each passing every case). (a) *by hand*: the Runs an EvalRun of the
  EvalSet creates, each case on each side (the same input, the Agent pinned at the same
  version), created directly one after another, timed from just before the first create
  until every one has finished;
  (b) *EvalRun*: an EvalRun of ``triage-v2`` against ``triage`` with ``parallelism`` equal
  to that number of Runs and ``reuseResults: false``, timed from just before its creation
  until its verdict is in its status. Both polled every 0.2 s, in the same
  namespace; the order of (a) and (b) alternates between repeats; each repeat records
  the EvalRun's verdict and errored cases beside its time. The overhead per
  evaluated case is (b - a) / cases: the snapshot, the Runs' creation by the controller,
  the grading and the status writes, against a script creating the same Runs.

``--runs`` (3) repeats of each, each in a fresh namespace; prints each, min/median/max
and the load average before and after (the machine is shared: the load is part of the
figure; so are the operator's restarts, when its leader could not renew its Lease in
time). ``--measure promotion`` or ``overhead`` runs one of the two.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", "."):
    sys.path.insert(0, str(REPO / sub))

from bench_support import loadavg  # noqa: E402
from tests.integration.runs_support import (  # noqa: E402
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    create,
    debug,
    doc,
    epoch,
    example,
    finished,
    get,
    succeeded,
    wait_ready,
)
from tests.integration.test_promotion_graded import (  # noqa: E402
    AGENT,
    EVAL_SET,
    GOOD,
    REWORDED,
    cases,
    edit_until_settled,
    setup,
)

from swarmkit_devcluster.testing import Kube, session_cluster, temp_namespace, wait_for  # noqa: E402

#: The overhead's candidate (its baseline is ``AGENT``); both pass every case.
CANDIDATE = f"{AGENT}-v2"
#: Marks the Runs the benchmark creates by hand (the EvalRun's carry ``swarmkit.dev/eval-run``).
BY_HAND = "bench.swarmkit.dev/by-hand"
ANSWERS = {AGENT: GOOD, CANDIDATE: REWORDED}
TIMEOUT = 900


def mmm(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    return {
        "min": round(min(values), digits),
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
    }


def promotion_repeat(kube: Kube, n: int, cases_n: int) -> tuple[float, float]:
    """One spec change → promoted: (seconds, the EvalRun's created → verdict)."""
    with temp_namespace(kube, f"bench-promotion-{n}") as ns:
        v1 = setup(kube, ns, cases_n)
        _, evalrun, seconds = edit_until_settled(kube, ns, REWORDED, cases_n, v1, TIMEOUT)
        status = evalrun["status"]
        if status.get("verdict") != "Pass":
            raise SystemExit(f"expected Pass: {json.dumps(status)[:2000]}")
        evaluated = epoch(status["completionTime"]) - epoch(
            evalrun["metadata"]["creationTimestamp"]
        )
    print(
        f"run {n}: spec change -> promoted {seconds:.1f} s "
        f"(EvalRun created -> verdict {evaluated:.0f} s, 1 s resolution)",
        flush=True,
    )
    return seconds, evaluated


def two_agents(kube: Kube, ns: str, cases_n: int) -> dict[str, str]:
    """The Workspace, the EvalSet and the two Agents, Ready: Agent → its version."""
    apply(kube, ns, example("Workspace", "default"))
    wait_ready(kube, ns, "Workspace", "default")
    apply(kube, ns, doc("EvalSet", EVAL_SET, {"cases": cases(cases_n)}))
    wait_ready(kube, ns, "EvalSet", EVAL_SET)
    for name, answer in ANSWERS.items():
        apply(kube, ns, agent_with(name, [{"text": answer}]))
    versions = {}
    for name in (AGENT, CANDIDATE):
        wait_ready(kube, ns, "Agent", name)
        versions[name] = str((get(kube, ns, "Agent", name) or {})["status"]["version"])
    return versions


def by_hand(kube: Kube, ns: str, cases_n: int, versions: dict[str, str]) -> float:
    """(a): each case on each side as a Run created directly; seconds until all finished."""
    runs = []
    for case in cases(cases_n):
        for side, agent in (("c", CANDIDATE), ("b", AGENT)):
            spec = {"agentRef": {"name": agent}, "version": versions[agent], "input": case["input"]}
            meta = {"name": f"hand-{case['name']}-{side}", "labels": {BY_HAND: "true"}}
            runs.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": "Run", "metadata": meta,
                         "spec": spec})  # fmt: skip

    def done() -> list[dict[str, Any]] | None:
        items = kube.custom.list_namespaced_custom_object(
            GROUP, VERSION, ns, "runs", label_selector=BY_HAND
        )["items"]
        return items if len(items) == len(runs) and all(finished(r) for r in items) else None

    start = time.monotonic()
    for run in runs:
        create(kube, ns, run)
    items = wait_for(done, TIMEOUT, interval=0.2, message=lambda: debug(kube, ns))
    took = time.monotonic() - start
    for run in items:
        # The answer says which Agent ran (the version is the Run's spec.version).
        agent, status = run["spec"]["agentRef"]["name"], run.get("status") or {}
        ok = (succeeded(run) or {}).get("status") == "True" and status.get("output") == ANSWERS[
            agent
        ]
        if not ok:
            raise SystemExit(f"a Run by hand did not succeed: {json.dumps(run)[:3000]}")
    return took


def by_evalrun(kube: Kube, ns: str, cases_n: int, name: str) -> tuple[float, dict[str, Any]]:
    """(b): an EvalRun of the same Runs, all at once, no cache: (seconds until its verdict,
    its status)."""
    spec = {
        "evalSetRef": {"name": EVAL_SET},
        "candidate": {"agentRef": {"name": CANDIDATE}},
        "baseline": {"agentRef": {"name": AGENT}},
        "parallelism": 2 * cases_n,
        "reuseResults": False,
    }

    def verdict() -> dict[str, Any] | None:
        obj = get(kube, ns, "EvalRun", name)
        return obj if ((obj or {}).get("status") or {}).get("verdict") else None

    start = time.monotonic()
    create(kube, ns, doc("EvalRun", name, spec))
    evalrun = wait_for(verdict, TIMEOUT, interval=0.2, message=lambda: debug(kube, ns))
    took = time.monotonic() - start
    status = evalrun["status"]
    runs = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, "runs", label_selector=f"swarmkit.dev/eval-run={name}"
    )["items"]
    # Every case graded on both sides from its own Run. Not always Pass: a case Run started
    # across an operator restart can finish without status.pinned, and is graded Errored
    # (VersionUnavailable); the verdict and the errored cases are recorded with the time.
    sides = (status["candidate"], status["baseline"])
    graded = [side["passed"] + side["errored"] for side in sides]
    if graded != [cases_n, cases_n] or len(runs) != 2 * cases_n:
        raise SystemExit(f"expected {2 * cases_n} graded Runs: {json.dumps(status)[:2000]}")
    return took, status


def overhead_repeat(kube: Kube, op: OperatorProcess, n: int, cases_n: int) -> dict[str, Any]:
    """One repeat of (a) and (b) in a fresh namespace, by hand first when ``n`` is even."""
    restarts = op.restarts
    with temp_namespace(kube, f"bench-eval-overhead-{n}") as ns:
        versions = two_agents(kube, ns, cases_n)
        load = loadavg()[0]
        if n % 2 == 0:
            hand = by_hand(kube, ns, cases_n, versions)
            evalrun, status = by_evalrun(kube, ns, cases_n, f"overhead-{n}")
        else:
            evalrun, status = by_evalrun(kube, ns, cases_n, f"overhead-{n}")
            hand = by_hand(kube, ns, cases_n, versions)
    row = {
        "order": "by hand, EvalRun" if n % 2 == 0 else "EvalRun, by hand",
        "load_1min": load,
        "by_hand_s": round(hand, 2),
        "evalrun_s": round(evalrun, 2),
        "overhead_per_case_s": round((evalrun - hand) / cases_n, 3),
        # A leader that could not renew its Lease in time on the loaded machine exits and
        # is started again (OperatorProcess, as the kubelet would): counted, not hidden.
        "operator_restarts": op.restarts - restarts,
        "verdict": status["verdict"],
        "errored_cases": status["candidate"]["errored"] + status["baseline"]["errored"],
    }
    print(
        f"run {n} ({row['order']}): {2 * cases_n} Runs by hand {hand:.1f} s, EvalRun "
        f"{evalrun:.1f} s: overhead per case {row['overhead_per_case_s']:+.3f} s "
        f"(load {load}, operator restarts {row['operator_restarts']}, verdict {row['verdict']}, "
        f"errored {row['errored_cases']})",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--overhead-cases", type=int, default=6)
    parser.add_argument("--measure", choices=("all", "promotion", "overhead"), default="all")
    parser.add_argument("--json", action="store_true", help="also print the raw results")
    args = parser.parse_args(argv)
    load_before = loadavg()
    took: list[float] = []
    evaluated: list[float] = []
    overhead: list[dict[str, Any]] = []
    with session_cluster() as cluster:
        kube = Kube.from_kubeconfig(cluster.kubeconfig)
        cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        op = OperatorProcess(cluster.kubeconfig)
        op.start()
        try:
            for n in range(args.runs if args.measure in ("all", "promotion") else 0):
                seconds, created_to_verdict = promotion_repeat(kube, n, args.cases)
                took.append(seconds)
                evaluated.append(created_to_verdict)
            for n in range(args.runs if args.measure in ("all", "overhead") else 0):
                overhead.append(overhead_repeat(kube, op, n, args.overhead_cases))
        finally:
            op.stop()
            kube.close()
    load_after = loadavg()
    results = summary(
        args.cases,
        args.overhead_cases,
        args.runs,
        load_before,
        load_after,
        took,
        evaluated,
        overhead,
    )
    if args.json:
        print(json.dumps(results))
    return 0


def summary(
    cases_n: int,
    overhead_cases: int,
    runs: int,
    load_before: tuple[float, ...],
    load_after: tuple[float, ...],
    took: list[float],
    evaluated: list[float],
    overhead: list[dict[str, Any]],
) -> dict[str, Any]:
    """Print the table; the results document ``--json`` prints."""
    print(f"load average before {load_before}, after {load_after} (1, 5, 15 min)")
    print(
        f"promotion: {cases_n} cases, {2 * cases_n} case Runs; overhead: {overhead_cases} "
        f"cases, {2 * overhead_cases} case Runs at once"
    )
    print(f"{'':40} {'min':>7} {'median':>7} {'max':>7}")
    series: list[tuple[str, list[float]]] = [
        ("spec change -> promoted (s)", took),
        ("EvalRun created -> verdict (s)", evaluated),
        ("by hand: all Runs finished (s)", [r["by_hand_s"] for r in overhead]),
        ("EvalRun: created -> verdict (s)", [r["evalrun_s"] for r in overhead]),
        ("overhead per evaluated case (s)", [r["overhead_per_case_s"] for r in overhead]),
    ]
    for label, values in series:
        if values:
            low, mid, high = min(values), statistics.median(values), max(values)
            print(f"{label:40} {low:7.3g} {mid:7.3g} {high:7.3g}")
    results: dict[str, Any] = {
        "what": "spec change -> promoted, graded by the EvalRun controller; an EvalRun's "
        "overhead per evaluated case",
        "cases": cases_n,
        "runs": runs,
        "load_before": load_before,
        "load_after": load_after,
    }
    if took:
        results["spec_change_to_promoted_s"] = [round(v, 2) for v in took]
        results["evalrun_created_to_verdict_s"] = [round(v) for v in evaluated]
    if overhead:
        results["overhead"] = {
            "what": "EvalRun created -> verdict against the same Runs created by hand -> "
            "all finished, per evaluated case",
            "cases": overhead_cases,
            "case_runs": 2 * overhead_cases,
            "parallelism": 2 * overhead_cases,
            "per_case_s": mmm([r["overhead_per_case_s"] for r in overhead]),
            "repeats": overhead,
        }
    return results


if __name__ == "__main__":
    raise SystemExit(main())
