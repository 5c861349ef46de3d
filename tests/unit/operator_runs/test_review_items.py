"""A run parked for review shows what must be decided in its status, not only in a message."""

from __future__ import annotations

from swarmkit_api import RunStatus
from swarmkit_api.bundle import RunResult
from swarmkit_api.run import ReviewItem
from swarmkit_operator.builders.run_status import Verdict, status_patch


def test_review_items_are_copied_into_status() -> None:
    item = ReviewItem(
        kind="escalation", skill="deploy-risk-review", question="Approve the rollout?"
    )
    result = RunResult(outcome="AwaitingReview", review_items=[item])
    verdict = Verdict(phase="Running", status="Unknown", reason="AwaitingReview", result=result)
    patch = status_patch({}, verdict, generation=1)
    assert patch["reviewItems"] == [
        {"kind": "escalation", "skill": "deploy-risk-review", "question": "Approve the rollout?"}
    ]
    # The patch is valid status as the CRD and the model define it.
    status = RunStatus.model_validate(patch)
    assert status.review_items[0].question == "Approve the rollout?"


def test_finished_runs_without_reviews_clear_the_list() -> None:
    verdict = Verdict(
        phase="Finished",
        status="True",
        reason="Succeeded",
        result=RunResult(outcome="Succeeded", output="done"),
    )
    assert status_patch({}, verdict, generation=1)["reviewItems"] == []
