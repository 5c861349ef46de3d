"""The MCP gateway's human review, piece by piece: the Review it opens, the in-cluster API
credentials it needs, and what a session's call does with each decision.

The whole path (a real gateway pod, the apiserver, the admission policy, a reviewer) is
``tests/integration/test_gateway_review.py``.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from swarmkit_api.agent import GatewayToken
from swarmkit_api.bundle import BundleGateway, ReviewItem, RunBundle, secret_env_name
from swarmkit_api.review import (
    GatewayReviewAsk,
    GatewaySessionRef,
    ResumeDecision,
    ReviewSpec,
    gateway_review_name,
)
from swarmkit_operator.builders.review import build_gateway_review, gateway_pod_refusal
from swarmkit_runner import pipeline
from swarmkit_runner.audit import AuditLog
from swarmkit_runner.context import Budget, RunContext
from swarmkit_runner.errors import ReviewUnavailable, RunFailed, ToolRefused
from swarmkit_runner.gateway_review import ask_for, settled
from swarmkit_runner.kube import KubeApi, KubeUnavailable
from swarmkit_runner.paths import RunnerPaths
from swarmkit_runner.secrets import SecretStore
from tests.support.bundles import agent, bundle, openai_provider, secret_ref

SESSION = GatewaySessionRef(
    agent="coder",
    correlation_id="6f1c2d3e-aaaa-bbbb-cccc-000000000001",
    session="b41f0e2a9c",
    identity="alice",
    pod="gw-coder-7d9f-x2x",
)
NOW = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)


def item(**kw: object) -> ReviewItem:
    fields: dict[str, object] = {
        "kind": "approval",
        "skill": "deploy",
        "agent": "coder",
        "question": "skill deploy is strict. Approve this call of deploy by agent coder?",
        "tool": "deploy",
        "arguments": '{"target": "prod"}',
        "context": "skill deploy is strict",
        "key": "s.0",
        "timeout_seconds": 90,
    }
    return ReviewItem.model_validate({**fields, **kw})


def test_review_name_names_the_agent_and_the_session_and_fits_a_name() -> None:
    assert gateway_review_name("coder", SESSION.correlation_id, 1) == "gw-coder-6f1c2d3e-1"
    long = gateway_review_name("a" * 63, SESSION.correlation_id, 12)
    assert len(long) <= 63 and long.endswith("-6f1c2d3e-12")


def _asked() -> GatewayReviewAsk:
    """The ask as the gateway prints it and the operator reads it back from the pod's log."""
    line = ask_for(n=1, session=SESSION, item=item(), wait_seconds=90, now=NOW).line()
    assert line.startswith("swarmkit.review-ask ") and "\n" not in line
    found = GatewayReviewAsk.from_line(line)
    assert found is not None
    return found


def test_the_review_points_at_the_session_and_its_agent_never_at_a_run() -> None:
    manifest = build_gateway_review("team", "coder", "uid-coder", _asked())
    assert isinstance(manifest, dict)
    meta = manifest["metadata"]
    assert (manifest["apiVersion"], manifest["kind"]) == ("swarmkit.dev/v1alpha1", "Review")
    assert (meta["name"], meta["namespace"]) == ("gw-coder-6f1c2d3e-1", "team")
    # Deleted with the Agent; no blockOwnerDeletion (that would need agents/finalizers).
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "swarmkit.dev/v1alpha1",
            "kind": "Agent",
            "name": "coder",
            "uid": "uid-coder",
        }
    ]
    assert meta["labels"]["swarmkit.dev/gateway"] == "coder"
    assert meta["labels"]["swarmkit.dev/correlation-id"] == SESSION.correlation_id
    assert meta["labels"]["swarmkit.dev/review-kind"] == "approval"
    request = manifest["spec"]["request"]
    assert request["gatewaySession"] == {
        "agent": "coder",
        "correlationId": SESSION.correlation_id,
        "session": "b41f0e2a9c",
        "identity": "alice",
        "pod": "gw-coder-7d9f-x2x",
    }
    assert "runRef" not in request and "decision" not in manifest["spec"]
    assert request["skillRef"] == {"name": "deploy"}
    assert (request["tool"], request["arguments"]) == ("deploy", '{"target": "prod"}')
    spec = ReviewSpec.model_validate(manifest["spec"])  # what the CRD's schema is built from
    assert spec.request.deadline == NOW + timedelta(seconds=90)


def test_the_operator_opens_only_what_a_gateway_session_may_ask() -> None:
    """An ask is for the pod's own agent, an approval or escalation, with a deadline; the
    operator names and labels the Review itself (issue 46 item 5)."""
    asked = _asked()
    other = build_gateway_review("team", "billing", "uid-billing", asked)
    assert other == "the ask is not for a session of agent billing's gateway"
    spend = asked.model_copy(update={"request": asked.request.model_copy(update={"kind": "spend"})})
    assert build_gateway_review("team", "coder", "u", spend) == (
        "a gateway asks only approval or escalation, not spend"
    )
    no_deadline = asked.model_copy(
        update={"request": asked.request.model_copy(update={"deadline": None})}
    )
    assert "deadline" in str(build_gateway_review("team", "coder", "u", no_deadline))
    assert GatewayReviewAsk.from_line('{"event": "tool.call"}') is None  # an audit line
    with pytest.raises(ValueError):
        GatewayReviewAsk.from_line("swarmkit.review-ask {not json")


def test_only_a_pod_of_the_agents_gateway_deployment_asks() -> None:
    pod = {
        "metadata": {
            "name": "gw-coder-7d9f-x2x",
            "labels": {"swarmkit.dev/gateway": "coder"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "gw-coder-7d9f", "controller": True}
            ],
        }
    }
    assert gateway_pod_refusal(pod, "coder") is None
    assert "not labelled swarmkit.dev/gateway=billing" in str(gateway_pod_refusal(pod, "billing"))
    bare = {"metadata": {**pod["metadata"], "ownerReferences": []}}
    assert "not run by the gateway Deployment gw-coder" in str(gateway_pod_refusal(bare, "coder"))


def test_settled_means_decided_or_ended_by_the_operator() -> None:
    pending = {"spec": {"request": {"kind": "approval", "question": "?"}}}
    assert not settled(pending)
    assert not settled({**pending, "status": {"state": "Pending"}})
    assert settled({**pending, "status": {"state": "Expired"}})
    decided = {"spec": {**pending["spec"], "decision": {"verdict": "approve", "decidedBy": "b"}}}
    assert settled(decided)


def test_the_in_cluster_api_says_which_credential_is_missing(tmp_path: Path) -> None:
    with pytest.raises(KubeUnavailable, match="KUBERNETES_SERVICE_HOST"):
        KubeApi.from_env({}, sa_dir=tmp_path)
    with pytest.raises(KubeUnavailable, match="automountServiceAccountToken"):
        KubeApi.from_env({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, sa_dir=tmp_path)
    (tmp_path / "token").write_text("t")
    api = KubeApi.from_env(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}, sa_dir=tmp_path
    )
    assert api.base_url == "https://[fd00::1]:6443"


# --- a session's call and the decision ---------------------------------------------------------

SECRET = "sk-live-0d5e71c2b9"


def session_ctx(tmp_path: Path, answer: ResumeDecision | Exception) -> tuple[RunContext, list]:
    """A gateway session's context whose reviewer answers ``answer`` (what it was asked is
    recorded)."""
    ref = secret_ref("deploy", "token")
    secrets = SecretStore({secret_env_name(ref): SECRET})
    secrets.get(ref)  # handed out: scrubbed from now on
    b: RunBundle = bundle(
        agents=[agent("coder", provider="m")], providers=[openai_provider("m", "http://x")]
    )
    b = b.model_copy(
        update={
            "gateway": BundleGateway(
                port=0,
                tokens=[GatewayToken(name="alice", secret_key_ref=ref)],
                review_timeout_seconds=90,
            )
        }
    )
    asked: list[ReviewItem] = []

    async def reviewer(question: ReviewItem) -> ResumeDecision:
        asked.append(question)
        if isinstance(answer, Exception):
            raise answer
        return answer

    ctx = RunContext(
        bundle=b,
        paths=RunnerPaths.resolve(scratch=str(tmp_path)),
        audit=AuditLog(b.run.uid, b.run.uid, secrets, sink=io.StringIO()),
        secrets=secrets,
        budget=Budget(10, 1000),
        can_park=False,
        reviewer=reviewer,
    )
    return ctx, asked


def decided(verdict: str, text: str = "") -> ResumeDecision:
    return ResumeDecision.model_validate(
        {
            "review": "gw-coder-6f1c2d3e-1",
            "key": "",
            "kind": "approval",
            "verdict": verdict,
            "text": text,
            "decidedBy": "bob"
            if verdict != "timeout"
            else "system:swarmkit-gateway:review-timeout",
        }
    )


REFUSED = ToolRefused(
    "skill deploy is strict and this call is not explicitly approved", "NotApproved"
)


async def ask(ctx: RunContext) -> str | None:
    coder = ctx.bundle.agents["coder"]
    return await pipeline.approval(ctx, coder, REFUSED, "deploy", {"token": SECRET, "to": "prod"})


async def test_approve_lets_the_call_run_and_the_question_holds_no_secret(tmp_path: Path) -> None:
    ctx, asked = session_ctx(tmp_path, decided("approve"))
    assert await ask(ctx) is None  # go on: the call runs through the pipeline
    [question] = asked
    assert question.kind == "approval" and question.tool == "deploy"
    assert SECRET not in question.model_dump_json() and "[REDACTED]" in (question.arguments or "")
    # The Workspace would wait a day; an MCP call waits the gateway's reviewTimeoutSeconds.
    assert question.timeout_seconds == 90


async def test_answer_reject_and_timeout(tmp_path: Path) -> None:
    ctx, _ = session_ctx(tmp_path, decided("answer", "deployed by hand"))
    assert await ask(ctx) == "deployed by hand"

    ctx, _ = session_ctx(tmp_path, decided("reject", "not during the freeze"))
    with pytest.raises(ToolRefused) as rejected:
        await ask(ctx)
    assert rejected.value.code == "ApprovalRejected"
    assert "reject by bob: not during the freeze" in rejected.value.message

    ctx, _ = session_ctx(tmp_path, decided("timeout"))
    with pytest.raises(RunFailed, match="no review decision within 90s"):
        await ask(ctx)


async def test_no_review_can_be_opened_is_the_refusal_with_the_reason(tmp_path: Path) -> None:
    reason = "the Review could not be created (HTTP 403: reviews is forbidden)"
    ctx, _ = session_ctx(tmp_path, ReviewUnavailable(reason))
    with pytest.raises(ToolRefused) as refused:
        await ask(ctx)
    assert refused.value.code == "NotApproved"
    assert "is strict" in refused.value.message and reason in refused.value.message
