"""Evaluation end to end: the real apiserver, the operator under the chart's RBAC, the runner
in Jobs, the replay model (scripted answers, priced like a real API).

Two Agents answer the same support ticket: ``triage`` (the baseline) says the category is
billing; ``triage-v2`` (the candidate) adds that it is a refund. An EvalSet of six cases
(contains, regex, exact, a JSON Schema with JSONPath assertions; ``wants-refund`` marked
critical) is evaluated:

- bad EvalSets are refused at admission; EvalSets whose judges name a missing Skill or
  Agent are ``Ready=False`` with the reason, and turn Ready when the Agent appears;
- the candidate against the baseline: every case is a Run of each side (linked, pinned at
  the side's version), ``wants-refund`` is fixed, the difference's interval is above the
  margin: ``Pass``; an EvalRun's spec cannot be changed;
- the same EvalRun again without the cache: new Runs, the same results, intervals and
  verdict (the replay model and the seeded bootstrap);
- the sides swapped with the cache: no new Run at all (each side's results are reused by
  case, version, grader and trials), and the critical case regressed: ``Fail``, naming it;
- a judge Agent and a judge decision skill each grade (2 trials, their judge Runs read);
  a judge whose answer is not a structured verdict: the case is ``Errored``, never passed,
  and the verdict is ``Inconclusive``;
- replay mode: cases from recorded Runs (label selector), their outputs the reference; the
  replayed case Runs are read-only, a write refused in the runner;
- ``kubectl swarmkit eval`` creates the EvalRun, waits and prints the table and the verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import (
    CLI,
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    debug,
    doc,
    example,
    finished,
    get,
    succeeded,
    wait_ready,
    wait_run,
)

USAGE = {"inputTokens": 1000, "outputTokens": 100}  # 0.0045 USD per turn at these prices
PRICES = {"currency": "USD", "input": "3", "output": "15"}
BASELINE = "category: billing"
CANDIDATE = '{"category": "billing", "refund": true, "team": "payments"}'


def case(name: str, grader: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "input": f"Ticket {name}: I was charged twice.",
        "grader": grader,
        **extra,
    }


CASES = [
    case("says-billing", {"type": "contains", "expected": "billing"}),
    case("billing-any-case", {"type": "contains", "expected": "BILLING", "ignoreCase": True}),
    case("has-category", {"type": "regex", "pattern": "category"}),
    case("not-escalated", {"type": "regex", "pattern": "^(?!.*escalat)"}),
    case("wants-refund", {"type": "contains", "expected": "refund"}, critical=True),
    case("mentions-payments-or-billing", {"type": "regex", "pattern": "payments|billing"}),
]


@pytest.fixture
def agents(kube: Kube, namespace: str, operator: OperatorProcess) -> str:
    workspace = example("Workspace", "default")
    for provider in workspace["spec"]["modelProviders"]:
        if provider["type"] == "replay":
            provider["prices"] = PRICES
    apply(kube, namespace, workspace)
    wait_ready(kube, namespace, "Workspace", "default")
    for name, answer in (("triage", BASELINE), ("triage-v2", CANDIDATE), ("judge", "no idea")):
        apply(kube, namespace, agent_with(name, [{"text": answer, "usage": USAGE}]))
    for name in ("triage", "triage-v2", "judge"):
        wait_ready(kube, namespace, "Agent", name)
    return namespace


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def evalrun(kube: Kube, ns: str, name: str, **spec: Any) -> dict[str, Any]:
    apply(kube, ns, doc("EvalRun", name, {"evalSetRef": {"name": "triage-cases"}, **spec}))

    def done() -> dict[str, Any] | None:
        obj = get(kube, ns, "EvalRun", name)
        return obj if (obj or {}).get("status", {}).get("verdict") else None

    result: dict[str, Any] = wait_for(
        done,
        300,
        interval=1,
        message=lambda: (
            json.dumps(get(kube, ns, "EvalRun", name), indent=1) + "\n" + debug(kube, ns)
        ),
    )
    return result


def eval_runs_of(kube: Kube, ns: str, evalrun_name: str) -> list[dict[str, Any]]:
    items = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, "runs", label_selector=f"swarmkit.dev/eval-run={evalrun_name}"
    )["items"]
    return list(items)


def settled_entries(kube: Kube, ns: str, quota: str) -> list[dict[str, Any]]:
    """SpendQuota ``quota``'s entries once every one is settled (``spent``)."""

    def settled() -> list[dict[str, Any]] | None:
        status = (get(kube, ns, "SpendQuota", quota) or {}).get("status") or {}
        found = list(status.get("entries") or [])
        return found if found and all(e["state"] == "spent" for e in found) else None

    entries: list[dict[str, Any]] = wait_for(
        settled, 60, message=lambda: json.dumps(get(kube, ns, "SpendQuota", quota))
    )
    return entries


def test_bad_evalsets_are_refused_at_admission(kube: Kube, namespace: str, crds: Any) -> None:
    bad = [
        ({"cases": []}, "needs cases or fromRuns"),
        ({"cases": [case("a", {"type": "exact"})]}, "need expected"),
        ({"cases": [case("a", {"type": "regex", "pattern": "x"})] * 2}, "unique"),
        ({"cases": [case("a", {"type": "judgeAgent", "agent": "judge"})]}, "rubric"),
    ]
    for spec, message in bad:
        with pytest.raises(ApiException) as exc:
            apply(kube, namespace, doc("EvalSet", "bad", spec))
        assert exc.value.status == 422 and message in str(exc.value.body), exc.value.body


def test_an_evalset_naming_a_missing_judge_is_not_ready(kube: Kube, agents: str) -> None:
    ns = agents
    rubric = {"type": "judgeAgent", "agent": "strict-judge", "rubric": "names the team"}
    apply(kube, ns, doc("EvalSet", "judged", {"cases": [case("team", rubric)]}))
    skill = {"type": "judgeSkill", "skill": "grade-answer", "agent": "judge"}
    apply(kube, ns, doc("EvalSet", "skill-judged", {"cases": [case("team", skill)]}))

    def ready_is(name: str, status: str, reason: str) -> dict[str, Any] | None:
        cond = condition(get(kube, ns, "EvalSet", name), "Ready")
        return cond if cond.get("status") == status and cond.get("reason") == reason else None

    missing = wait_for(lambda: ready_is("judged", "False", "AgentNotFound"), 60)
    assert "strict-judge" in missing["message"] and "spec.cases[0]" in missing["message"]
    missing = wait_for(lambda: ready_is("skill-judged", "False", "SkillNotFound"), 60)
    assert "grade-answer" in missing["message"]
    apply(kube, ns, agent_with("strict-judge", [{"text": '{"verdict": "pass"}'}]))
    wait_for(lambda: ready_is("judged", "True", "Valid"), 60)


def _outcomes(status: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (c["name"], c["candidate"]["outcome"], c["baseline"]["outcome"], c["change"])
        for c in status["cases"]
    ]


def test_candidate_against_baseline_replayed_and_cached(kube: Kube, agents: str) -> None:
    ns = agents
    apply(kube, ns, doc("EvalSet", "triage-cases", {"cases": CASES}))
    wait_ready(kube, ns, "EvalSet", "triage-cases")
    versions = {
        a: get(kube, ns, "Agent", a)["status"]["version"]  # type: ignore[index]
        for a in ("triage", "triage-v2")
    }
    first = evalrun(
        kube, ns, "v2-vs-v1", candidate={"agentRef": {"name": "triage-v2"}},
        baseline={"agentRef": {"name": "triage"}}, parallelism=6,
    )  # fmt: skip
    status = first["status"]
    assert status["verdict"] == "Pass", json.dumps(status, indent=1)
    assert condition(first, "Succeeded")["reason"] == "Evaluated"
    assert status["fixed"] == ["wants-refund"] and status["regressed"] == []
    assert status["candidate"]["passRate"] == 1.0 and status["candidate"]["passed"] == 6
    assert status["baseline"]["passed"] == 5
    assert status["candidate"]["version"] == versions["triage-v2"]
    assert status["baseline"]["version"] == versions["triage"]
    assert status["comparison"]["interval"]["low"] >= -0.05
    assert status["comparison"]["pValue"] == 1.0  # one discordant case
    # 12 Runs of one priced turn each.
    assert status["totalCost"] == "0.054" and status["currency"] == "USD"
    # Every case is linked to its Runs, each pinned at its side's version.
    runs = {r["metadata"]["name"]: r for r in eval_runs_of(kube, ns, "v2-vs-v1")}
    assert len(runs) == 12
    for c in status["cases"]:
        for side, agent in (("candidate", "triage-v2"), ("baseline", "triage")):
            (name,) = c[side]["runs"]
            run = runs[name]
            assert succeeded(run)["status"] == "True"  # type: ignore[index]
            assert run["status"]["pinned"]["agents"][agent] == versions[agent]
            assert run["metadata"]["labels"]["swarmkit.dev/eval-case"] == c["name"]
    # The spec is immutable.
    with pytest.raises(ApiException) as exc:
        kube.custom.patch_namespaced_custom_object(
            GROUP, VERSION, ns, "evalruns", "v2-vs-v1", {"spec": {"trials": 2}}
        )
    assert exc.value.status == 422 and "immutable" in str(exc.value.body)

    again = evalrun(
        kube, ns, "v2-vs-v1-again", candidate={"agentRef": {"name": "triage-v2"}},
        baseline={"agentRef": {"name": "triage"}}, parallelism=6, reuseResults=False,
    )  # fmt: skip
    assert len(eval_runs_of(kube, ns, "v2-vs-v1-again")) == 12
    replayed = again["status"]
    assert _outcomes(replayed) == _outcomes(status)
    for field in ("verdict", "comparison", "fixed", "regressed", "flaky"):
        assert replayed[field] == status[field], field
    for side in ("candidate", "baseline"):
        for field in ("passRate", "interval", "score", "version", "cost"):
            assert replayed[side][field] == status[side][field], (side, field)

    swapped = evalrun(
        kube, ns, "v1-vs-v2", candidate={"agentRef": {"name": "triage"}},
        baseline={"agentRef": {"name": "triage-v2"}},
    )  # fmt: skip
    assert eval_runs_of(kube, ns, "v1-vs-v2") == []  # every side result came from the cache
    reused = swapped["status"]
    assert all(c["candidate"]["cached"] and c["baseline"]["cached"] for c in reused["cases"])
    assert reused["verdict"] == "Fail" and reused["regressed"] == ["wants-refund"]
    assert "wants-refund" in reused["verdictReason"]


def test_judges_grade_and_a_grader_that_errors_never_passes(kube: Kube, agents: str) -> None:
    """A judge Agent and a judge decision skill each grade (their Runs' structured answers
    read); a judge whose answer is not a verdict makes its case Errored, never passed."""
    ns = agents
    apply(kube, ns, example("Skill", "code-quality-review"))  # category decision
    verdict = '{"verdict": "pass", "score": 0.9, "reasoning": "names billing"}'
    confident = '{"verdict": "pass", "confidence": 0.92, "reasoning": "a billing question"}'
    apply(kube, ns, agent_with("strict-judge", [{"text": verdict}]))
    apply(kube, ns, agent_with("skill-judge", [{"text": confident}]))
    wait_ready(kube, ns, "Skill", "code-quality-review")
    for name in ("strict-judge", "skill-judge"):
        wait_ready(kube, ns, "Agent", name)
    rubric = "is the category right?"
    cases = [
        case("garbage-judge", {"type": "judgeAgent", "agent": "judge", "rubric": rubric}),
        case("agent-judge", {"type": "judgeAgent", "agent": "strict-judge", "rubric": rubric}),
        case(
            "skill-judge",
            {"type": "judgeSkill", "skill": "code-quality-review", "agent": "skill-judge"},
        ),
    ]
    apply(kube, ns, doc("EvalSet", "triage-cases", {"cases": cases}))
    wait_ready(kube, ns, "EvalSet", "triage-cases")
    result = evalrun(
        kube, ns, "judged", candidate={"agentRef": {"name": "triage-v2"}}, compare=False,
        trials=2, criteria={"minCases": 1, "minPassRate": 0.1},
    )  # fmt: skip
    status = result["status"]
    by_name = {c["name"]: c["candidate"] for c in status["cases"]}
    garbage = by_name["garbage-judge"]
    assert garbage["outcome"] == "Errored" and "not a structured verdict" in garbage["reasoning"]
    assert garbage["judgeRuns"] and garbage["judgeRuns"][0] == "judged-garbage-judge-jc0"
    agent_judged, skill_judged = by_name["agent-judge"], by_name["skill-judge"]
    assert (agent_judged["outcome"], agent_judged["passes"], agent_judged["trials"]) == (
        "Passed",
        2,
        2,
    )
    assert agent_judged["score"] == 0.9 and agent_judged["reasoning"] == "names billing"
    assert skill_judged["outcome"] == "Passed" and skill_judged["score"] == 0.92
    assert len(skill_judged["runs"]) == 2 and len(skill_judged["judgeRuns"]) == 2
    for run in skill_judged["judgeRuns"]:
        judge = get(kube, ns, "Run", run)
        assert judge is not None and judge["spec"]["agentRef"]["name"] == "skill-judge"
        assert "Use the code-quality-review skill" in judge["spec"]["input"]
    assert status["errored"] == ["garbage-judge"] and status["verdict"] == "Inconclusive"
    assert status["candidate"]["passed"] == 2


def test_replay_mode_cases_from_recorded_runs_are_read_only(
    kube: Kube, agents: str, operator: OperatorProcess
) -> None:
    """Two recorded Runs of the baseline (labelled ``team: payments``) become cases, their
    outputs the reference; the replayed case Runs are read-only: the candidate's scripted
    ``file_io`` write is refused in the runner."""
    ns = agents
    writes = {"name": "file_io", "arguments": {"operation": "write", "path": "x", "content": "y"}}
    turns = [{"toolCalls": [writes]}, {"text": BASELINE}]
    apply(kube, ns, agent_with("writer", turns, nativeTools={"fileIo": True}))
    wait_ready(kube, ns, "Agent", "writer")
    for n in range(2):
        run = doc("Run", f"recorded-{n}", {"agentRef": {"name": "triage"}, "input": f"ticket {n}"})
        run["metadata"]["labels"] = {"team": "payments"}
        apply(kube, ns, run)
    for n in range(2):
        recorded = wait_run(kube, ns, f"recorded-{n}", finished, operator=operator)
        assert (succeeded(recorded) or {}).get("status") == "True", recorded
    apply(
        kube,
        ns,
        doc("EvalSet", "triage-cases", {"fromRuns": {"matchLabels": {"team": "payments"}}}),
    )
    wait_ready(kube, ns, "EvalSet", "triage-cases")
    result = evalrun(
        kube, ns, "replayed", candidate={"agentRef": {"name": "writer"}},
        baseline={"agentRef": {"name": "triage"}}, criteria={"minCases": 2},
    )  # fmt: skip
    status = result["status"]
    assert [c["name"] for c in status["cases"]] == ["run-recorded-1", "run-recorded-0"]
    # The writer answers as the recording did once its write was refused: same answers.
    assert [c["change"] for c in status["cases"]] == ["Same", "Same"]
    assert status["candidate"]["passed"] == 2 and status["verdict"] == "Pass"
    for c in status["cases"]:
        (name,) = c["candidate"]["runs"]
        run = get(kube, ns, "Run", name)
        assert run is not None and run["spec"]["readOnly"] is True
    first = get(kube, ns, "Run", status["cases"][0]["candidate"]["runs"][0])
    logs = kube.core.read_namespaced_pod_log(first["status"]["podName"], ns)  # type: ignore[index]
    refused = [json.loads(line) for line in logs.splitlines() if '"tool.refused"' in line]
    assert refused and refused[0]["tool"] == "file_io", logs[-2000:]


def test_kubectl_swarmkit_eval_prints_the_table(
    kube: Kube, agents: str, cluster: LocalCluster
) -> None:
    ns = agents
    apply(kube, ns, doc("EvalSet", "triage-cases", {"cases": CASES}))
    wait_ready(kube, ns, "EvalSet", "triage-cases")
    proc = subprocess.run(
        [CLI, "eval", "triage-cases", "--agent", "triage-v2", "--baseline-agent", "triage",
         "--name", "from-cli", "-n", ns, "--timeout", "300"],
        capture_output=True, text=True, timeout=400, check=False,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NO_COLOR": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "evalrun.swarmkit.dev/from-cli created" in proc.stderr
    assert "wants-refund" in out and "Fixed" in out
    assert "candidate: Agent/triage-v2@" in out and "100% (6/6)" in out
    assert "fixed: wants-refund" in out and "verdict: Pass" in out


def test_one_spend_reservation_per_evalrun(kube: Kube, agents: str) -> None:
    """The EvalRun reserves its worst case (12 Runs of maxCostPerRun 0.10) on the quota
    before its first Run, or is refused with the quota's reason and starts none; its Runs
    reserve nothing of their own, and at the end the reservation becomes what they spent."""
    ns = agents
    apply(kube, ns, doc("EvalSet", "triage-cases", {"cases": CASES}))
    wait_ready(kube, ns, "EvalSet", "triage-cases")
    quota = {"window": "daily", "cost": "1.00", "currency": "USD", "onExhausted": "fail"}
    apply(kube, ns, doc("SpendQuota", "evals", quota))
    sides = {
        "candidate": {"agentRef": {"name": "triage-v2"}},
        "baseline": {"agentRef": {"name": "triage"}},
        "maxCostPerRun": "0.10",  # a call of 4096 tokens at most: 0.06144 USD
        "parallelism": 6,
    }
    apply(kube, ns, doc("EvalRun", "too-dear", {"evalSetRef": {"name": "triage-cases"}, **sides}))

    def refused() -> dict[str, Any] | None:
        cond = condition(get(kube, ns, "EvalRun", "too-dear"), "Succeeded")
        return cond if cond.get("status") == "False" else None

    cond = wait_for(refused, 120, message=lambda: debug(kube, ns))
    assert cond["reason"] == "BudgetExhausted", cond
    assert "SpendQuota evals" in cond["message"] and "needs 1.2 USD" in cond["message"], cond
    assert eval_runs_of(kube, ns, "too-dear") == []
    entries = ((get(kube, ns, "SpendQuota", "evals") or {}).get("status") or {}).get("entries")
    assert not entries, entries  # the refusal released what it held

    apply(kube, ns, doc("SpendQuota", "evals", {**quota, "cost": "2.00"}))
    done = evalrun(kube, ns, "fits", **sides)
    assert done["status"]["verdict"] == "Pass", json.dumps(done["status"], indent=1)[:3000]
    assert done["status"]["spendReservations"] == ["evals"]
    assert len(eval_runs_of(kube, ns, "fits")) == 12
    entries = settled_entries(kube, ns, "evals")
    # One entry, the EvalRun's, booked at what its 12 Runs spent (none reserved its own).
    assert [(e["run"], e["cost"]) for e in entries] == [("EvalRun/fits", "0.054")], entries
    assert entries[0]["uid"] == done["metadata"]["uid"]
