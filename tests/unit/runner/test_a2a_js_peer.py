"""The runner's remote agent skill (``implementation.cardUrl``) against an A2A agent built
with a second SDK: the A2A JavaScript SDK's server in both protocol lines (@a2a-js/sdk 1.x:
A2A 1.0; 0.3.x: A2A 0.3; JSON-RPC on Express), beside our own test server
(tests/support/a2a_server.py) and our served topology.

The agent is a real Node process (``hack/node-clients/a2a_js_server.mjs`` /
``a2a_js_v03_server.mjs``) whose card it serves, whose JSON-RPC handler, task store and
state machine are the SDK's, and which refuses a call without its bearer token (HTTP 401)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.bundle import RunBundle, secret_env_name
from tests.support.bundles import agent, bundle, openai_provider, secret_ref, skill, write_bundle
from tests.support.clients import JsA2AServer
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_in_process

TOKEN = "js-peer-token-77a1"
REF = secret_ref("js-peer", "token")
UID = "00000000-0000-4000-8000-00000000a2a7"


SERVERS = {"1.0": "a2a_js_server.mjs", "0.3": "a2a_js_v03_server.mjs"}


@pytest.fixture(params=sorted(SERVERS))
def js_agent(request: pytest.FixtureRequest) -> Iterator[JsA2AServer]:
    with JsA2AServer(TOKEN, SERVERS[request.param]) as server:
        assert server.protocol == request.param
        yield server


def caller(card_url: str, model_url: str) -> RunBundle:
    return bundle(
        agents=[agent("asker", provider="m", skills=["js-oracle"])],
        skills=[
            skill(
                "js-oracle",
                implementation={"type": "agent", "cardUrl": card_url, "credentialsRef": "js-peer"},
                category="coordination",
            )
        ],
        providers=[openai_provider("m", model_url)],
        workspace={
            "credentials": [
                {"name": "js-peer", "secretKeyRef": REF.wire(), "allowedHosts": ["127.0.0.1"]}
            ]
        },
        uid=UID,
    )


async def run(tmp_path: Path, card_url: str, replies: list[Any], token: str) -> RunOutput:
    with ScriptedModelServer(replies) as model:
        b = caller(card_url, model.openai_base_url)
        return await run_in_process(
            b, write_bundle(b, tmp_path / "caller"), {secret_env_name(REF): token}
        )


def last_result(request: RecordedRequest) -> str:
    return request.tool_results()[-1][0]


async def test_a_task_completes_with_the_js_agents_answer(
    tmp_path: Path, js_agent: JsA2AServer
) -> None:
    out = await run(
        tmp_path,
        js_agent.card_url,
        [tool_call("js-oracle", input="what is the answer?"), lambda r: text(last_result(r))],
        TOKEN,
    )
    assert out.outcome == "Succeeded", out.result
    assert out.result["output"] == "js agent heard: what is the answer?"
    [card] = out.events("a2a.card")
    # Each SDK's card offers one protocol version; the runner spoke it (SendMessage /
    # message/send, then GetTask / tasks/get until the SDK's task store said completed).
    endpoint = f"{js_agent.base_url}/a2a"
    assert (card["protocol"], card["endpoint"]) == (js_agent.protocol, endpoint)
    [sent] = out.events("a2a.send")
    [followed] = out.events("a2a.task")
    assert followed["state"] == "completed" and followed["polls"] >= 1
    [received] = [e for e in js_agent.received() if "received" in e]
    # Our run id is the contextId, so both sides' records join on it.
    assert (received["taskId"], received["contextId"]) == (sent["task_id"], UID)


async def test_input_required_is_answered_by_the_calling_agent(
    tmp_path: Path, js_agent: JsA2AServer
) -> None:
    def answer(request: RecordedRequest) -> Reply:
        asked = json.loads(last_result(request))
        assert asked["status"] == "input_required", asked
        assert asked["question"] == "Which environment should I deploy to?"
        return tool_call("js-oracle", task_id=asked["task_id"], answer="staging")

    out = await run(
        tmp_path,
        js_agent.card_url,
        [tool_call("js-oracle", input="deploy v2"), answer, lambda r: text(last_result(r))],
        TOKEN,
    )
    assert out.outcome == "Succeeded", out.result
    assert out.result["output"] == "deployed to staging"
    said = [e["received"] for e in js_agent.received() if "received" in e]
    assert said == ["deploy v2", "staging"]
    [responded] = out.events("executor.input_response")
    assert responded["answer"] == "staging"


async def test_a_wrong_token_is_refused_by_the_js_agent(
    tmp_path: Path, js_agent: JsA2AServer
) -> None:
    out = await run(
        tmp_path,
        js_agent.card_url,
        [tool_call("js-oracle", input="let me in"), lambda r: text(last_result(r))],
        "not-the-token",
    )
    assert "HTTP 401" in out.result["output"], out.result
    assert not [e for e in js_agent.received() if "received" in e]
    assert {"refused": "wrong token"} in js_agent.received()
