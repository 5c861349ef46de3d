"""The parked-run pieces the operator builds (pure): names, the resume Job, the Review,
the checkpoint read from the log, and who decided when."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from swarmkit_api.bundle import ReviewItem
from swarmkit_api.review import CHECKPOINT_LINE_PREFIX, TIMEOUT_DECIDER, ResumeDecision
from swarmkit_operator.builders import review as rv
from swarmkit_operator.builders.job import (
    DECISION_ANNOTATION,
    build_job,
    bundle_config_map_name,
    job_name,
)
from swarmkit_operator.config import OperatorConfig

from .fixtures import NAMESPACE, RUN_UID, example_bundle

DECISION = ResumeDecision(
    review="ship-0a1b2-1",
    key="e.0.1",
    kind="escalation",
    verdict="answer",
    text="deployed by hand — à 10:02",
    decided_by="alice",
    decided_at="2026-12-05T10:02:00Z",
)


def test_names_of_stages_reviews_and_their_config_maps() -> None:
    assert job_name("ship", RUN_UID, 0, 1) == "run-ship-0a1b2-resume-1"
    assert job_name("ship", RUN_UID, 2, 1) == "run-ship-0a1b2-resume-1-r2"
    assert rv.review_name("ship", RUN_UID, 0) == "ship-0a1b2-1"
    assert len(rv.review_name("x" * 200, RUN_UID, 9)) <= 63
    files = rv.resume_files("ship", RUN_UID, 2, DECISION)
    assert files is not None
    assert files.checkpoint_config_map == "run-ship-0a1b2-ckpt-1"
    assert ResumeDecision.model_validate_json(files.decision_json) == DECISION
    assert rv.resume_files("ship", RUN_UID, 0, DECISION) is None
    assert rv.resume_files("ship", RUN_UID, 2, None) is None


def test_no_decision_config_map_exists_for_anyone_to_forge() -> None:
    """The decision reaches the resumed pod only through the Job template the operator
    wrote (issue 46): there is no ConfigMap name an editor could pre-create."""
    assert not hasattr(rv, "build_decision_config_map")
    assert not hasattr(rv, "decision_config_map_name")


def test_resumed_job_mounts_the_checkpoint_and_the_decision_read_only() -> None:
    run, rendered = example_bundle(None)
    job = build_job(
        run=run.ref,
        bundle=rendered.bundle,
        skill_mounts=rendered.skill_mounts,
        config=OperatorConfig(),
        bundle_config_map=bundle_config_map_name(run.name, run.uid),
        resume=1,
        resume_files=rv.resume_files(run.name, run.uid, 1, DECISION),
    )
    assert job["metadata"]["name"].endswith("-resume-1")
    template = job["spec"]["template"]
    pod = template["spec"]
    container = pod["containers"][0]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["resume-checkpoint"]["configMap"]["name"].endswith("-ckpt-0")
    # the decision: the pod template's own annotation (the operator's), a downward API file
    annotation = template["metadata"]["annotations"][DECISION_ANNOTATION]
    assert ResumeDecision.model_validate_json(annotation) == DECISION
    [item] = volumes["resume-decision"]["downwardAPI"]["items"]
    assert item == {
        "path": "decision.json",
        "fieldRef": {"fieldPath": f"metadata.annotations['{DECISION_ANNOTATION}']"},
    }
    assert "configMap" not in volumes["resume-decision"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["resume-checkpoint"]["readOnly"] and mounts["resume-decision"]["readOnly"]
    args = container["args"]
    assert args[args.index("--checkpoint") + 1] == "/etc/swarmkit/resume/checkpoint/checkpoint"
    assert args[args.index("--decision") + 1] == "/etc/swarmkit/resume/decision/decision.json"
    assert pod["automountServiceAccountToken"] is False  # still no API access


def test_checkpoint_is_taken_only_from_the_line_with_the_reported_sha256() -> None:
    good, forged = "Z29vZA==", "Zm9yZ2Vk"
    sha = hashlib.sha256(good.encode()).hexdigest()
    log = "\n".join(
        [
            '{"event": "run.start"}',
            CHECKPOINT_LINE_PREFIX + good,
            CHECKPOINT_LINE_PREFIX + forged,  # e.g. printed by a tool: not the runner's
        ]
    )
    assert rv.checkpoint_from_log(log, sha) == good
    assert rv.checkpoint_from_log(log, "0" * 64) is None


def _review(decision: dict[str, Any] | None, managed: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "request": {"kind": "input_request", "question": "?", "key": "e.0.1", "taskId": "t-1"}
    }
    if decision:
        spec["decision"] = decision
    return {"metadata": {"name": "ship-0a1b2-1", "managedFields": managed}, "spec": spec}


def test_decision_records_who_and_when_from_the_apiserver() -> None:
    managed = [
        {"manager": "kubectl-create", "time": "2026-12-03T08:00:00Z", "fieldsV1": {"f:spec": {}}},
        {
            "manager": "kubectl-patch",
            "time": "2026-12-03T08:05:07Z",
            "fieldsV1": {"f:spec": {"f:decision": {"f:verdict": {}}}},
        },
    ]
    found = rv.decision_of(
        _review({"verdict": "answer", "text": "teal", "decidedBy": "alice"}, managed)
    )
    assert found is not None
    assert (found.verdict, found.text, found.decided_by) == ("answer", "teal", "alice")
    assert found.decided_at == "2026-12-03T08:05:07Z"
    assert (found.key, found.kind, found.task_id) == ("e.0.1", "input_request", "t-1")
    assert rv.decision_of(_review(None, managed)) is None
    expired = rv.timeout_decision(_review(None, []), datetime(2026, 12, 3, 9, tzinfo=UTC))
    assert (expired.verdict, expired.decided_by) == ("timeout", TIMEOUT_DECIDER)


def test_review_carries_the_question_and_a_deadline_owned_by_the_run() -> None:
    run, _ = example_bundle(None)
    item = ReviewItem(
        kind="approval",
        agent="dev",
        skill="ship",
        tool="ship",
        question="Approve?",
        arguments='{"env": "prod"}',
        key="e.0.1",
        timeout_seconds=600,
    )
    review = rv.build_review(run.ref, item, 0, datetime(2026, 12, 3, 9, tzinfo=UTC))
    request = review["spec"]["request"]
    assert request["deadline"] == "2026-12-03T09:10:00Z"
    assert request["skillRef"] == {"name": "ship"} and request["arguments"] == '{"env": "prod"}'
    assert "decision" not in review["spec"]
    owner = review["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("Run", RUN_UID)
    assert review["metadata"]["namespace"] == NAMESPACE
