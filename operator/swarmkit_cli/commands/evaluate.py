"""``kubectl swarmkit eval EVALSET --agent NAME|--topology NAME``: evaluate, print the table.

Creates an EvalRun of the EvalSet against the candidate (``--version`` pins its content
hash; default: the version its Runs pin now) and a baseline (default: the same target at
its promoted version; ``--baseline-agent``/``--baseline-topology`` compare with another
target, ``--no-baseline`` evaluates the candidate alone), waits for its verdict, and
prints one row per case (each side's outcome, score and the grader's reasoning), then each
side's pass rate with its 95 % interval, the paired difference with its interval and the
exact McNemar p-value, the regressed, fixed and flaky cases, cost and latency, and the
verdict. ``--show EVALRUN`` prints an existing EvalRun the same way without creating one.

Exit status: 0 for Pass, 1 for Fail or Inconclusive (or an error), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import secrets
import time
from typing import Any

from swarmkit_api import API_VERSION, GROUP, VERSION
from swarmkit_api.conditions import SUCCEEDED

from ..console import Console
from ..kube import check_name, connect
from ..plugin import (
    EXIT_FINDINGS,
    EXIT_OK,
    CommandError,
    UsageError,
    add_command,
    add_namespace_flag,
    api_reason,
)

#: Seconds between two reads of the EvalRun while waiting.
POLL_SECONDS = 2.0
STYLES = {"Pass": "bold+green", "Fail": "bold+red", "Inconclusive": "bold+yellow"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "eval",
        run,
        help="evaluate an EvalSet against an Agent or Topology version and print the results",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("evalset", nargs="?", help="the EvalSet to run")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--agent", help="the candidate Agent")
    target.add_argument("--topology", help="the candidate Topology")
    parser.add_argument("--version", help="the candidate's content hash (status.version)")
    base = parser.add_mutually_exclusive_group()
    base.add_argument("--baseline-agent", help="compare with this Agent")
    base.add_argument("--baseline-topology", help="compare with this Topology")
    base.add_argument("--no-baseline", action="store_true", help="no baseline side")
    parser.add_argument("--baseline-version", help="the baseline's content hash")
    parser.add_argument("--trials", type=int, help="trials per case with a model grader")
    parser.add_argument("--parallelism", type=int, help="most case Runs at once")
    parser.add_argument("--min-cases", type=int, help="fewer graded cases is Inconclusive")
    parser.add_argument("--margin", type=float, help="non-inferiority margin (0..1)")
    parser.add_argument("--min-pass-rate", type=float, help="the candidate's floor (0..1)")
    parser.add_argument("--no-cache", action="store_true", help="grade every case afresh")
    parser.add_argument("--name", help="the EvalRun's name (default: EVALSET-<random>)")
    parser.add_argument("--show", metavar="EVALRUN", help="print an existing EvalRun")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds to wait for the verdict"
    )
    parser.add_argument(
        "--no-wait", action="store_true", help="create the EvalRun and print its name"
    )
    add_namespace_flag(parser)


def evalrun_manifest(args: argparse.Namespace, namespace: str) -> dict[str, Any]:
    """The EvalRun the arguments ask for (UsageError for a combination that makes none)."""
    if not args.evalset:
        raise UsageError("name the EvalSet to run (or --show EVALRUN)")
    check_name("EvalSet", args.evalset)
    if not (args.agent or args.topology):
        raise UsageError("name the candidate: --agent NAME or --topology NAME")
    candidate: dict[str, Any] = (
        {"agentRef": {"name": args.agent}}
        if args.agent
        else {"topologyRef": {"name": args.topology}}
    )
    if args.version:
        candidate["version"] = args.version
    spec: dict[str, Any] = {"evalSetRef": {"name": args.evalset}, "candidate": candidate}
    if args.no_baseline:
        spec["compare"] = False
    else:
        baseline: dict[str, Any] = {}
        if args.baseline_agent:
            baseline["agentRef"] = {"name": args.baseline_agent}
        if args.baseline_topology:
            baseline["topologyRef"] = {"name": args.baseline_topology}
        if args.baseline_version:
            baseline["version"] = args.baseline_version
        if baseline:
            spec["baseline"] = baseline
    criteria = {
        k: v
        for k, v in (
            ("minCases", args.min_cases),
            ("nonInferiorityMargin", args.margin),
            ("minPassRate", args.min_pass_rate),
        )
        if v is not None
    }
    if criteria:
        spec["criteria"] = criteria
    for field, value in (("trials", args.trials), ("parallelism", args.parallelism)):
        if value is not None:
            spec[field] = value
    if args.no_cache:
        spec["reuseResults"] = False
    name = args.name or f"{args.evalset[:50]}-{secrets.token_hex(3)}"
    check_name("EvalRun", name)
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": API_VERSION, "kind": "EvalRun", "metadata": meta, "spec": spec}


def run(args: argparse.Namespace, console: Console) -> int:
    kube = connect(
        args.kubeconfig,
        args.namespace,
        context=args.context,
        as_user=args.as_user,
        as_group=args.as_group,
    )
    try:
        if args.show:
            return show(kube.get("EvalRun", args.show), console)
        manifest = evalrun_manifest(args, kube.namespace)
        name = _create(kube, manifest)
        console.info(f"evalrun.{GROUP}/{name} created")
        if args.no_wait:
            console.print(name)
            return EXIT_OK
        return show(_wait(kube, name, args.timeout, console), console)
    finally:
        kube.close()


def _create(kube: Any, manifest: dict[str, Any]) -> str:
    from kubernetes.client.exceptions import ApiException

    try:
        made = kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, "evalruns", manifest
        )
    except ApiException as exc:
        raise CommandError(f"creating the EvalRun: {api_reason(exc)}") from None
    return str(made["metadata"]["name"])


def _wait(kube: Any, name: str, timeout: float, console: Console) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        obj: dict[str, Any] = kube.get("EvalRun", name)
        status = obj.get("status") or {}
        if status.get("completionTime"):
            return obj
        message = _succeeded(status)[1]
        if message and message != last:
            console.info(message)
            last = message
        if time.monotonic() > deadline:
            raise CommandError(f"EvalRun {name} has no verdict after {timeout:.0f}s: {last}")
        time.sleep(POLL_SECONDS)


def _succeeded(status: dict[str, Any]) -> tuple[str, str]:
    for cond in status.get("conditions") or ():
        if cond.get("type") == SUCCEEDED:
            return str(cond.get("reason", "")), str(cond.get("message", ""))
    return "", ""


def _side(result: dict[str, Any] | None) -> str:
    if not result:
        return "-"
    text = str(result.get("outcome", "Pending"))
    if result.get("trials", 0) > 1:
        text += f" {result.get('passes', 0)}/{result['trials']}"
    return text + (" (cached)" if result.get("cached") else "")


def _rate(summary: dict[str, Any] | None) -> str:
    if not summary or summary.get("passRate") is None:
        return "-"
    interval = summary.get("interval") or {}
    return (
        f"{summary['passRate']:.0%} ({summary.get('passed', 0)}/{summary.get('cases', 0)}), "
        f"95% [{interval.get('low', 0):.2f}, {interval.get('high', 0):.2f}]"
    )


def _judge(judge: dict[str, Any]) -> str:
    """One judge's calibration against the human labels, on one line."""
    text = f"judge {judge.get('judge')}: "
    if judge.get("kappa") is None:
        text += "kappa undefined"
    else:
        i = judge.get("interval") or {}
        text += f"kappa {judge['kappa']:.2f}, 95% [{i.get('low', 0):.2f}, {i.get('high', 0):.2f}]"
    text += f" over {judge.get('labels', 0)} label(s), {judge.get('agreed', 0)} agreed"
    if judge.get("minKappa") is not None:
        state = "calibrated" if judge.get("calibrated") else "NOT calibrated"
        text += f"; minKappa {judge['minKappa']}, minLabels {judge.get('minLabels')}: {state}"
    return text


def show(obj: dict[str, Any], console: Console) -> int:
    """Print an EvalRun: the cases, the two sides, the comparison and the verdict."""
    status = obj.get("status") or {}
    rows = []
    for case in status.get("cases") or ():
        cand, base = case.get("candidate") or {}, case.get("baseline")
        why = str(cand.get("reasoning") or "").replace("\n", " ")
        rows.append(
            [
                case["name"],
                case.get("grader", ""),
                _side(cand),
                _side(base),
                case.get("change", ""),
                why[:60],
            ]
        )
    console.table(["case", "grader", "candidate", "baseline", "change", "reasoning"], rows)
    console.print()
    for side in ("candidate", "baseline"):
        summary = status.get(side)
        if summary:
            console.print(
                f"{side}: {summary.get('target')}@{summary.get('version')}  {_rate(summary)}  "
                f"p50 {summary.get('latencyP50Seconds')}s p95 {summary.get('latencyP95Seconds')}s"
            )
    comparison = status.get("comparison") or {}
    if comparison.get("interval"):
        i = comparison["interval"]
        console.print(
            f"difference: {comparison.get('difference'):+.3f}, 95% [{i['low']:+.3f}, "
            f"{i['high']:+.3f}] over {comparison.get('pairs')} pairs; exact McNemar "
            f"p = {comparison.get('pValue')}"
        )
    for label in ("regressed", "fixed", "flaky", "errored"):
        if status.get(label):
            console.print(f"{label}: {', '.join(status[label])}")
    for judge in status.get("judges") or ():
        console.print(_judge(judge))
    if status.get("totalCost"):
        console.print(f"cost: {status['totalCost']} {status.get('currency') or ''}".rstrip())
    verdict = status.get("verdict")
    if not verdict:
        reason, message = _succeeded(status)
        console.print(f"no verdict yet ({reason}: {message})")
        return EXIT_FINDINGS
    console.print(
        console.style(f"verdict: {verdict}", STYLES.get(verdict))
        + f" ({status.get('verdictReason')})"
    )
    return EXIT_OK if verdict == "Pass" else EXIT_FINDINGS
