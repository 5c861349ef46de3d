"""Default-deny: an agent sees exactly what it was granted; everything else is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

from swarmkit_api.bundle import secret_env_name
from tests.support.bundles import (
    agent,
    bundle,
    http_tool,
    openai_provider,
    secret_ref,
    write_bundle,
)
from tests.support.http_server import HttpRequest, RecordingHttpServer
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process


async def test_an_ungranted_tool_is_refused_and_audited(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_call("bash", command="cat /etc/passwd"), text("ok"))
    b = bundle(
        agents=[agent("solo", provider="m", tools=["kb_search"])],
        providers=[openai_provider("m", model_server.openai_base_url)],
        tools=[http_tool("kb_search", "http://127.0.0.1:9/search")],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded"
    assert model_server.requests[0].tool_names == ["kb_search"]
    [(content, is_error)] = model_server.requests[1].tool_results()
    assert is_error
    assert "ToolNotGranted: tool 'bash' is not available to agent 'solo'" in content
    [refused] = out.events("tool.refused")
    assert (refused["tool"], refused["agent"], refused["outcome"]) == ("bash", "solo", "refused")


async def test_native_tools_are_off_by_default(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("nothing to do"))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url)],
        workspace={"searchProvider": {"url": "http://127.0.0.1:9/search"}},
    )
    await run_in_process(b, write_bundle(b, tmp_path))
    assert model_server.requests[0].tool_names == []
    assert "tools" not in model_server.requests[0].body


async def test_file_io_and_bash_work_in_scratch_and_stay_confined(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    model_server.push(
        tool_call("file_io", operation="write", path="notes/a.txt", content="hello"),
        tool_call("bash", command="cat notes/a.txt; env"),
        tool_call("file_io", operation="read", path="../outside.txt"),
        tool_call("file_io", operation="read", path=str(outside)),
        text("done"),
    )
    leaked = "runner-secret-value-77"
    os.environ["SWARMKIT_SECRET_TESTLEAK"] = leaked
    try:
        b = bundle(
            agents=[agent("solo", provider="m", native={"bash": True, "fileIo": True})],
            providers=[openai_provider("m", model_server.openai_base_url)],
        )
        layout = write_bundle(b, tmp_path / "run")
        out = await run_in_process(b, layout)
    finally:
        del os.environ["SWARMKIT_SECRET_TESTLEAK"]

    assert out.outcome == "Succeeded"
    assert sorted(model_server.requests[0].tool_names) == ["bash", "file_io"]
    assert (layout.scratch / "work" / "notes" / "a.txt").read_text() == "hello"
    bash_result = json.loads(model_server.requests[2].tool_results()[0][0])
    assert bash_result["stdout"].startswith("hello")
    assert leaked not in bash_result["stdout"]
    for request in model_server.requests[3:5]:
        [(content, is_error)] = request.tool_results()
        assert is_error and "PathNotAllowed" in content


async def test_http_tool_template_mapping_and_credentials(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    def responder(request: HttpRequest) -> tuple[int, object]:
        if request.path == "/tickets/A%2F1":
            return 200, {"data": {"title": "Printer on fire", "owner": {"name": "ops"}}}
        return 404, {"error": "no such ticket " + "x" * 5000}

    token = "tok-2b8f6e1c"
    ref = secret_ref("kb", "token")
    with RecordingHttpServer(responder) as api:
        tool = http_tool(
            "get_ticket",
            f"{api.url}/tickets/{{ticket_id}}",
            method="GET",
            inputSchema={
                "type": "object",
                "properties": {"ticket_id": {"type": "string"}, "verbose": {"type": "boolean"}},
                "required": ["ticket_id"],
            },
            responseMapping={"title": "data.title", "owner": "data.owner.name"},
            credentials={"secretKeyRef": ref.wire(), "header": "X-Api-Token", "prefix": ""},
        )
        model_server.push(
            tool_call("get_ticket", ticket_id="A/1", verbose=True),
            tool_call("get_ticket", ticket_id="B"),
            tool_call("get_ticket", verbose="yes"),
            text("done"),
        )
        b = bundle(
            agents=[agent("solo", provider="m", tools=["get_ticket"])],
            providers=[openai_provider("m", model_server.openai_base_url)],
            tools=[tool],
        )
        out = await run_in_process(
            b, write_bundle(b, tmp_path), environ={secret_env_name(ref): token}
        )

    assert out.outcome == "Succeeded"
    assert model_server.requests[0].tools["get_ticket"]["required"] == ["ticket_id"]
    ok = json.loads(model_server.requests[1].tool_results()[0][0])
    assert ok == {"title": "Printer on fire", "owner": "ops"}
    assert api.requests[0].headers["x-api-token"] == token
    assert api.requests[0].query == {"verbose": ["true"]}
    not_found, is_error = model_server.requests[2].tool_results()[0]
    assert is_error and "HTTP 404" in not_found
    assert len(not_found) < 1300  # the body is capped
    invalid, is_error = model_server.requests[3].tool_results()[0]
    assert is_error and "InvalidArguments" in invalid
    assert len(api.requests) == 2  # the invalid call never left the runner
    assert token not in out.stdout


async def test_an_http_tool_host_placeholder_cannot_carry_a_credential_away(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    """Issue 46 item 7: a tool whose Secret key is a Workspace credential sends it only to
    the credential's allowedHosts, whatever host the model puts in the URL."""
    token = "tok-7c1d0e55"
    ref = secret_ref("kb", "token")
    with RecordingHttpServer(lambda r: (200, {"ok": True})) as api:
        port = api.url.rsplit(":", 1)[1]
        tool = http_tool(
            "fetch",
            f"http://{{host}}:{port}/x",
            method="GET",
            credentials={"secretKeyRef": ref.wire(), "header": "X-Api-Token", "prefix": ""},
        )
        model_server.push(
            tool_call("fetch", host="127.0.0.1"),
            tool_call("fetch", host="localhost"),
            text("done"),
        )
        b = bundle(
            agents=[agent("solo", provider="m", tools=["fetch"])],
            providers=[openai_provider("m", model_server.openai_base_url)],
            tools=[tool],
            workspace={
                "credentials": [
                    {"name": "kb", "secretKeyRef": ref.wire(), "allowedHosts": ["127.0.0.1"]}
                ]
            },
        )
        out = await run_in_process(
            b, write_bundle(b, tmp_path), environ={secret_env_name(ref): token}
        )

    assert out.outcome == "Succeeded"
    allowed, is_error = model_server.requests[1].tool_results()[0]
    assert not is_error, allowed
    refused, is_error = model_server.requests[2].tool_results()[0]
    assert is_error and "CredentialNotAllowed" in refused and "'kb'" in refused
    assert len(api.requests) == 1  # the refused call never left the runner
    assert api.requests[0].headers["x-api-token"] == token


async def test_read_flow_data_opens_only_listed_files(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    flow_dir = tmp_path / "flow"
    flow_dir.mkdir()
    (flow_dir / "templates").mkdir()
    (flow_dir / "templates" / "review.md").write_text("# Review template")
    model_server.push(
        tool_call("read_flow_data", path="exclusions.yaml"),
        tool_call("read_flow_data", path="templates/review.md"),
        tool_call("read_flow_data", path="other.yaml"),
        text("done"),
    )
    b = bundle(
        agents=[
            agent(
                "solo",
                provider="m",
                flow_data_access=["exclusions.yaml", "templates/review.md"],
            )
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
        workspace={
            "flowData": [
                {"path": "exclusions.yaml", "content": "skip: [vendor]"},
                {
                    "path": "templates/review.md",
                    "configMapRef": {"name": "bundle", "key": "flow.0"},
                },
                {"path": "other.yaml", "content": "not yours"},
            ]
        },
        flow_data_dir=str(flow_dir),
    )
    await run_in_process(b, write_bundle(b, tmp_path / "run"))
    results = [r.tool_results()[0] for r in model_server.requests[1:]]
    assert results[0] == ("skip: [vendor]", False)
    assert results[1] == ("# Review template", False)
    assert results[2][1] and "not in this agent's flowDataAccess" in results[2][0]


async def test_platform_builtins_are_gated_by_permissions(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_call("mailbox_send", to="ops", message="hi"), text("sent"))
    b = bundle(
        agents=[
            agent(
                "solo",
                provider="m",
                tools=["mailbox_send", "schedule", "human_task_request"],
                permissions=["schedule"],
            ),
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    # mailbox_send is universal, schedule is permitted, human_task_request is not.
    assert sorted(model_server.requests[0].tool_names) == ["mailbox_send", "schedule"]
    # The mailbox is not declared by the Workspace: a tool error naming it, nothing recorded.
    [(content, is_error)] = model_server.requests[1].tool_results()
    assert is_error and "mailbox 'ops' is not declared" in content
    assert out.events("effect.recorded") == []
    warnings = [w["message"] for w in out.events("startup.warning")]
    assert any("human_task_request" in w and "permission" in w for w in warnings)


async def test_web_search_uses_the_workspace_search_provider(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    ref = secret_ref("search", "key")
    with RecordingHttpServer(lambda r: (200, {"results": [{"title": "TLS guide"}]})) as search:
        model_server.push(tool_call("web_search", query="rotate tls cert"), text("done"))
        b = bundle(
            agents=[agent("solo", provider="m", native={"webSearch": True})],
            providers=[openai_provider("m", model_server.openai_base_url)],
            workspace={"searchProvider": {"url": f"{search.url}/search", "apiKey": ref.wire()}},
        )
        out = await run_in_process(
            b, write_bundle(b, tmp_path), environ={secret_env_name(ref): "search-key-9"}
        )
    assert out.outcome == "Succeeded"
    assert model_server.requests[0].tool_names == ["web_search"]
    assert search.requests[0].query == {"q": ["rotate tls cert"]}
    assert search.requests[0].headers["authorization"] == "Bearer search-key-9"
    assert "TLS guide" in model_server.requests[1].tool_results()[0][0]
