"""Agent skills, remote: an A2A agent (the a2a-sdk test server) over real JSON-RPC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swarmkit_api.bundle import RunBundle, secret_env_name
from tests.support.a2a_server import A2AServer
from tests.support.bundles import (
    CODE_QUALITY_OUTPUTS,
    agent,
    bundle,
    openai_provider,
    secret_ref,
    skill,
    write_bundle,
)
from tests.support.model_server import ScriptedModelServer, text, tool_call, tool_calls
from tests.support.runner import RunOutput, run_in_process
from tests.unit.runner.conftest import A2A_TOKEN

UID = "00000000-0000-4000-8000-000000000001"
TOKEN_REF = secret_ref("a2a", "token")
ENV = {secret_env_name(TOKEN_REF): A2A_TOKEN}


def remote(name: str, card_url: str, **impl: Any) -> Any:
    category = impl.pop("category", "coordination")
    extra: dict[str, Any] = {}
    if category == "decision":
        extra["outputs"] = CODE_QUALITY_OUTPUTS
    return skill(
        name,
        implementation={
            "type": "agent",
            "cardUrl": card_url,
            "credentialsRef": "remote",
            **impl,
        },
        category=category,
        **extra,
    )


def remote_bundle(url: str, *skills: Any, uid: str = UID) -> RunBundle:
    return bundle(
        agents=[agent("lead", provider="m", skills=[s.name for s in skills])],
        skills=list(skills),
        providers=[openai_provider("m", url)],
        workspace={
            "credentials": [
                {"name": "remote", "secretKeyRef": TOKEN_REF.wire(), "allowedHosts": ["127.0.0.1"]}
            ]
        },
        uid=uid,
    )


async def run(b: RunBundle, tmp_path: Path) -> RunOutput:
    return await run_in_process(b, write_bundle(b, tmp_path), environ=ENV)


def calls_for(server: A2AServer, task_ids: set[str]) -> list[dict[str, Any]]:
    return [c for c in server.records()["calls"] if c["taskId"] in task_ids]


async def test_completed_tasks_over_a2a_1_0_and_0_3(
    tmp_path: Path, model_server: ScriptedModelServer, a2a_server: A2AServer
) -> None:
    verdict = {"verdict": "pass", "confidence": 0.7, "reasoning": "remote review"}
    uid = "00000000-0000-4000-8000-00000000a2a1"
    model_server.push(
        tool_calls(
            ("research", {"input": "find X", "context": "Q3"}),
            ("research", {"input": "find Y"}),
            ("research-03", {"input": "find Z"}),
            ("remote-review", {"input": "json " + json.dumps(verdict)}),
        ),
        text("done"),
    )
    b = remote_bundle(
        model_server.openai_base_url,
        remote("research", a2a_server.card_url, skillId="research"),
        remote("research-03", a2a_server.v03_card_url),
        remote("remote-review", a2a_server.card_url, skillId="review", category="decision"),
        uid=uid,
    )
    out = await run(b, tmp_path)

    assert out.outcome == "Succeeded", out.result
    x, y, z, review = model_server.requests[1].tool_results()
    assert x == (f"remote answer: find X\n\nContext:\nQ3 [context={uid}]", False)
    assert y == (f"remote answer: find Y [context={uid}]", False)
    assert z == (f"remote answer: find Z [context={uid}]", False)
    assert not review[1] and json.loads(review[0]) == verdict
    sent = [c for c in a2a_server.records()["calls"] if c["contextId"] == uid]
    assert [(c["method"], c["version"]) for c in sent] == [
        ("SendMessage", "1.0"),
        ("SendMessage", "1.0"),
        ("message/send", None),
        ("SendMessage", "1.0"),
    ]
    assert all(c["authorized"] for c in sent)
    assert [c["metadata"]["skillId"] for c in sent] == [
        "research",
        "research",
        "research",
        "review",
    ]
    assert all(c["metadata"]["correlationId"] == uid for c in sent)
    task_ids = {e["task_id"] for e in out.events("a2a.send")}
    polls = [c["method"] for c in calls_for(a2a_server, task_ids)]
    assert "GetTask" in polls and "tasks/get" in polls
    cards = out.events("a2a.card")
    assert [(c["url"], c["protocol"]) for c in cards] == [
        (a2a_server.card_url, "1.0"),
        (a2a_server.v03_card_url, "0.3"),
    ]  # fetched once per URL, then cached
    assert cards[0]["skills"] == ["research", "review"]
    states = [e["state"] for e in out.events("a2a.task")]
    assert states == ["completed"] * 4
    [valid] = out.events("output.validated")
    assert valid["skill"] == "remote-review" and valid["verdict"] == "pass"


async def test_input_required_answered_by_the_agent(
    tmp_path: Path, model_server: ScriptedModelServer, a2a_server: A2AServer
) -> None:
    def answer_with(value: str) -> Any:
        def reply(request: Any) -> Any:
            [(content, _)] = request.tool_results()
            asked = json.loads(content)
            assert asked["status"] == "input_required"
            return tool_call("research", task_id=asked["task_id"], answer=value)

        return reply

    model_server.push(
        tool_call("research", input="ask 2 colors"),
        answer_with("blue"),
        answer_with("green"),
        text("done"),
    )
    b = remote_bundle(
        model_server.openai_base_url,
        remote("research", a2a_server.card_url, skillId="research", maxAgentAnswers=2),
    )
    out = await run(b, tmp_path)

    assert out.outcome == "Succeeded", out.result
    [(first, _)] = model_server.requests[1].tool_results()
    question = json.loads(first)
    assert question["question"] == "question 1?" and question["task_id"]
    [(second, _)] = model_server.requests[2].tool_results()
    assert json.loads(second)["question"] == "question 2?"
    assert model_server.requests[3].tool_results() == [("answers: blue, green", False)]
    responses = out.events("executor.input_response")
    assert [(r["responder"], r["answer"]) for r in responses] == [
        ("agent:lead", "blue"),
        ("agent:lead", "green"),
    ]
    assert {r["task_id"] for r in responses} == {question["task_id"]}
    [a, b2] = [c for c in calls_for(a2a_server, {question["task_id"]}) if c["text"]]
    assert (a["text"], b2["text"]) == ("blue", "green")


async def test_relay_parks_the_run_and_max_agent_answers_relays_the_next_question(
    tmp_path: Path, model_server: ScriptedModelServer, a2a_server: A2AServer
) -> None:
    model_server.push(tool_call("ask-human", input="ask 1 thing"))
    b = remote_bundle(
        model_server.openai_base_url,
        remote("ask-human", a2a_server.card_url, onUnanswerable="relay"),
    )
    out = await run(b, tmp_path / "relay")
    assert out.outcome == "AwaitingReview", out.result
    [item] = out.result["reviewItems"]
    assert (item["kind"], item["skill"], item["agent"], item["question"]) == (
        "input_request",
        "ask-human",
        "lead",
        "question 1?",
    )
    assert item["taskId"]
    assert out.result["message"] == "awaiting review: question 1?"
    [requested] = out.events("executor.input_request")
    assert requested["policy"] == "relay"

    def answer(request: Any) -> Any:
        [(content, _)] = request.tool_results()
        return tool_call("capped", task_id=json.loads(content)["task_id"], answer="one")

    model_server.push(tool_call("capped", input="ask 3 things"), answer)
    b = remote_bundle(
        model_server.openai_base_url,
        remote("capped", a2a_server.card_url, maxAgentAnswers=1),
    )
    out = await run(b, tmp_path / "capped")
    assert out.outcome == "AwaitingReview", out.result
    [item] = out.result["reviewItems"]
    assert (item["kind"], item["question"]) == ("input_request", "question 2?")
    policies = [e["policy"] for e in out.events("executor.input_request")]
    assert policies == ["agent", "relay"]


async def test_abort_failed_timeout_unknown_skill_gate_and_origin(
    tmp_path: Path, model_server: ScriptedModelServer, a2a_server: A2AServer
) -> None:
    model_server.push(
        tool_calls(
            ("abort", {"input": "ask 1 thing"}),
            ("research", {"input": "fail please"}),
            ("slow", {"input": "slow job"}),
            ("wrong-skill", {"input": "hello"}),
            ("gated", {"input": "gate deploy"}),
            ("elsewhere", {"input": "hello"}),
        ),
        lambda request: tool_call(
            "gated",
            task_id=json.loads(request.tool_results()[4][0])["task_id"],
            answer="approve it myself",
        ),
        text("done"),
    )
    b = remote_bundle(
        model_server.openai_base_url,
        remote("abort", a2a_server.card_url, onUnanswerable="abort"),
        remote("research", a2a_server.card_url),
        remote("slow", a2a_server.card_url, timeoutS=1),
        remote("wrong-skill", a2a_server.card_url, skillId="translate"),
        remote("gated", a2a_server.card_url),
        remote("elsewhere", a2a_server.elsewhere_card_url),
    )
    out = await run(b, tmp_path)

    assert out.outcome == "Succeeded", out.result
    abort, failed, slow, wrong, gated, elsewhere = model_server.requests[1].tool_results()
    assert (
        abort[1]
        and "A2AInputRequired: the remote agent asked 'question 1?' and onUnanswerable is abort"
        in abort[0]
    )
    assert failed[1] and "RemoteTaskFailed" in failed[0]
    assert "remote failure: fail please" in failed[0]
    assert slow[1] and "A2ATimedOut" in slow[0] and "it was cancelled" in slow[0]
    assert wrong[1] and "A2ASkillNotFound: the agent card at" in wrong[0]
    assert "has no skill 'translate' (it offers: research, review)" in wrong[0]
    gate = json.loads(gated[0])
    assert (gate["kind"], gate["gate"], gate["status"]) == (
        "human_gate",
        "deploy-approval",
        "input_required",
    )
    assert elsewhere[1] and "A2ACredentialsOrigin" in elsewhere[0]
    [(answered, answered_error)] = model_server.requests[2].tool_results()
    assert answered_error and "HumanGate" in answered
    cancels = {e["task_id"]: e["reason"] for e in out.events("a2a.cancel")}
    assert sorted(cancels.values()) == ["onUnanswerable: abort", "timeoutS (1s) passed"]
    assert set(cancels) <= set(a2a_server.records()["cancels"])


async def test_a_credential_never_goes_to_a_host_its_workspace_did_not_allow(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    """Issue 46 item 7: the editor's own server (here 'localhost', while the Workspace
    allows only '127.0.0.1') gets no request at all, neither the card fetch nor the call."""
    import http.server
    import threading

    seen: list[str | None] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("authorization"))
            self.send_response(404)
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        card = f"http://localhost:{server.server_address[1]}/.well-known/agent-card.json"
        model_server.push(tool_call("exfil", input="hello"), text("done"))
        b = remote_bundle(model_server.openai_base_url, remote("exfil", card))
        out = await run(b, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    [(result, is_error)] = model_server.requests[1].tool_results()
    assert is_error
    assert "CredentialNotAllowed" in result
    assert "Workspace credential 'remote'" in result and "localhost" in result
    assert seen == []
    assert out.outcome == "Succeeded", out.result
    assert A2A_TOKEN not in out.stdout
