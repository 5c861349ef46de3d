"""The runner's trace, exported over OTLP/HTTP to a real Jaeger and read back from its API.

The runner is the real ``python -m swarmkit_runner run`` subprocess with the environment the
operator gives a traced Job (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``TRACEPARENT``, headers from a
Secret); the model is the scripted OpenAI-wire server, the MCP server the test server over
streamable HTTP (a separate process). Jaeger is v2 built from Go modules
(``make jaeger``, ``swarmkit_devcluster.jaeger``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.agent import GatewayToken
from swarmkit_api.bundle import BundleGateway, secret_env_name
from swarmkit_api.common import SecretKeyRef
from swarmkit_devcluster.jaeger import Jaeger
from tests.support.bundles import (
    agent,
    bundle,
    http_server,
    mcp_tool_skill,
    openai_provider,
    replay_provider,
    secret_ref,
    skill,
    stdio_server,
    topology_of,
    write_bundle,
)
from tests.support.gateway import GatewayProcess, mcp_client
from tests.support.mcp_servers import HttpMcpServer, stdio_command
from tests.support.model_server import ScriptedModelServer, text, tool_call, tool_calls
from tests.support.runner import RunOutput, run_subprocess
from tests.support.served import ServedRunner
from tests.support.tracing import SpanView, new_traceparent, one, views

from .conftest import HTTP_MCP_TOKEN

MODEL_KEY = "sk-model-key-7d3e0a91"
OTLP_HEADER_SECRET = "otlp-ingest-key-4b8c21"
PROMPT = "Summarise the incident report of PROJECT-NIGHTJAR for the on-call team."


@pytest.fixture(scope="module")
def jaeger() -> Iterator[Jaeger]:
    with Jaeger() as server:
        yield server


def _traced_run(
    tmp_path: Path,
    model_server: ScriptedModelServer,
    http_mcp: HttpMcpServer,
    jaeger: Jaeger,
    tool: str,
    arguments: dict[str, str],
    content_chars: int = 0,
) -> tuple[RunOutput, str, str]:
    """One traced run: the agent calls ``remote.<tool>`` over MCP/HTTP, then answers."""
    model_ref, mcp_ref = secret_ref("model", "key"), secret_ref("mcp-token", "token")
    model_server.push(tool_call(f"remote.{tool}", **arguments), text("The summary."))
    b = bundle(
        agents=[agent("lead", provider="m", model="gpt-test", tools=[f"remote.{tool}"])],
        providers=[openai_provider("m", model_server.openai_base_url, api_key=model_ref)],
        mcp_servers=[
            http_server(
                "remote",
                http_mcp.url,
                headers=[
                    {"name": "Authorization", "secretKeyRef": mcp_ref.wire(), "prefix": "Bearer "}
                ],
            )
        ],
        input=PROMPT,
        correlation_id="corr-trace-1",
    )
    traceparent, trace_id, parent_span = new_traceparent()
    env = {
        secret_env_name(model_ref): MODEL_KEY,
        secret_env_name(mcp_ref): HTTP_MCP_TOKEN,
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_endpoint,
        "OTEL_EXPORTER_OTLP_HEADERS": f"x-ingest-key={OTLP_HEADER_SECRET}",
        "TRACEPARENT": traceparent,
    }
    if content_chars:
        env["SWARMKIT_TRACE_CONTENT_CHARS"] = str(content_chars)
    out = run_subprocess(write_bundle(b, tmp_path), env)
    assert out.exit_code == 0, out.stderr[-3000:]
    assert out.result["outcome"] == "Succeeded"
    return out, trace_id, parent_span


def _spans(jaeger: Jaeger, trace_id: str) -> tuple[list[SpanView], str]:
    raw = jaeger.trace(trace_id, min_spans=5)
    return views(raw), json.dumps(raw)


def test_a_run_is_one_trace_in_genai_conventions_with_no_content_by_default(
    tmp_path: Path, model_server: ScriptedModelServer, http_mcp: HttpMcpServer, jaeger: Jaeger
) -> None:
    _, trace_id, parent_span = _traced_run(
        tmp_path,
        model_server,
        http_mcp,
        jaeger,
        "echo",
        {"text": f"incident notes; the key is {MODEL_KEY} and {OTLP_HEADER_SECRET}"},
    )
    spans, dump = _spans(jaeger, trace_id)

    names = sorted(s.name for s in spans)
    assert names == [
        "chat gpt-test",
        "chat gpt-test",
        "execute_tool remote.echo",
        "invoke_agent lead",
        "tools/call echo",
    ]
    agent_span = one(spans, "invoke_agent lead")
    # The runner's spans hang under the context the operator handed over (TRACEPARENT).
    assert agent_span.parent_id == parent_span
    assert {s.service for s in spans} == {"swarmkit-runner"}
    assert agent_span.tags["gen_ai.operation.name"] == "invoke_agent"
    assert agent_span.tags["gen_ai.agent.name"] == "lead"
    assert agent_span.tags["gen_ai.provider.name"] == "openai"
    assert agent_span.tags["gen_ai.request.model"] == "gpt-test"
    assert agent_span.tags["gen_ai.conversation.id"] == "corr-trace-1"

    chats = [s for s in spans if s.name == "chat gpt-test"]
    for chat in chats:
        assert chat.parent_id == agent_span.span_id
        assert chat.tags["span.kind"] == "client"
        assert chat.tags["gen_ai.operation.name"] == "chat"
        assert chat.tags["gen_ai.provider.name"] == "openai"
        assert chat.tags["gen_ai.request.model"] == "gpt-test"
        # The scripted server bills 10 in / 5 out per call.
        usage = (chat.tags["gen_ai.usage.input_tokens"], chat.tags["gen_ai.usage.output_tokens"])
        assert usage == (10, 5)
    assert sorted(c.string_list("gen_ai.response.finish_reasons")[0] for c in chats) == [
        "stop",
        "tool_calls",
    ]

    tool = one(spans, "execute_tool remote.echo")
    assert tool.parent_id == agent_span.span_id
    assert tool.tags["gen_ai.operation.name"] == "execute_tool"
    assert tool.tags["gen_ai.tool.name"] == "remote.echo"
    assert tool.tags["gen_ai.tool.type"] == "extension"
    assert tool.tags["swarmkit.tool.kind"] == "mcp"
    assert tool.tags["swarmkit.permission.tier"] == "cautious"
    assert tool.tags["swarmkit.decision"] == "allowed"

    mcp = one(spans, "tools/call echo")
    assert mcp.parent_id == tool.span_id
    assert mcp.tags["span.kind"] == "client"
    assert mcp.tags["mcp.method.name"] == "tools/call"
    assert mcp.tags["gen_ai.tool.name"] == "echo"
    assert mcp.tags["network.transport"] == "tcp"
    assert mcp.tags["server.port"] == http_mcp.port

    # Content is off by default: no prompt, output, argument or result on any span.
    for key in (
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    ):
        assert all(key not in s.tags for s in spans), key
    assert "PROJECT-NIGHTJAR" not in dump
    assert "incident notes" not in dump
    # Secrets never, whatever the content setting.
    for secret in (MODEL_KEY, OTLP_HEADER_SECRET, HTTP_MCP_TOKEN):
        assert secret not in dump


def test_content_opt_in_is_capped_scrubbed_and_mcp_gets_the_context_in_meta(
    tmp_path: Path, model_server: ScriptedModelServer, http_mcp: HttpMcpServer, jaeger: Jaeger
) -> None:
    _, trace_id, _ = _traced_run(
        tmp_path, model_server, http_mcp, jaeger, "trace_meta", {}, content_chars=80
    )
    spans, dump = _spans(jaeger, trace_id)

    mcp = one(spans, "tools/call trace_meta")
    tool = one(spans, "execute_tool remote.trace_meta")
    # The MCP server saw the client span's context in params._meta (W3C traceparent).
    result = tool.tags["gen_ai.tool.call.result"]
    assert f"00-{trace_id}-{mcp.span_id}-01" in result

    chat = next(s for s in spans if s.name == "chat gpt-test")
    messages = chat.tags["gen_ai.input.messages"]
    assert messages.startswith('[{"role": "user", "parts": [{"type": "text", "content": "Summ')
    assert messages.endswith("…[truncated]")
    assert len(messages) == 80 + len("…[truncated]")
    assert "gen_ai.output.messages" in chat.tags
    for secret in (MODEL_KEY, OTLP_HEADER_SECRET, HTTP_MCP_TOKEN):
        assert secret not in dump


def test_a_secret_the_model_repeats_is_redacted_in_recorded_content(
    tmp_path: Path, model_server: ScriptedModelServer, http_mcp: HttpMcpServer, jaeger: Jaeger
) -> None:
    _, trace_id, _ = _traced_run(
        tmp_path,
        model_server,
        http_mcp,
        jaeger,
        "echo",
        {"text": f"k={MODEL_KEY} h={OTLP_HEADER_SECRET}"},
        content_chars=4000,
    )
    spans, dump = _spans(jaeger, trace_id)

    tool = one(spans, "execute_tool remote.echo")
    assert json.loads(tool.tags["gen_ai.tool.call.arguments"]) == {
        "text": "k=[REDACTED] h=[REDACTED]"
    }
    assert tool.tags["gen_ai.tool.call.result"] == "k=[REDACTED] h=[REDACTED]"
    for secret in (MODEL_KEY, OTLP_HEADER_SECRET, HTTP_MCP_TOKEN):
        assert secret not in dump


def test_mcp_over_http_and_a_served_topology_over_a2a_make_one_trace(
    tmp_path: Path, model_server: ScriptedModelServer, http_mcp: HttpMcpServer, jaeger: Jaeger
) -> None:
    """The caller's runner, the MCP server and the served Topology (three processes)."""
    served_root = agent("answerer", provider="replay", replay=[{"text": "forty-two"}])
    served = bundle(
        agents=[served_root],
        providers=[replay_provider()],
        topology=topology_of("oracle", "answerer", description="Answers questions about 42."),
    )
    with ServedRunner(
        write_bundle(served, tmp_path / "served"),
        tokens=["served-token-0123"],
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_endpoint},
    ) as peer:
        ref, mcp_ref = secret_ref("peer", "token"), secret_ref("mcp-token", "token")
        model_server.push(
            tool_calls(("remote.echo", {"text": "hi"}), ("oracle", {"input": "the answer?"})),
            text("done"),
        )
        caller = bundle(
            agents=[agent("asker", provider="m", skills=["oracle"], tools=["remote.echo"])],
            skills=[
                skill(
                    "oracle",
                    implementation={
                        "type": "agent",
                        "cardUrl": peer.card_url,
                        "credentialsRef": "peer",
                    },
                    category="coordination",
                )
            ],
            providers=[openai_provider("m", model_server.openai_base_url)],
            mcp_servers=[
                http_server(
                    "remote",
                    http_mcp.url,
                    headers=[
                        {
                            "name": "Authorization",
                            "secretKeyRef": mcp_ref.wire(),
                            "prefix": "Bearer ",
                        }
                    ],
                )
            ],
            workspace={
                "credentials": [
                    {"name": "peer", "secretKeyRef": ref.wire(), "allowedHosts": ["127.0.0.1"]}
                ]
            },
        )
        traceparent, trace_id, _ = new_traceparent()
        out = run_subprocess(
            write_bundle(caller, tmp_path / "caller"),
            {
                secret_env_name(ref): "served-token-0123",
                secret_env_name(mcp_ref): HTTP_MCP_TOKEN,
                "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_endpoint,
                "TRACEPARENT": traceparent,
            },
        )
        assert out.exit_code == 0, out.stderr[-3000:]
        assert out.result["output"] == "done"

        # The runner flushes its spans at exit; the served Topology's batch exporter sends its
        # own on its schedule: wait for its server spans too (a count of spans raced them).
        def served(found: list[dict[str, Any]]) -> bool:
            names = {
                s["operationName"]
                for s in found
                if s["process"].get("serviceName") == "swarmkit-serve"
            }
            return {"SendMessage", "GetTask", "invoke_agent answerer"} <= names

        spans = views(jaeger.trace(trace_id, min_spans=9, until=served))

    def kind(name: str, span_kind: str) -> SpanView:
        [found] = [s for s in spans if s.name == name and s.tags["span.kind"] == span_kind]
        return found

    send = kind("SendMessage", "client")
    assert send.service == "swarmkit-runner"
    assert send.tags["a2a.method.name"] == "SendMessage"
    assert send.tags["a2a.protocol.version"] == "1.0"
    assert send.tags["gen_ai.agent.name"] == "oracle"
    assert send.tags["server.port"] == peer.port
    assert send.parent_id == one(spans, "execute_tool oracle").span_id
    # The served Topology continued the caller's trace: its server span is the client span's
    # child, and its own agent runs under it.
    server = kind("SendMessage", "server")
    assert server.service == "swarmkit-serve"
    assert server.parent_id == send.span_id
    get = kind("GetTask", "server")
    assert get.parent_id == kind("GetTask", "client").span_id
    assert one(spans, "invoke_agent answerer").parent_id == server.span_id
    assert one(spans, "tools/call echo").parent_id == one(spans, "execute_tool remote.echo").span_id
    assert {s.service for s in spans} == {"swarmkit-runner", "swarmkit-serve"}


async def test_the_mcp_gateway_joins_the_harness_trace_from_params_meta(
    tmp_path: Path, jaeger: Jaeger
) -> None:
    """A harness (the public MCP SDK client) sends its context in ``params._meta``; the
    gateway's server span and the governed call under it join that trace."""
    token_ref = SecretKeyRef(name="gateway-tokens", key="alice")
    b = bundle(
        agents=[agent("coder", provider="r", skills=["echo-skill"], replay=[{"text": "x"}])],
        skills=[mcp_tool_skill("echo-skill", "t", "echo", description="Echo text back.")],
        providers=[replay_provider("r")],
        mcp_servers=[stdio_server("t", stdio_command("upstream"))],
    )
    b = b.model_copy(
        update={
            "gateway": BundleGateway(
                port=0, tokens=[GatewayToken(name="alice", secret_key_ref=token_ref)]
            )
        }
    )
    env = {
        secret_env_name(token_ref): "alice-token-6b1d9e",
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_endpoint,
    }
    traceparent, trace_id, harness_span = new_traceparent()
    with GatewayProcess(write_bundle(b, tmp_path), env) as gateway:
        async with mcp_client(gateway.url, "alice-token-6b1d9e") as client:
            result = await client.call_tool(
                "echo-skill", {"text": "hi"}, meta={"traceparent": traceparent}
            )
        assert not result.is_error
        spans = views(jaeger.trace(trace_id, min_spans=3))

    server = one(spans, "tools/call echo-skill")
    assert server.service == "swarmkit-gateway"
    assert server.tags["span.kind"] == "server"
    assert server.parent_id == harness_span
    assert server.tags["mcp.method.name"] == "tools/call"
    tool = one(spans, "execute_tool echo-skill")
    assert tool.parent_id == server.span_id
    assert tool.tags["swarmkit.decision"] == "allowed"
    # ... and the gateway's own call to the upstream MCP server carries the context on.
    assert one(spans, "tools/call echo").parent_id == tool.span_id
