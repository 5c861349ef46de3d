"""The Argo CD health checks (deploy/argocd) run in a real Lua 5.1 interpreter (lupa; Argo CD
embeds gopher-lua, a Lua 5.1) against status objects built with the swarmkit_api models.

``health(obj)`` is imported by tests/integration/test_helm_install.py, which runs the same
scripts against the status the real operator wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51

from swarmkit_api import KINDS, validate_manifest
from swarmkit_api.common import Condition

REPO = Path(__file__).resolve().parents[2]
ARGOCD = REPO / "deploy" / "argocd"
HEALTH = ARGOCD / "health"
CM_SNIPPET = ARGOCD / "argocd-cm.yaml"
CHART_README = REPO / "charts" / "swarmkit-operator" / "README.md"
# Reviews (owned by a Run or Skill) and MailboxMessages are created by the operator, never
# synced from Git. An EvalRun follows Succeeded like a Run (one-shot, immutable: a promotion's
# are the operator's, a person's may sit in Git beside its EvalSet). A SpendQuota is Ready
# (InForce) once the operator keeps it current; an EvalSet once its cases and judges check out.
SCRIPT_OF_KIND = {
    k.kind: ("run.lua" if k.kind in ("Run", "EvalRun") else "ready.lua")
    for k in KINDS
    if k.kind not in ("Review", "MailboxMessage")
}
READY_KINDS = [k for k in SCRIPT_OF_KIND if k not in ("Run", "EvalRun")]
ARGO_STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}
# What Argo CD's Lua VM offers health scripts (it opens no io/os/package/debug libraries).
SANDBOX_GLOBALS = ("io", "os", "package", "debug", "require", "dofile", "loadfile", "load")


def script(kind: str) -> str:
    return (HEALTH / SCRIPT_OF_KIND[kind]).read_text()


@cache
def _compiled(kind: str) -> Any:
    lua = lua51.LuaRuntime(register_eval=False, unpack_returned_tuples=True)
    for name in SANDBOX_GLOBALS:
        lua.execute(f"{name} = nil")
    chunk = lua.compile(script(kind))
    return lua, chunk


def health(obj: dict[str, Any]) -> dict[str, str]:
    """Run the Argo CD health script of ``obj``'s kind, as Argo CD does (global ``obj``)."""
    lua, chunk = _compiled(obj["kind"])
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = chunk()
    out = {str(k): str(v) for k, v in result.items()}
    assert out.get("status") in ARGO_STATUSES, out
    return out


# -- fixtures built with the models ---------------------------------------------------------


@cache
def _example(kind: str) -> dict[str, Any]:
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == kind:
                return dict(doc)
    raise AssertionError(f"no {kind} in examples/")


def cond(
    type_: str, status: str, reason: str, message: str = "", generation: int = 1
) -> dict[str, Any]:
    c = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        observed_generation=generation,
    )
    return c.wire()


def obj(
    kind: str,
    *conditions: dict[str, Any],
    generation: int = 1,
    observed: int = 1,
    **status: Any,
) -> dict[str, Any]:
    """An object of ``kind`` (its spec from examples/) with a status the models accept."""
    example = _example(kind)
    doc: dict[str, Any] = {
        "apiVersion": example["apiVersion"],
        "kind": kind,
        "metadata": {**example["metadata"], "namespace": "team-a", "generation": generation},
        "spec": example["spec"],
    }
    if conditions or status:
        doc["status"] = {"observedGeneration": observed, "conditions": list(conditions), **status}
    validate_manifest(doc)  # the fixture is a status the operator could write
    return doc


# -- snippet, README ----------------------------------------------------------------------------


def test_argocd_cm_snippet_embeds_the_scripts() -> None:
    cm = yaml.safe_load(CM_SNIPPET.read_text())
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["name"] == "argocd-cm"
    expected = {
        f"resource.customizations.health.swarmkit.dev_{kind}": script(kind)
        for kind in SCRIPT_OF_KIND
    }
    assert cm["data"] == expected, "deploy/argocd/argocd-cm.yaml is out of sync with health/*.lua"


def test_chart_readme_carries_the_snippet() -> None:
    readme = CHART_README.read_text()
    assert CM_SNIPPET.read_text().split("data:\n", 1)[1] in readme, (
        "charts/swarmkit-operator/README.md must include deploy/argocd/argocd-cm.yaml's data"
    )


def test_scripts_do_not_touch_anything_outside_obj() -> None:
    for kind in SCRIPT_OF_KIND:
        source = script(kind)
        for name in SANDBOX_GLOBALS:
            assert f"{name}." not in source and f"{name}(" not in source, (kind, name)


# -- Workspace, Skill, Agent, Topology: by Ready ------------------------------------------------


@pytest.mark.parametrize("kind", READY_KINDS)
def test_no_status_yet_is_progressing(kind: str) -> None:
    assert health(obj(kind)) == {
        "status": "Progressing",
        "message": "Waiting for the operator to reconcile",
    }


@pytest.mark.parametrize("kind", READY_KINDS)
def test_ready_true_is_healthy(kind: str) -> None:
    doc = obj(
        kind,
        cond("Accepted", "True", "Valid", "the spec is valid"),
        cond("Ready", "True", "Rendered", "rendered into ConfigMap x-0123abcd"),
    )
    assert health(doc) == {
        "status": "Healthy",
        "message": "Rendered: rendered into ConfigMap x-0123abcd",
    }


def test_ready_with_a_false_side_condition_is_healthy_and_says_so() -> None:
    doc = obj(
        "Agent",
        cond("Accepted", "True", "Valid"),
        cond("SkillsResolved", "False", "SkillNotFound", "skill 'later' not found"),
        cond("Ready", "True", "Rendered", "rendered"),
        missingSkills=["later"],
    )
    result = health(doc)
    assert result["status"] == "Healthy"
    assert "SkillsResolved=False SkillNotFound: skill 'later' not found" in result["message"]


@pytest.mark.parametrize(
    ("kind", "reason", "message"),
    [
        (
            "Workspace",
            "ConfigMapNotFound",
            "spec.flowData[0].configMapRef: ConfigMap 'f' not found",
        ),
        ("Agent", "WorkspaceNotFound", "Workspace 'default' not found"),
        ("Topology", "AgentNotFound", "agent(s) not found: reviewer"),
        ("Skill", "ConfigMapNotFound", "ConfigMap files not found"),
    ],
)
def test_ready_false_is_degraded(kind: str, reason: str, message: str) -> None:
    doc = obj(kind, cond("Accepted", "True", "Valid"), cond("Ready", "False", reason, message))
    assert health(doc) == {"status": "Degraded", "message": f"{reason}: {message}"}


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("Topology", "Cycle"), ("Topology", "DepthExceeded"), ("Skill", "TooLarge")],
)
def test_not_accepted_is_degraded_with_the_accepted_reason(kind: str, reason: str) -> None:
    doc = obj(
        kind,
        cond("Accepted", "False", reason, "a -> b -> a"),
        cond("Ready", "False", "NotAccepted", "see Accepted"),
    )
    assert health(doc) == {"status": "Degraded", "message": f"{reason}: a -> b -> a"}


@pytest.mark.parametrize("kind", READY_KINDS)
def test_ready_unknown_is_progressing(kind: str) -> None:
    doc = obj(kind, cond("Ready", "Unknown", "Reconciling", "rendering"))
    assert health(doc) == {"status": "Progressing", "message": "Reconciling: rendering"}


@pytest.mark.parametrize("kind", READY_KINDS)
def test_status_of_an_older_generation_is_progressing(kind: str) -> None:
    doc = obj(kind, cond("Ready", "True", "Rendered"), generation=3, observed=2)
    assert health(doc) == {
        "status": "Progressing",
        "message": "Waiting for the operator to reconcile generation 3",
    }
    # The Ready condition's own observedGeneration counts too.
    doc = obj(kind, cond("Ready", "True", "Rendered", generation=2), generation=3, observed=3)
    assert health(doc)["status"] == "Progressing"


def test_skill_awaiting_review_is_suspended() -> None:
    doc = obj("Skill", cond("Ready", "False", "AwaitingReview", "authored_by_swarm: review it"))
    assert health(doc) == {
        "status": "Suspended",
        "message": "AwaitingReview: authored_by_swarm: review it",
    }


def test_skill_with_a_script_pin_mismatch() -> None:
    doc = obj(
        "Skill",
        cond("Accepted", "True", "Valid"),
        cond("ScriptsApproved", "False", "PinMismatch", "scripts/classify_severity.py"),
        cond("Ready", "True", "Rendered", "rendered"),
        scripts=[{"path": "scripts/classify_severity.py", "sha256": "0" * 64, "approved": False}],
    )
    result = health(doc)
    assert result["status"] == "Healthy"
    assert "ScriptsApproved=False PinMismatch" in result["message"]


# -- Run: by Succeeded --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("Unknown", "Pending", "Progressing"),
        ("Unknown", "Running", "Progressing"),
        ("Unknown", "JobLost", "Progressing"),
        ("True", "Succeeded", "Healthy"),
        ("False", "Failed", "Degraded"),
        ("False", "TimedOut", "Degraded"),
        ("False", "Cancelled", "Degraded"),
        ("False", "ValidationFailed", "Degraded"),
        ("False", "ImagePullFailed", "Degraded"),
        ("False", "JobLost", "Degraded"),
        ("Unknown", "AwaitingReview", "Suspended"),
    ],
)
def test_run_health_follows_succeeded(status: str, reason: str, expected: str) -> None:
    doc = obj("Run", cond("Succeeded", status, reason, "details"), jobName="run-x-1234")
    assert health(doc) == {"status": expected, "message": f"{reason}: details"}


def test_run_without_status_is_progressing() -> None:
    assert health(obj("Run"))["status"] == "Progressing"
    assert health(obj("Run", observed=1, jobName="j"))["status"] == "Progressing"


def test_run_message_without_details_is_the_reason() -> None:
    assert health(obj("Run", cond("Succeeded", "True", "Succeeded"))) == {
        "status": "Healthy",
        "message": "Succeeded",
    }


# -- Topology, Agent with spec.promotion: Promoted gates Healthy --------------------------------

_PROMOTION = {
    "active": {"version": "0123456789ab", "renderedConfigMap": "topology-x-01234567"},
    "candidate": {"version": "ba9876543210", "renderedConfigMap": "topology-x-89abcdef"},
}


@pytest.mark.parametrize("kind", ["Topology", "Agent"])
@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("Unknown", "Evaluating", "Progressing"),
        ("Unknown", "AwaitingReview", "Progressing"),
        # A gate that requires a calibrated judge waits for it (issue 39).
        ("Unknown", "JudgeUncalibrated", "Progressing"),
        ("Unknown", "TooFewLabels", "Progressing"),
        ("False", "EvaluationFailed", "Degraded"),
        ("False", "Inconclusive", "Degraded"),
        ("False", "Rejected", "Degraded"),
    ],
)
def test_a_candidate_under_evaluation_or_failed_is_not_healthy(
    kind: str, status: str, reason: str, expected: str
) -> None:
    """Ready=True (the active version serves) is not Healthy while the candidate is being
    evaluated (a sync wave waits) or once it failed (the message names why)."""
    message = "candidate ba9876543210 against active 0123456789ab: regressions: smoke/refund"
    doc = obj(
        kind,
        cond("Accepted", "True", "Valid"),
        cond("Ready", "True", "Resolved", "2 agent(s) Ready"),
        cond("Promoted", status, reason, message),
        promotion=_PROMOTION,
    )
    assert health(doc) == {"status": expected, "message": f"{reason}: {message}"}


@pytest.mark.parametrize("kind", ["Topology", "Agent"])
def test_a_promoted_version_is_healthy(kind: str) -> None:
    doc = obj(
        kind,
        cond("Accepted", "True", "Valid"),
        cond("Ready", "True", "Resolved", "2 agent(s) Ready"),
        cond("Promoted", "True", "Promoted", "version 0123456789ab is active"),
        promotion={"active": _PROMOTION["active"]},
    )
    assert health(doc) == {"status": "Healthy", "message": "Resolved: 2 agent(s) Ready"}


def test_not_ready_wins_over_promotion() -> None:
    """An invalid edit is Degraded by its Ready reason, not by the promotion."""
    doc = obj(
        "Topology",
        cond("Accepted", "True", "Valid"),
        cond("Ready", "False", "AgentNotFound", "agent(s) not found: x"),
        cond("Promoted", "Unknown", "Waiting", "the current version is not Ready"),
        promotion={"active": _PROMOTION["active"]},
    )
    assert health(doc) == {"status": "Degraded", "message": "AgentNotFound: agent(s) not found: x"}
