"""A run that escalates to a human parks honestly: Succeeded=Unknown AwaitingReview, with
what must be decided in status.reviewItems (end to end: operator, Job, real runner)."""

from __future__ import annotations

from typing import Any

from swarmkit_devcluster.testing import Kube

from .review_support import LOCKED, deploy_skill, with_locked_deploy
from .runs_support import (
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    finished,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)


def test_escalation_parks_the_run_awaiting_review_with_its_question(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    apply_examples(kube, ns, edit=with_locked_deploy)
    apply(kube, ns, deploy_skill())
    replay = [{"toolCalls": [{"name": "deploy", "arguments": {}}]}, {"text": "deployed"}]
    apply(kube, ns, agent_with("deployer", replay, skills=["deploy"]))
    wait_ready(kube, ns, "Agent", "deployer")

    create(kube, ns, run_manifest("ship-it", agent="deployer"))
    run = wait_run(
        kube,
        ns,
        "ship-it",
        lambda r: (succeeded(r) or {}).get("reason") == "AwaitingReview",
        operator=operator,
    )
    cond = succeeded(run)
    assert cond is not None and cond["status"] == "Unknown"
    status = run["status"]
    [item] = status["reviewItems"]
    assert (item["kind"], item["skill"], item["agent"]) == ("escalation", "deploy", "deployer")
    assert LOCKED in item["question"]
    assert status.get("output", "") != "deployed", "the agent never got past the escalation"


def test_runner_start_up_error_is_validation_failed_naming_it(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    # A command pack whose required binary the runtime image lacks: the runner refuses to
    # start (exit 2) and the Run says which binary, instead of failing mid-run.
    def missing_binary(doc: dict[str, Any]) -> dict[str, Any]:
        doc = with_locked_deploy(doc)
        if doc["kind"] == "Workspace":
            doc["spec"]["commandPacks"][-1]["requires"] = ["swarmkit-no-such-binary"]
            doc["spec"]["commandPacks"][-1]["commands"][0]["effects"] = "read"
        return doc

    ns = namespace
    apply_examples(kube, ns, edit=missing_binary)
    replay = [{"text": "never reached"}]
    apply(kube, ns, agent_with("packed", replay, skills=["pack:ops"]))
    wait_ready(kube, ns, "Agent", "packed")
    create(kube, ns, run_manifest("cannot-start", agent="packed"))
    run = wait_run(kube, ns, "cannot-start", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "ValidationFailed"), cond
    assert "swarmkit-no-such-binary" in cond["message"]
