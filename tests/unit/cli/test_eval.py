"""``kubectl swarmkit eval``: the EvalRun it creates, and how it prints one."""

from __future__ import annotations

import argparse
import io

import pytest

from swarmkit_api import validate_manifest
from swarmkit_cli.commands import evaluate
from swarmkit_cli.console import Console
from swarmkit_cli.plugin import EXIT_FINDINGS, EXIT_OK, UsageError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    evaluate.register(parser.add_subparsers())
    return parser.parse_args(["eval", *argv])


def test_the_evalrun_it_creates_is_valid() -> None:
    args = parse("triage-cases", "--agent", "triage", "--version", "0123abcd",
                 "--baseline-agent", "triage-old", "--trials", "2", "--min-cases", "3",
                 "--margin", "0.1", "--no-cache", "--name", "run-1")  # fmt: skip
    manifest = evaluate.evalrun_manifest(args, "support")
    validate_manifest(manifest)
    spec = manifest["spec"]
    assert spec["candidate"] == {"agentRef": {"name": "triage"}, "version": "0123abcd"}
    assert spec["baseline"] == {"agentRef": {"name": "triage-old"}}
    assert spec["criteria"] == {"minCases": 3, "nonInferiorityMargin": 0.1}
    assert spec["trials"] == 2 and spec["reuseResults"] is False
    assert manifest["metadata"] == {"name": "run-1", "namespace": "support"}
    alone = evaluate.evalrun_manifest(parse("s", "--topology", "t", "--no-baseline"), "ns")
    assert alone["spec"]["compare"] is False and "baseline" not in alone["spec"]
    assert alone["metadata"]["name"].startswith("s-")


def test_usage_errors() -> None:
    with pytest.raises(UsageError):
        evaluate.evalrun_manifest(parse("triage-cases"), "ns")
    with pytest.raises(UsageError):
        evaluate.evalrun_manifest(parse("--agent", "a"), "ns")
    with pytest.raises(SystemExit):
        parse("s", "--agent", "a", "--topology", "t")


EVALRUN = {
    "metadata": {"name": "e1"},
    "status": {
        "verdict": "Fail",
        "verdictReason": "critical case(s) regressed: wants-refund",
        "candidate": {
            "target": "Agent/a",
            "version": "v1",
            "passRate": 0.5,
            "passed": 1,
            "cases": 2,
            "interval": {"low": 0.09, "high": 0.91},
        },
        "comparison": {
            "difference": -0.5,
            "interval": {"low": -1.0, "high": 0.0},
            "pairs": 2,
            "pValue": 1.0,
        },
        "regressed": ["wants-refund"],
        "cases": [
            {
                "name": "wants-refund",
                "grader": "contains",
                "change": "Regressed",
                "candidate": {"outcome": "Failed", "reasoning": "does not contain 'refund'"},
                "baseline": {"outcome": "Passed", "cached": True},
            },
        ],
        "totalCost": "0.009",
        "currency": "USD",
    },
}


def test_show_prints_the_table_and_the_verdict() -> None:
    out = io.StringIO()
    code = evaluate.show(EVALRUN, Console(out=out, err=io.StringIO(), environ={}))
    text = out.getvalue()
    assert code == EXIT_FINDINGS
    assert "wants-refund" in text and "Regressed" in text and "Passed (cached)" in text
    assert "50% (1/2), 95% [0.09, 0.91]" in text
    assert "difference: -0.500, 95% [-1.000, +0.000]" in text
    assert "regressed: wants-refund" in text and "cost: 0.009 USD" in text
    assert "verdict: Fail (critical case(s) regressed: wants-refund)" in text
    passed = {**EVALRUN, "status": {**EVALRUN["status"], "verdict": "Pass"}}
    assert (
        evaluate.show(passed, Console(out=io.StringIO(), err=io.StringIO(), environ={})) == EXIT_OK
    )


def test_show_prints_each_judges_kappa() -> None:
    judges = [
        {"judge": "Agent/yes-judge", "labels": 6, "agreed": 3, "kappa": 0.0,
         "interval": {"low": -0.2, "high": 0.2}, "minKappa": 0.6, "minLabels": 6,
         "calibrated": False},
        {"judge": "Agent/other", "labels": 2, "agreed": 2},
    ]  # fmt: skip
    status = {
        **EVALRUN["status"],
        "judges": judges,
        "verdict": "Inconclusive",
        "verdictReason": "judge Agent/yes-judge: Cohen's kappa 0.0 is below minKappa 0.6",
    }
    out = io.StringIO()
    code = evaluate.show(
        {**EVALRUN, "status": status}, Console(out=out, err=io.StringIO(), environ={})
    )
    text = out.getvalue()
    assert code == EXIT_FINDINGS
    assert (
        "judge Agent/yes-judge: kappa 0.00, 95% [-0.20, 0.20] over 6 label(s), 3 agreed; "
        "minKappa 0.6, minLabels 6: NOT calibrated" in text
    )
    assert "judge Agent/other: kappa undefined over 2 label(s), 2 agreed\n" in text
    assert "verdict: Inconclusive (judge Agent/yes-judge" in text
