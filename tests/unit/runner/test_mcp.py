"""MCP client against real servers: the SDK test server (stdio and streamable HTTP) and the
public reference filesystem server from the npm registry."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from swarmkit_api.bundle import secret_env_name
from tests.support.bundles import (
    agent,
    bundle,
    http_server,
    mcp_tool_skill,
    openai_provider,
    secret_ref,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import HttpMcpServer, free_port, stdio_command
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process, run_subprocess

from .conftest import HTTP_MCP_TOKEN


async def direct_listing(command: list[str]) -> dict[str, dict[str, object]]:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(stdio_client(params)) as client:
        listing = await client.list_tools()
    return {t.name: {"description": t.description, "schema": t.input_schema} for t in listing.tools}


async def test_discovery_forwards_the_exact_schema_and_calls_with_real_names(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("docs.search_docs", query="tls", limit=3, tags=["ops"]), text("found")
    )
    b = bundle(
        agents=[agent("solo", provider="m", tools=["docs.search_docs", "docs.add"])],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[stdio_server("docs-server", stdio_command(), prefix="docs")],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    expected = await direct_listing(stdio_command())

    assert out.outcome == "Succeeded"
    offered = model_server.requests[0].tools
    assert offered["docs_search_docs"] == expected["search_docs"]["schema"]
    assert offered["docs_add"] == expected["add"]["schema"]
    assert model_server.requests[0].tool_description("docs_add") == "Add two integers."
    assert model_server.requests[1].tool_results() == [("3 results for 'tls' tags=['ops']", False)]
    [ready] = out.events("mcp.ready")
    assert (ready["server"], ready["tools"]) == ("docs-server", len(expected))
    [call] = out.tool_calls("docs.search_docs")
    assert call["kind"] == "mcp" and call["input"] == {"query": "tls", "limit": 3, "tags": ["ops"]}


async def test_streamable_http_server_with_header_from_a_secret(
    tmp_path: Path, model_server: ScriptedModelServer, http_mcp: HttpMcpServer
) -> None:
    ref = secret_ref("mcp-token", "token")
    model_server.push(tool_call("remote.whoami"), text("done"))
    b = bundle(
        agents=[agent("solo", provider="m", tools=["remote.whoami"])],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[
            http_server(
                "remote",
                http_mcp.url,
                headers=[
                    {"name": "Authorization", "secretKeyRef": ref.wire(), "prefix": "Bearer "}
                ],
            )
        ],
    )
    out = await run_in_process(
        b, write_bundle(b, tmp_path), environ={secret_env_name(ref): HTTP_MCP_TOKEN}
    )
    assert out.outcome == "Succeeded"
    assert model_server.requests[1].tool_results() == [("test-http", False)]
    assert HTTP_MCP_TOKEN not in out.stdout


async def test_an_http_server_outside_a_credentials_allowed_hosts_gets_no_header(
    tmp_path: Path, model_server: ScriptedModelServer, http_mcp: HttpMcpServer
) -> None:
    """Issue 46 item 7: the header's Secret key is the Workspace credential 'mcp'; the
    server's host (127.0.0.1) is not in its allowedHosts, so the server is not connected."""
    ref = secret_ref("mcp-token", "token")
    model_server.push(text("done"))
    b = bundle(
        agents=[agent("solo", provider="m", tools=["remote.whoami"])],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[
            http_server(
                "remote",
                http_mcp.url,
                headers=[
                    {"name": "Authorization", "secretKeyRef": ref.wire(), "prefix": "Bearer "}
                ],
            )
        ],
        workspace={
            "credentials": [
                {"name": "mcp", "secretKeyRef": ref.wire(), "allowedHosts": ["mcp.example.com"]}
            ]
        },
    )
    out = await run_in_process(
        b, write_bundle(b, tmp_path), environ={secret_env_name(ref): HTTP_MCP_TOKEN}
    )
    assert out.outcome == "Succeeded"
    assert model_server.requests[0].tool_names == []
    [unavailable] = out.events("mcp.unavailable")
    assert "Workspace credential 'mcp'" in str(unavailable), unavailable
    assert "allowedHosts" in str(unavailable)


async def test_unreachable_servers_warn_and_the_run_goes_on(
    tmp_path: Path, model_server: ScriptedModelServer, http_mcp: HttpMcpServer
) -> None:
    model_server.push(
        tool_call("gone.echo", text="x"), tool_call("ok.echo", text="y"), text("done")
    )
    b = bundle(
        agents=[
            agent("solo", provider="m", tools=["gone.echo", "down.echo", "denied.echo", "ok.echo"])
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[
            http_server("gone", f"http://127.0.0.1:{free_port()}/mcp", timeout_seconds=5),
            stdio_server("down", ["/nonexistent/mcp-server"]),
            http_server("denied", http_mcp.url),  # no token → 401
            stdio_server("ok", stdio_command()),
        ],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded"
    unavailable = {e["server"]: e["message"] for e in out.events("mcp.unavailable")}
    assert set(unavailable) == {"gone", "down", "denied"}
    assert "cannot start '/nonexistent/mcp-server'" in unavailable["down"]
    assert model_server.requests[0].tool_names == ["ok_echo"]
    assert model_server.requests[1].tool_results()[0][1] is True  # gone.echo refused
    assert model_server.requests[2].tool_results() == [("y", False)]


def test_stdio_server_gets_only_the_workspace_env_and_is_shut_down(tmp_path: Path) -> None:
    token_ref = secret_ref("svc", "token")
    other_ref = secret_ref("model", "key")
    env = {secret_env_name(token_ref): "svc-token-123", secret_env_name(other_ref): "model-key-456"}
    with ScriptedModelServer(
        [
            tool_call("t.env_names"),
            tool_call("t.read_env", name="SERVICE_TOKEN"),
            tool_call("t.pid"),
            text("done"),
        ]
    ) as server:
        b = bundle(
            agents=[agent("solo", provider="m", tools=["t.env_names", "t.read_env", "t.pid"])],
            providers=[openai_provider("m", server.openai_base_url)],
            mcp_servers=[
                stdio_server(
                    "t",
                    stdio_command(),
                    env=[
                        {"name": "MODE", "value": "test"},
                        {"name": "SERVICE_TOKEN", "secretKeyRef": token_ref.wire()},
                    ],
                )
            ],
        )
        out = run_subprocess(write_bundle(b, tmp_path), env=env)
        results = [r.tool_results()[0][0] for r in server.requests[1:]]

    assert out.exit_code == 0, out.stderr
    names = set(results[0].split("\n"))  # one text block per list item
    assert {"MODE", "SERVICE_TOKEN"} <= names
    assert not any(n.startswith("SWARMKIT_") for n in names)
    assert names <= {"MODE", "SERVICE_TOKEN", "PATH", "HOME", "LANG", "TMPDIR", "LC_CTYPE"}
    assert results[1] == "svc-token-123"
    assert "svc-token-123" not in out.stdout  # the audit line shows it redacted
    pid = int(results[2])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"MCP server {pid} outlived the runner")


async def test_only_needed_servers_are_started(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    marker = tmp_path / "started"
    model_server.push(text("done"))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[
            stdio_server("unused", [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]),
        ],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path / "run"))
    assert out.outcome == "Succeeded"
    assert not marker.exists()
    assert not out.events("mcp.ready") and not out.events("mcp.unavailable")


async def test_mcp_tool_skill_merges_fixed_arguments(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_call("quick-search", query="dns", limit=50), text("done"))
    b = bundle(
        agents=[agent("solo", provider="m", skills=["quick-search"])],
        skills=[
            mcp_tool_skill(
                "quick-search",
                "t",
                "search_docs",
                arguments={"limit": 2},
                description="Use when you need two quick doc hits.",
            )
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[stdio_server("t", stdio_command())],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    offered = model_server.requests[0].tools["quick-search"]
    assert "limit" not in offered["properties"] and "query" in offered["properties"]
    assert model_server.requests[0].tool_description("quick-search") == (
        "Use when you need two quick doc hits."
    )
    assert model_server.requests[1].tool_results() == [("2 results for 'dns' tags=[]", False)]
    [call] = out.tool_calls("quick-search")
    assert (call["kind"], call["skill"]) == ("skill", "quick-search")


async def test_per_call_timeout_retries_and_tool_errors(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("t.sleep", seconds=5), tool_call("t.fail", message="kaput"), text("done")
    )
    b = bundle(
        agents=[agent("solo", provider="m", tools=["t.sleep", "t.fail"])],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[stdio_server("t", stdio_command(), timeout_seconds=1, retries=1)],
    )
    start = time.monotonic()
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded"
    slow, is_error = model_server.requests[1].tool_results()[0]
    assert is_error and "failed after 2 attempt(s): no answer within 1s" in slow
    failed, is_error = model_server.requests[2].tool_results()[0]
    assert is_error and "McpToolError" in failed and "kaput" in failed
    assert time.monotonic() - start < 15


async def test_public_npm_filesystem_server(
    tmp_path: Path, model_server: ScriptedModelServer, filesystem_server_bin: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "hello.txt").write_text("hello from npm")
    model_server.push(tool_call("fs.read_text_file", path=str(data / "hello.txt")), text("done"))
    b = bundle(
        agents=[agent("solo", provider="m", tools=["fs.read_text_file", "fs.list_directory"])],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[
            stdio_server("filesystem", [str(filesystem_server_bin), str(data)], prefix="fs")
        ],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path / "run"))

    assert out.outcome == "Succeeded"
    offered = model_server.requests[0].tools
    assert offered["fs_read_text_file"]["required"] == ["path"]
    assert model_server.requests[1].tool_results() == [("hello from npm", False)]
