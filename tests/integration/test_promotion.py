"""Promotion gated on evaluation, on the real control plane with the real operator and
runner processes (issue 39 item 3).

A Topology with ``spec.promotion``: an edit becomes the candidate and the operator starts
its EvalRun against the active version by itself; Runs created meanwhile pin the active
version (asserted through their pinned bundles); once the EvalRun passes the Topology is
promoted and the next Run pins the new version; a failing candidate shows
``Promoted=False`` naming the regressions, and Runs keep the promoted version.

The EvalRun's verdict is written by this test, standing in for the EvalRun controller
(issue 39 items 1-2, another module): it patches the EvalRun's status subresource with the
cluster-admin identity the test operator itself runs with, exactly the fields the EvalRun
controller writes (``verdict``, ``regressed``). So that controller never races it, the
EvalSet's one case is graded by a judge Agent that does not exist: the EvalSet is
``Ready=False`` and its EvalRuns never start (a promotion only needs the EvalSet to
exist). What is under test here is everything the promotion does around that verdict.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from swarmkit_api import GROUP, VERSION
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from .review_support import (
    bind_people,
    bind_users,
    kubectl_as,
    review_admission,  # noqa: F401  (fixture)
    review_of,
    user_roles,
)
from .review_support import decide as decide_review
from .runs_support import (
    REPO,
    OperatorProcess,
    apply,
    apply_examples,
    cli,
    create,
    debug,
    doc,
    example,
    finished,
    get,
    run_manifest,
    succeeded,
    timer,
    wait_ready,
    wait_run,
)

TOPOLOGY = "review-pipeline"
PROMOTE_FORCE = REPO / "deploy" / "admission" / "promote-force.yaml"
EVAL_SET = "smoke"


# A short GC grace: the active version's renders must survive it while unreferenced
# by anything but the promotion.
pytestmark = pytest.mark.operator_settings(env={"SWARMKIT_GC_GRACE_SECONDS": "1"})


def eval_set() -> dict[str, Any]:
    return doc(
        "EvalSet",
        EVAL_SET,
        {
            "cases": [
                {
                    "name": "refund",
                    "input": "Review PR #42.",
                    # A judge that does not exist: see the module docstring.
                    "grader": {"type": "judgeAgent", "agent": "no-such-judge", "rubric": "x"},
                }
            ]
        },
    )


def with_promotion(doc: dict[str, Any]) -> dict[str, Any]:
    if doc["kind"] == "Topology" and doc["metadata"]["name"] == TOPOLOGY:
        doc["spec"]["promotion"] = {
            "evalSets": [{"name": EVAL_SET}],
            "gate": {"minCases": 1, "maxNewRegressions": 0},
        }
    return doc


def promoted(obj: dict[str, Any] | None) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Promoted":
            return dict(cond)
    return {}


def promotion(kube: Kube, ns: str) -> dict[str, Any]:
    topo = get(kube, ns, "Topology", TOPOLOGY) or {}
    return dict((topo.get("status") or {}).get("promotion") or {})


def set_reviewer_prompt(kube: Kube, ns: str, prompt: str) -> None:
    reviewer = example("Agent", "reviewer")
    reviewer["spec"]["systemPrompt"] = prompt
    apply(kube, ns, reviewer)


def wait_candidate(kube: Kube, ns: str, active: str) -> str:
    """The new candidate version (the Topology's current version, not the active one)."""

    def candidate() -> str | None:
        topo = get(kube, ns, "Topology", TOPOLOGY) or {}
        status = topo.get("status") or {}
        cand = (status.get("promotion") or {}).get("candidate") or {}
        if cand.get("version") and cand["version"] == status.get("version") != active:
            return str(cand["version"])
        return None

    wait_for(lambda: candidate() is not None, 60, message=lambda: debug(kube, ns))
    found = candidate()
    assert found is not None
    return found


def eval_run_of(kube: Kube, ns: str, candidate: str) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        runs = kube.custom.list_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            "evalruns",
            label_selector=f"swarmkit.dev/candidate-version={candidate}",
        )["items"]
        return runs[0] if runs else None

    wait_for(lambda: find() is not None, 30, message=lambda: debug(kube, ns))
    found = find()
    assert found is not None
    return found


def decide(kube: Kube, ns: str, name: str, verdict: str, regressed: list[str]) -> None:
    """Stand in for the EvalRun controller: write its verdict (see the module docstring)."""
    kube.custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        ns,
        "evalruns",
        name,
        {"status": {"verdict": verdict, "regressed": regressed}},
    )


def pinned_run(kube: Kube, ns: str, name: str, operator: OperatorProcess) -> tuple[str, str]:
    """Run the topology; (the topology version it pinned, the reviewer's prompt in its bundle)."""
    create(kube, ns, run_manifest(name))
    run = wait_run(kube, ns, name, finished, timeout=120, operator=operator)
    assert (succeeded(run) or {}).get("reason") == "Succeeded", debug(kube, ns, operator)
    status = run["status"]
    cm = kube.core.read_namespaced_config_map(status["bundleConfigMap"], ns)
    bundle = json.loads(cm.data["bundle.json"])
    assert bundle["topologies"][TOPOLOGY]["version"] == status["pinned"]["topology"]
    return str(status["pinned"]["topology"]), str(
        bundle["agents"]["reviewer"]["spec"]["systemPrompt"]
    )


def test_a_candidate_serves_only_once_its_evaluation_passes(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    create(kube, ns, eval_set())
    apply_examples(kube, ns, with_promotion)
    wait_ready(kube, ns, "Topology", TOPOLOGY)
    # The first version is active at once.
    wait_for(
        lambda: promoted(get(kube, ns, "Topology", TOPOLOGY)).get("status") == "True",
        60,
        message=lambda: debug(kube, ns),
    )
    v1 = promotion(kube, ns)["active"]["version"]
    old_prompt = (get(kube, ns, "Agent", "reviewer") or {})["spec"]["systemPrompt"]
    old_agent_cm = (get(kube, ns, "Agent", "reviewer") or {})["status"]["renderedConfigMap"]

    # A prompt change: a new Topology version, the candidate, evaluated against v1.
    with timer() as took:
        set_reviewer_prompt(kube, ns, "You review code, briefly.")
        v2 = wait_candidate(kube, ns, v1)
        evalrun = eval_run_of(kube, ns, v2)
        print(f"\nedit -> candidate with its EvalRun: {took():.2f} s")
    assert evalrun["spec"]["candidate"] == {"topologyRef": {"name": TOPOLOGY}, "version": v2}
    assert evalrun["spec"]["baseline"] == {"topologyRef": {"name": TOPOLOGY}, "version": v1}
    assert evalrun["spec"]["evalSetRef"] == {"name": EVAL_SET}
    owner = evalrun["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Topology", TOPOLOGY)
    cond = promoted(get(kube, ns, "Topology", TOPOLOGY))
    assert (cond["status"], cond["reason"]) == ("Unknown", "Evaluating"), cond

    # Meanwhile a Run pins the active version, with the old prompt.
    version, prompt = pinned_run(kube, ns, "during", operator)
    assert (version, prompt) == (v1, old_prompt)
    # The active version's agent render outlived the GC grace (1 s): only the promotion
    # refers to it now.
    assert kube.core.read_namespaced_config_map(old_agent_cm, ns).immutable is True

    # The evaluation passes: promoted, and the next Run pins the new version.
    with timer() as took:
        decide(kube, ns, evalrun["metadata"]["name"], "Pass", [])
        wait_for(
            lambda: promotion(kube, ns).get("active", {}).get("version") == v2,
            60,
            message=lambda: debug(kube, ns),
        )
        print(f"EvalRun Pass -> promoted: {took():.2f} s")
    status = promotion(kube, ns)
    assert "candidate" not in status
    assert [h["version"] for h in status["history"]] == [v1]
    assert status["active"]["evalRuns"] == [evalrun["metadata"]["name"]]
    cond = promoted(get(kube, ns, "Topology", TOPOLOGY))
    assert (cond["status"], cond["reason"]) == ("True", "Promoted"), cond
    version, prompt = pinned_run(kube, ns, "after", operator)
    assert (version, prompt) == (v2, "You review code, briefly.")

    # A failing candidate stays unpromoted, naming its regressions; Runs keep v2.
    set_reviewer_prompt(kube, ns, "Approve everything.")
    v3 = wait_candidate(kube, ns, v2)
    failing = eval_run_of(kube, ns, v3)
    decide(kube, ns, failing["metadata"]["name"], "Fail", ["refund"])
    wait_for(
        lambda: promoted(get(kube, ns, "Topology", TOPOLOGY)).get("status") == "False",
        60,
        message=lambda: debug(kube, ns),
    )
    cond = promoted(get(kube, ns, "Topology", TOPOLOGY))
    assert cond["reason"] == "EvaluationFailed", cond
    assert "smoke/refund" in cond["message"]
    status = promotion(kube, ns)
    assert status["active"]["version"] == v2
    assert status["candidate"]["version"] == v3
    assert status["candidate"]["regressions"] == ["smoke/refund"]
    version, prompt = pinned_run(kube, ns, "failed", operator)
    assert (version, prompt) == (v2, "You review code, briefly.")
    # The Warning Event of that transition names the regression too.
    topo_uid = (get(kube, ns, "Topology", TOPOLOGY) or {})["metadata"]["uid"]
    events = kube.core.list_namespaced_event(ns, field_selector=f"involvedObject.uid={topo_uid}")
    assert any(
        e.reason == "EvaluationFailed" and "smoke/refund" in (e.message or "") for e in events.items
    )


def _promotable(kube: Kube, ns: str, gate: dict[str, Any] | None = None) -> tuple[str, str]:
    """The examples with a promoted Topology and an edit under evaluation: (v1, v2)."""

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        doc = with_promotion(doc)
        if gate and doc["kind"] == "Topology" and doc["metadata"]["name"] == TOPOLOGY:
            doc["spec"]["promotion"]["gate"].update(gate)
        return doc

    create(kube, ns, eval_set())
    apply_examples(kube, ns, edit)
    wait_ready(kube, ns, "Topology", TOPOLOGY)
    wait_for(
        lambda: promoted(get(kube, ns, "Topology", TOPOLOGY)).get("status") == "True",
        60,
        message=lambda: debug(kube, ns),
    )
    v1 = promotion(kube, ns)["active"]["version"]
    set_reviewer_prompt(kube, ns, "You review code, briefly.")
    return v1, wait_candidate(kube, ns, v1)


@pytest.mark.usefixtures("review_admission")
def test_an_inconclusive_candidate_with_review_waits_for_a_person(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    bind_people(cluster, ns)
    v1, v2 = _promotable(kube, ns, {"onInconclusive": "review"})
    evalrun = eval_run_of(kube, ns, v2)
    decide_eval_run = decide  # the EvalRun's verdict (module docstring)
    decide_eval_run(kube, ns, evalrun["metadata"]["name"], "Inconclusive", [])
    name = f"promote-topology-{TOPOLOGY}-{v2[:8]}"
    wait_for(lambda: review_of(kube, ns, name) is not None, 60, message=lambda: debug(kube, ns))
    review = review_of(kube, ns, name)
    assert review is not None
    request = review["spec"]["request"]
    assert (request["kind"], request["contentHash"]) == ("promotion", v2)
    assert evalrun["metadata"]["name"] in request["context"]  # the comparison
    assert (review["metadata"]["ownerReferences"][0]["name"]) == TOPOLOGY
    cond = promoted(get(kube, ns, "Topology", TOPOLOGY))
    assert (cond["status"], cond["reason"]) == ("Unknown", "AwaitingReview"), cond
    assert promotion(kube, ns)["active"]["version"] == v1
    # A person decides (the admission policy checks who): approve promotes it.
    res = decide_review(cluster, ns, name, "alice", "approve")
    assert res.returncode == 0, res.stderr
    wait_for(
        lambda: promotion(kube, ns).get("active", {}).get("version") == v2,
        60,
        message=lambda: debug(kube, ns),
    )
    cond = promoted(get(kube, ns, "Topology", TOPOLOGY))
    assert (cond["status"], cond["reason"]) == ("True", "Promoted"), cond
    assert name in cond["message"]


def test_a_forced_promotion_needs_the_promote_verb_and_names_who(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    cluster.kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        input="\n---\n".join(json.dumps(d) for d in user_roles()),
    )
    cluster.kubectl("apply", "--server-side", "-f", str(PROMOTE_FORCE))
    bind_users(cluster, ns, [("eve", "edit"), ("olga", "admin")])
    v1, v2 = _promotable(kube, ns)

    def annotate(user: str, by: str, *dry_run: str) -> Any:
        return kubectl_as(
            cluster,
            user,
            "-n",
            ns,
            "annotate",
            "--overwrite",
            *dry_run,
            f"topology/{TOPOLOGY}",
            f"swarmkit.dev/force-promote={v2}",
            f"swarmkit.dev/force-promoted-by={by}",
        )

    # An editor (edit: may patch the Topology) cannot force; the policy takes effect
    # asynchronously, so wait for its first refusal. The probe is a server-side dry run:
    # an annotation admitted before the policy took effect would make every later
    # identical one a no-op the policy lets through.
    wait_for(
        lambda: "promote verb" in annotate("eve", "eve", "--dry-run=server").stderr,
        60,
        interval=1.0,
        message="the promote-force admission policy to take effect",
    )
    refused = cli(cluster, "promote", "--force", f"topology/{TOPOLOGY}", "-n", ns, "--as", "eve")
    assert refused.returncode == 1 and "promote verb" in refused.stderr, refused.stderr
    forged = annotate("olga", "mallory")
    assert forged.returncode != 0 and "must be your authenticated user name olga" in forged.stderr
    assert promotion(kube, ns)["active"]["version"] == v1
    shown = cli(cluster, "promote", f"topology/{TOPOLOGY}", "-n", ns)
    assert shown.returncode == 0 and v1 in shown.stdout and v2 in shown.stdout, shown.stderr
    ok = cli(cluster, "promote", "--force", f"topology/{TOPOLOGY}", "-n", ns, "--as", "olga")
    assert ok.returncode == 0, ok.stderr
    assert f"candidate {v2} forced by olga" in ok.stdout
    wait_for(
        lambda: promotion(kube, ns).get("active", {}).get("version") == v2,
        60,
        message=lambda: debug(kube, ns),
    )
    active = promotion(kube, ns)["active"]
    assert active["forcedBy"] == "olga"
    cond = promoted(get(kube, ns, "Topology", TOPOLOGY))
    assert (cond["status"], cond["reason"]) == ("True", "Forced") and "olga" in cond["message"]
    uid = (get(kube, ns, "Topology", TOPOLOGY) or {})["metadata"]["uid"]
    events = kube.core.list_namespaced_event(ns, field_selector=f"involvedObject.uid={uid}")
    assert any(e.reason == "Forced" and "olga" in (e.message or "") for e in events.items)


def test_an_agent_with_promotion_runs_its_active_version(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    """The same gate on an Agent: a Run of it pins its active version until its candidate
    passes (and a Topology naming it keeps that version too: its agentVersions)."""
    ns = namespace
    create(kube, ns, eval_set())

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Agent" and doc["metadata"]["name"] == "reviewer":
            doc["spec"]["promotion"] = {"evalSets": [{"name": EVAL_SET}]}
        return doc

    apply_examples(kube, ns, edit)
    wait_ready(kube, ns, "Topology", TOPOLOGY)
    wait_for(
        lambda: promoted(get(kube, ns, "Agent", "reviewer")).get("status") == "True",
        60,
        message=lambda: debug(kube, ns),
    )
    agent = get(kube, ns, "Agent", "reviewer") or {}
    a1, old_prompt = agent["status"]["version"], agent["spec"]["systemPrompt"]
    reviewer = example("Agent", "reviewer")
    reviewer["spec"]["systemPrompt"] = "Approve everything."
    reviewer["spec"]["promotion"] = {"evalSets": [{"name": EVAL_SET}]}
    apply(kube, ns, reviewer)

    def candidate() -> dict[str, Any]:
        status = (get(kube, ns, "Agent", "reviewer") or {}).get("status") or {}
        return dict((status.get("promotion") or {}).get("candidate") or {})

    wait_for(lambda: candidate().get("version"), 60, message=lambda: debug(kube, ns))
    a2 = candidate()["version"]
    assert a2 != a1
    evalrun = eval_run_of(kube, ns, a2)
    assert evalrun["spec"]["candidate"] == {"agentRef": {"name": "reviewer"}, "version": a2}
    assert evalrun["spec"]["baseline"] == {"agentRef": {"name": "reviewer"}, "version": a1}
    # A Run of the Agent, and one of the Topology naming it, both run the active version.
    create(kube, ns, run_manifest("solo", agent="reviewer"))
    run = wait_run(kube, ns, "solo", finished, timeout=120, operator=operator)
    assert (succeeded(run) or {}).get("reason") == "Succeeded", debug(kube, ns, operator)
    assert run["status"]["pinned"]["agents"]["reviewer"] == a1
    _, prompt = pinned_run(kube, ns, "team", operator)
    assert prompt == old_prompt
