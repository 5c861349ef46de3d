"""Permission tiers, effects, IAM scopes and provenance trust: refusals are tool errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.bundles import (
    agent,
    bundle,
    http_tool,
    openai_provider,
    skill,
    stdio_server,
    write_bundle,
)
from tests.support.http_server import RecordingHttpServer
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import ScriptedModelServer, text, tool_calls
from tests.support.runner import run_in_process


def llm(name: str, **kw: Any) -> Any:
    impl = {"type": "llm_prompt", "prompt": f"You are {name}."}
    impl.update(kw.pop("impl", {}))
    return skill(name, implementation=impl, **kw)


async def test_mcp_server_tiers_and_per_tool_overrides(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_calls(
            ("ro.echo", {"text": "hi"}),
            ("ro.add", {"a": 1, "b": 2}),
            ("ro.pid", {}),
        ),
        text("done"),
    )
    server = stdio_server(
        "ro",
        stdio_command("ro"),
        permission="readonly",
        toolOverrides=[
            {"tool": "echo", "effects": "read"},
            {"tool": "whoami", "permission": "strict", "effects": "read"},
            {"tool": "pid", "permission": "strict", "effects": "read", "approved": True},
        ],
    )
    b = bundle(
        agents=[agent("dev", provider="m", tools=["ro.echo", "ro.add", "ro.whoami", "ro.pid"])],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[server],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    echo, add, pid = model_server.requests[1].tool_results()
    assert echo == ("hi", False)
    assert (
        add[1]
        and "ReadOnlyTier: MCP tool ro.add is readonly and this call's effects are unknown"
        in add[0]
    )
    assert not pid[1] and pid[0].isdigit()
    refused = {e["tool"]: e for e in out.events("tool.refused")}
    assert set(refused) == {"ro.add"}
    assert (refused["ro.add"]["tier"], refused["ro.add"]["effects"]) == ("readonly", "unknown")
    calls = {e["tool"]: e for e in out.tool_calls()}
    assert (calls["ro.echo"]["tier"], calls["ro.echo"]["effects"]) == ("readonly", "read")
    assert out.result["toolCalls"] == 3


async def test_skill_tiers_scopes_and_provenance(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    names = [
        "strict-reviewed",
        "needs-scope",
        "has-scope",
        "swarm-unreviewed",
        "swarm-reviewed",
        "operator-blocked",
        "registry",
        "vendor",
        "readonly-writer",
    ]
    model_server.push(tool_calls(*[(n, {"input": "x"}) for n in names]))
    model_server.push(
        *[text(f"answer {n}") for n in ("strict-reviewed", "has-scope", "swarm-reviewed", "vendor")]
    )
    model_server.push(text("done"))
    b = bundle(
        agents=[agent("dev", provider="m", skills=names, scopes=["repo:read"])],
        skills=[
            llm("strict-reviewed", impl={"permission": "strict"}, reviewed=True),
            llm("needs-scope", iam={"requiredScopes": ["repo:read", "repo:write"]}),
            llm("has-scope", iam={"requiredScopes": ["repo:read"]}),
            llm("swarm-unreviewed", authored_by="authored_by_swarm"),
            llm("swarm-reviewed", authored_by="authored_by_swarm", reviewed=True),
            llm("operator-blocked", callable=False, blocked_reason="locked by the operator"),
            llm("registry", authored_by="imported_from_registry"),
            llm("vendor", authored_by="vendor_published"),
            llm("readonly-writer", impl={"permission": "readonly", "effects": "write"}),
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
        workspace={"governance": {"provenance": {"importedFromRegistry": "deny"}}},
        governance={"provenance": {"importedFromRegistry": "deny"}},
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    # refused tools are still offered, their description says why
    first = model_server.requests[0]
    assert "[Not callable here: MissingScopes:" in first.tool_description("needs-scope")
    results = dict(zip(names, model_server.requests[-1].tool_results(), strict=True))
    assert results["strict-reviewed"] == ("answer strict-reviewed", False)
    assert results["has-scope"] == ("answer has-scope", False)
    assert results["swarm-reviewed"] == ("answer swarm-reviewed", False)
    assert results["vendor"] == ("answer vendor", False)
    expected = {
        "needs-scope": "MissingScopes: requires scope(s) repo:write, which agent dev does not "
        "hold (it holds: repo:read)",
        "swarm-unreviewed": "SkillBlocked: skill swarm-unreviewed is authored_by_swarm and "
        "locked until a reviewer approves its Review",
        "operator-blocked": "SkillBlocked: skill operator-blocked is not callable: locked by "
        "the operator",
        "registry": "SkillBlocked: skill registry: provenance imported_from_registry is denied "
        "by the Workspace governance.provenance policy",
        "readonly-writer": "ReadOnlyTier: skill readonly-writer is readonly and this call's "
        "effects are write",
    }
    for name, message in expected.items():
        content, is_error = results[name]
        assert is_error and message in content, (name, content)
    refused = {e["skill"]: e["reason"] for e in out.events("tool.refused")}
    assert refused == {
        "needs-scope": "MissingScopes",
        "swarm-unreviewed": "SkillBlocked",
        "operator-blocked": "SkillBlocked",
        "registry": "SkillBlocked",
        "readonly-writer": "ReadOnlyTier",
    }
    assert len(model_server.requests) == 6  # 2 agent turns, 4 skills: none for a refusal


async def test_workspace_http_tool_tiers(tmp_path: Path, model_server: ScriptedModelServer) -> None:
    with RecordingHttpServer() as http:
        model_server.push(
            tool_calls(("lookup", {"q": "a"}), ("update", {"q": "b"}), ("guarded", {"q": "c"})),
            text("done"),
        )
        b = bundle(
            agents=[agent("dev", provider="m", tools=["lookup", "update", "guarded"])],
            providers=[openai_provider("m", model_server.openai_base_url)],
            tools=[
                http_tool("lookup", f"{http.url}/l", permission="readonly", effects="read"),
                http_tool("update", f"{http.url}/u", permission="readonly"),
                http_tool("guarded", f"{http.url}/g", permission="strict", effects="read"),
            ],
        )
        out = await run_in_process(b, write_bundle(b, tmp_path))
        paths = [r.path for r in http.requests]

    assert out.outcome == "Succeeded", out.result
    lookup, update, guarded = model_server.requests[1].tool_results()
    assert not lookup[1]
    assert (
        update[1]
        and "ReadOnlyTier: tool update is readonly and this call's effects are write" in update[0]
    )
    assert guarded[1] and "NotApproved: tool guarded is strict" in guarded[0]
    assert paths == ["/l"]  # refused calls never reach the network
