"""The MCP gateway (``python -m swarmkit_runner gateway``) with the public SDK client.

The gateway runs as a real subprocess with a real stdio MCP server upstream, a real HTTP
tool server and the scripted model API; the harness is the public ``mcp`` client over
streamable HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from swarmkit_api.agent import GatewayToken
from swarmkit_api.bundle import BundleGateway, RunBundle, secret_env_name
from swarmkit_api.common import SecretKeyRef
from swarmkit_runner.gateway import AGENT_SKILL_PREFIX
from tests.support.bundles import (
    agent,
    bundle,
    decision_skill,
    http_tool,
    mcp_tool_skill,
    openai_provider,
    skill,
    stdio_server,
    topology_of,
    write_bundle,
)
from tests.support.gateway import GatewayProcess, exchange, mcp_client, status_of
from tests.support.http_server import RecordingHttpServer
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import ScriptedModelServer, text

ALICE = SecretKeyRef(name="gateway-tokens", key="alice")
CI = SecretKeyRef(name="gateway-tokens", key="ci")
TOKENS = {"alice": "alice-token-6b1d9e", "ci": "ci-token-0c44a1"}
GOOD = {"verdict": "pass", "confidence": 0.9, "reasoning": "clean change"}


def gateway_bundle(model_url: str, kb_url: str) -> RunBundle:
    b = bundle(
        agents=[
            agent(
                "coder",
                provider="m",
                skills=["echo-skill", "code-quality-review", "ask-helper", "locked"],
                tools=["t.add", "kb_search"],
                description="Coding helper.",
            ),
            agent("helper", provider="m"),
        ],
        skills=[
            mcp_tool_skill("echo-skill", "t", "echo", description="Echo text back."),
            decision_skill(
                "code-quality-review",
                {"type": "llm_prompt", "prompt": "You review code changes."},
            ),
            skill(
                "ask-helper",
                implementation={"type": "agent", "topology": "helper-team"},
                description="Ask the helper team.",
            ),
            mcp_tool_skill(
                "locked",
                "t",
                "whoami",
                description="A strict skill nobody reviewed.",
            ).model_copy(),
            mcp_tool_skill("not-granted", "t", "pid"),
        ],
        topologies=[topology_of("helper-team", "helper")],
        providers=[openai_provider("m", model_url)],
        mcp_servers=[stdio_server("t", stdio_command("upstream"))],
        tools=[http_tool("kb_search", kb_url, description="Search the knowledge base.")],
    )
    locked = b.skills["locked"]
    impl = locked.spec.implementation
    assert impl is not None
    strict = locked.model_copy(
        update={
            "spec": locked.spec.model_copy(
                update={"implementation": impl.model_copy(update={"permission": "strict"})}
            )
        }
    )
    return b.model_copy(
        update={
            "skills": {**b.skills, "locked": strict},
            "gateway": BundleGateway(
                port=0,
                tokens=[
                    GatewayToken(name="alice", secret_key_ref=ALICE),
                    GatewayToken(name="ci", secret_key_ref=CI),
                ],
            ),
        }
    )


@pytest.fixture
def kb() -> Iterator[RecordingHttpServer]:
    with RecordingHttpServer(lambda r: (200, {"hits": ["doc-1"]})) as server:
        yield server


@pytest.fixture
def gateway(
    tmp_path: Path, model_server: ScriptedModelServer, kb: RecordingHttpServer
) -> Iterator[GatewayProcess]:
    b = gateway_bundle(model_server.openai_base_url, kb.url + "/search")
    env = {secret_env_name(ALICE): TOKENS["alice"], secret_env_name(CI): TOKENS["ci"]}
    with GatewayProcess(write_bundle(b, tmp_path), env) as process:
        yield process


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def test_tools_list_is_exactly_the_agents_catalog(gateway: GatewayProcess) -> None:
    async with mcp_client(gateway.url, TOKENS["alice"]) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(listed) == sorted(
        [
            "echo-skill",
            "code-quality-review",
            AGENT_SKILL_PREFIX + "ask-helper",
            "locked",
            "load_skill",
            "read_skill_file",
            "t.add",
            "kb_search",
        ]
    )
    review = listed["code-quality-review"]
    assert review.output_schema is not None
    assert review.output_schema["properties"]["verdict"]["enum"] == [
        "pass",
        "fail",
        "needs-changes",
    ]
    assert listed["t.add"].input_schema["properties"].keys() == {"a", "b"}
    assert listed["echo-skill"].output_schema is None
    [start] = gateway.audit("gateway.start")
    assert sorted(start["tools"]) == sorted(listed)
    assert start["identities"] == ["alice", "ci"]


async def test_calls_are_governed_and_audited_per_session(
    gateway: GatewayProcess, kb: RecordingHttpServer
) -> None:
    async with mcp_client(gateway.url, TOKENS["alice"]) as client:
        echoed = await client.call_tool("echo-skill", {"text": "hello gateway"})
        added = await client.call_tool("t.add", {"a": 2, "b": 40})
        searched = await client.call_tool("kb_search", {"query": "rollout"})
        refused = await client.call_tool("not-granted", {})
        wire_alias = await client.call_tool("t_add", {"a": 1, "b": 1})
        strict = await client.call_tool("locked", {})
        delegated = await client.call_tool(AGENT_SKILL_PREFIX + "ask-helper", {"input": "hi"})
        bare_agent_skill = await client.call_tool("ask-helper", {"input": "hi"})
    async with mcp_client(gateway.url, TOKENS["ci"]) as other:
        again = await other.call_tool("t.add", {"a": 1, "b": 2})

    assert (echoed.is_error, text_of(echoed)) == (False, "hello gateway")
    assert (added.is_error, text_of(added)) == (False, "42")
    assert not searched.is_error and "doc-1" in text_of(searched)
    assert kb.requests and kb.requests[0].body == {"query": "rollout"}
    assert refused.is_error and "ToolNotGranted" in text_of(refused)
    assert wire_alias.is_error and "ToolNotGranted" in text_of(wire_alias)
    assert strict.is_error and "NotApproved" in text_of(strict)
    assert "strict" in text_of(strict)
    assert text_of(again) == "3"
    assert not delegated.is_error, text_of(delegated)
    assert bare_agent_skill.is_error and "ToolNotGranted" in text_of(bare_agent_skill)
    [child] = gateway.audit("child_run")
    assert (child["skill"], child["topology"], child["outcome"]) == (
        "ask-helper",
        "helper-team",
        "Succeeded",
    )

    calls = gateway.audit("tool.call")
    by_tool = {c["tool"]: c for c in calls}
    assert {"echo-skill", "t.add", "kb_search"} <= set(by_tool)
    alice_calls = [c for c in calls if c["identity"] == "alice"]
    ci_calls = [c for c in calls if c["identity"] == "ci"]
    assert len(alice_calls) == 4 and len(ci_calls) == 1
    assert len({c["correlation_id"] for c in alice_calls}) == 1
    assert alice_calls[0]["correlation_id"] != ci_calls[0]["correlation_id"]
    assert alice_calls[0]["session"] != ci_calls[0]["session"]
    assert by_tool["echo-skill"]["kind"] == "skill" and by_tool["echo-skill"]["outcome"] == "ok"
    refusals = gateway.audit("tool.refused")
    assert {(r["tool"], r["reason"]) for r in refusals} == {
        ("not-granted", "not granted"),
        ("t_add", "not granted"),
        ("locked", "NotApproved"),
        ("ask-helper", "not granted"),
    }
    assert all(r["identity"] == "alice" for r in refusals)
    sessions = gateway.audit("session.start")
    assert {s["identity"] for s in sessions} == {"alice", "ci"}
    assert all(TOKENS["alice"] not in line for line in gateway.lines)


async def test_decision_skill_invalid_answer_is_reasked(
    gateway: GatewayProcess, model_server: ScriptedModelServer
) -> None:
    model_server.push(text('{"verdict": "ok", "confidence": 1.4}'), text(json.dumps(GOOD)))
    async with mcp_client(gateway.url, TOKENS["alice"]) as client:
        result = await client.call_tool("code-quality-review", {"input": "diff --git a b"})
    assert not result.is_error, text_of(result)
    assert result.structured_content == GOOD
    reask = model_server.requests[1].messages[-1]["content"]
    assert "confidence: 1.4 is greater than the maximum of 1" in reask
    [failed] = gateway.audit("output.validation_failed")
    assert (failed["skill"], failed["outcome"], failed["identity"]) == (
        "code-quality-review",
        "retry",
        "alice",
    )
    [valid] = gateway.audit("output.validated")
    assert (valid["verdict"], valid["attempt"]) == ("pass", 2)


async def test_wrong_or_missing_token_is_401(gateway: GatewayProcess) -> None:
    assert status_of(gateway.url, "not-a-token", method="POST") == 401
    assert status_of(gateway.url, None, method="POST") == 401
    status, headers = exchange(gateway.url, TOKENS["ci"], method="POST")
    assert status == 200
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    assert status_of(gateway.url, TOKENS["ci"], "POST", session=session) == 200
    # A session belongs to the token that opened it.
    assert status_of(gateway.url, TOKENS["alice"], "POST", session=session) == 404
    refused = gateway.audit("auth.refused")
    assert [r["reason"] for r in refused] == ["wrong token", "no bearer token"]
    assert all("not-a-token" not in line for line in gateway.lines)


async def test_sigterm_stops_cleanly_and_a_restarted_gateway_rejects_the_old_session(
    tmp_path: Path, model_server: ScriptedModelServer, kb: RecordingHttpServer
) -> None:
    b = gateway_bundle(model_server.openai_base_url, kb.url)
    layout = write_bundle(b, tmp_path)
    env = {secret_env_name(ALICE): TOKENS["alice"], secret_env_name(CI): TOKENS["ci"]}
    first = GatewayProcess(layout, env).start()
    async with mcp_client(first.url, TOKENS["alice"]) as client:
        assert text_of(await client.call_tool("t.add", {"a": 1, "b": 1})) == "2"
        assert first.stop() == 0
        [stop] = first.audit("gateway.stop")
        assert stop["sessions"] == 1
        with (
            GatewayProcess(layout, env, port=first.port),
            pytest.raises(MCPError) as refused,
        ):
            await client.call_tool("t.add", {"a": 1, "b": 1})
    assert "is not open on this gateway" in str(refused.value)
    assert "start a new session" in str(refused.value)
