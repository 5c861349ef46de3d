"""The runner's egress guard: every connection it makes is checked, after resolving the
name, against the plan the operator pinned in the bundle (built here by the operator's own
``builders.netpol.plan``), with a tool error naming the destination."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx
import httpx2
import pytest

from swarmkit_api.bundle import RunBundle
from swarmkit_api.egress import EgressPlan, refusal
from swarmkit_operator.builders import netpol
from swarmkit_runner import egress
from tests.support.bundles import agent, bundle, http_tool, openai_provider, write_bundle
from tests.support.http_server import RecordingHttpServer
from tests.support.model_server import ScriptedModelServer, text, tool_calls
from tests.support.runner import run_in_process


def real_resolve(host: str) -> list[str]:
    try:
        return sorted({str(i[4][0]) for i in socket.getaddrinfo(host, None)})
    except socket.gaierror:
        return []


def pinned(b: RunBundle, table: Mapping[str, Sequence[str]] | None = None) -> RunBundle:
    """``b`` with the plan the operator would pin (``table`` overrides what names resolve
    to at render time: a DNS answer that changes before the runner connects)."""
    resolve = (lambda h: table.get(h, real_resolve(h))) if table else real_resolve
    plan = netpol.plan(b, b.workspace.egress, resolve, apiserver=[("127.0.0.1", 6443)])
    return b.model_copy(update={"egress": plan})


@pytest.fixture(autouse=True)
def _no_plan_left() -> Iterator[None]:
    yield
    egress.install(None)


def test_refusals_name_the_destination_and_why() -> None:
    b = pinned(
        bundle(
            agents=[agent("a")],
            tools=[
                http_tool("pub", "https://api.example.com/x"),
                http_tool("svc", "http://mcp.internal:8080/x"),
            ],
            workspace={"egress": {"allow": [{"cidr": "0.0.0.0/0", "ports": [443]}]}},
        ),
        {"api.example.com": ["93.184.215.14"], "mcp.internal": ["10.96.0.20"]},
    )
    plan = b.egress
    assert isinstance(plan, EgressPlan)
    # declared names: public addresses (rotating CDNs) and the render-time ones pass
    assert refusal(plan, "api.example.com", 443, ["93.184.215.99"]) is None
    assert refusal(plan, "mcp.internal", 8080, ["10.96.0.20"]) is None
    # a declared name that now resolves to another private address (DNS rebinding)
    why = refusal(plan, "mcp.internal", 8080, ["10.0.0.7"])
    assert why is not None and "mcp.internal:8080" in why and "10.0.0.7" in why
    # an undeclared host on a port allow does not cover
    why = refusal(plan, "evil.example", 80, ["198.51.100.1"])
    assert why is not None and "evil.example:80" in why and "not a declared destination" in why
    # link-local stays shut even inside allow 0.0.0.0/0
    why = refusal(plan, "metadata.google.internal", 443, ["169.254.169.254"])
    assert why is not None and "169.254.169.254" in why and "link-local" in why
    # so does the apiserver
    why = refusal(plan, "kubernetes.default.svc", 6443, ["127.0.0.1"])
    assert why is not None and "apiserver" in why
    # a name that does not resolve
    assert "does not resolve" in (refusal(plan, "nowhere.invalid", 443, []) or "")


async def test_run_tools_reach_only_declared_destinations(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    with RecordingHttpServer() as http:
        port = int(http.url.rsplit(":", 1)[1])
        model_server.push(
            tool_calls(
                ("lookup", {"q": "a"}),  # declared, 127.0.0.1: allowed
                ("dyn", {"host": "localhost"}),  # its host is only known at call time
                ("fetch", {"target": "169.254.169.254"}),  # the metadata endpoint
                ("renamed", {"q": "b"}),  # declared name, now resolving elsewhere
            ),
            text("done"),
        )
        b = bundle(
            agents=[agent("dev", provider="m", tools=["lookup", "dyn", "fetch", "renamed"])],
            providers=[openai_provider("m", model_server.openai_base_url)],
            tools=[
                http_tool("lookup", f"{http.url}/l", permission="readonly", effects="read"),
                http_tool("dyn", "http://{host}/d", permission="readonly", effects="read"),
                http_tool("fetch", "http://{target}/f", permission="readonly", effects="read"),
                http_tool(
                    "renamed", f"http://localhost:{port}/r", permission="readonly", effects="read"
                ),
            ],
            # a wide allow around the metadata range does not open it
            workspace={"egress": {"allow": [{"cidr": "169.0.0.0/8", "ports": [80]}]}},
        )
        # at render time localhost answered a public address; now it answers 127.0.0.1
        b = pinned(b, {"localhost": ["203.0.113.9"]})
        out = await run_in_process(b, write_bundle(b, tmp_path))
        paths = [r.path for r in http.requests]

    assert out.outcome == "Succeeded", out.result
    lookup, dyn, fetch, renamed = model_server.requests[1].tool_results()
    assert not lookup[1]
    assert dyn[1] and "EgressRefused: egress to localhost:80 refused" in dyn[0]
    assert "not a declared destination" in dyn[0]
    assert fetch[1] and "egress to 169.254.169.254:80 refused" in fetch[0]
    assert "link-local" in fetch[0]
    assert renamed[1] and f"egress to localhost:{port} refused" in renamed[0]
    assert "did not resolve to when the Run was rendered" in renamed[0]
    assert paths == ["/l"]  # refused calls never reach the network


async def test_model_provider_to_an_undeclared_address_fails_the_run_naming_it(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    url = model_server.openai_base_url.replace("127.0.0.1", "localhost")
    model_server.push(text("never"))
    b = bundle(agents=[agent("dev", provider="m")], providers=[openai_provider("m", url)])
    b = pinned(b, {"localhost": ["203.0.113.9"]})
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "Failed", out.result
    assert f"egress to localhost:{model_server.port} refused" in out.result["message"]
    assert model_server.requests == []


async def test_mcp_sdk_client_is_guarded_too() -> None:
    with RecordingHttpServer() as http:
        port = int(http.url.rsplit(":", 1)[1])
        b = bundle(agents=[agent("a")], tools=[http_tool("t", f"{http.url}/x")])
        egress.install(pinned(b).egress)
        async with httpx2.AsyncClient(**egress.client_kwargs2()) as client:
            ok = await client.get(f"http://127.0.0.1:{port}/ok")
            with pytest.raises(egress.EgressRefused, match=r"egress to 127\.0\.0\.2:\d+ refused"):
                await client.get(f"http://127.0.0.2:{port}/no")
        async with httpx.AsyncClient(**egress.client_kwargs()) as client:
            with pytest.raises(egress.EgressRefused, match=r"169\.254\.169\.254"):
                await client.get("http://169.254.169.254/latest/meta-data/")
        assert ok.status_code < 500
        assert [r.path for r in http.requests] == ["/ok"]


def test_no_plan_no_guard() -> None:
    egress.install(None)
    assert egress.client_kwargs() == {} and egress.client_kwargs2() == {}


def test_provider_defaults_match_the_runner() -> None:
    from swarmkit_api.egress import PROVIDER_DEFAULT_URLS, provider_url
    from swarmkit_runner.providers import ANTHROPIC_BASE_URL, GEMINI_BASE_URL, OPENAI_BASE_URL
    from swarmkit_runner.providers.bedrock import base_url

    assert PROVIDER_DEFAULT_URLS == {
        "anthropic": ANTHROPIC_BASE_URL,
        "openai": OPENAI_BASE_URL,
        "gemini": GEMINI_BASE_URL,
    }
    assert provider_url("bedrock", None, "eu-west-1") == base_url("eu-west-1")
