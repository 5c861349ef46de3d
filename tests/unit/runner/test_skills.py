"""Progressive disclosure: level-1 catalog, load_skill, read_skill_file (and its refusals)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.bundles import agent, bundle, openai_provider, skill, write_bundle
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process

TRIAGE = skill(
    "incident-triage",
    "Use when the user reports a production incident and needs severity classified.",
    instructions="# Incident Triage\n\n1. Ask for the affected service.\n",
    files={"reference/escalation-matrix.md": "Sev1: page the on-call.", "reference/link.md": "x"},
)
STYLE = skill(
    "terraform-style",
    "Use when writing\n  a Terraform module our way.",
    instructions="# Terraform style",
)


async def test_level_one_lists_each_granted_skill_in_one_line(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("ok"))
    b = bundle(
        agents=[
            agent(
                "sre",
                provider="m",
                system_prompt="You are SRE.",
                skills=["incident-triage", "terraform-style"],
            )
        ],
        skills=[TRIAGE, STYLE, skill("not-granted", "Use never.", instructions="# hidden")],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    await run_in_process(b, write_bundle(b, tmp_path))

    request = model_server.requests[0]
    system = request.system
    assert system.startswith("You are SRE.\n\n## Skills\n")
    assert (
        "- incident-triage: Use when the user reports a production incident and needs "
        "severity classified." in system.splitlines()
    )
    assert "- terraform-style: Use when writing a Terraform module our way." in system.splitlines()
    assert "not-granted" not in system
    assert "Incident Triage" not in system  # bodies are never preloaded
    assert sorted(request.tool_names) == ["load_skill", "read_skill_file"]


async def test_no_skills_no_catalog_and_no_synthetic_tools(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("ok"))
    b = bundle(
        agents=[agent("plain", provider="m", system_prompt="Plain.")],
        skills=[TRIAGE],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    await run_in_process(b, write_bundle(b, tmp_path))
    assert model_server.requests[0].system == "Plain."
    assert model_server.requests[0].tool_names == []


async def test_load_skill_and_read_skill_file(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("load_skill", name="incident-triage"),
        tool_call(
            "read_skill_file", skill_name="incident-triage", path="reference/escalation-matrix.md"
        ),
        tool_call("load_skill", name="not-granted"),
        text("Sev1"),
    )
    b = bundle(
        agents=[agent("sre", provider="m", skills=["incident-triage"])],
        skills=[TRIAGE, skill("not-granted", instructions="# hidden")],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    body, _ = model_server.requests[1].tool_results()[0]
    assert "# Incident Triage" in body and "1. Ask for the affected service." in body
    assert "- reference/escalation-matrix.md" in body
    assert model_server.requests[2].tool_results() == [("Sev1: page the on-call.", False)]
    refused, is_error = model_server.requests[3].tool_results()[0]
    assert is_error and "SkillNotGranted" in refused
    assert [e["skill"] for e in out.events("skill.load")] == ["incident-triage"]
    [read] = out.events("skill.file_read")
    assert (read["skill"], read["path"], read["outcome"]) == (
        "incident-triage",
        "reference/escalation-matrix.md",
        "ok",
    )
    # The result reports the same facts, per agent (refused calls are not usage).
    assert out.result["skills"] == [
        {
            "agent": "sre",
            "loaded": ["incident-triage"],
            "loads": 1,
            "filesRead": [{"skill": "incident-triage", "path": "reference/escalation-matrix.md"}],
            "fileReads": 1,
            "scripts": [],
            "scriptRuns": 0,
            "scriptFailures": 0,
            "truncated": False,
        }
    ]


async def test_traversal_absolute_and_symlink_escapes_are_refused(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    attempts = [
        "../not-granted/SKILL.md",
        "reference/../../not-granted/SKILL.md",
        str(secret),
        "/etc/passwd",
        "reference/link.md",  # a bundled path whose mounted file is a symlink out
        "SKILL.md/../../../secret.txt",
    ]
    model_server.push(
        *[tool_call("read_skill_file", skill_name="incident-triage", path=p) for p in attempts],
        text("done"),
    )
    b = bundle(
        agents=[agent("sre", provider="m", skills=["incident-triage"])],
        skills=[TRIAGE, skill("not-granted", instructions="# hidden")],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    layout = write_bundle(b, tmp_path / "run")
    link = layout.skill_dir("incident-triage") / "reference" / "link.md"
    link.unlink()
    os.symlink(secret, link)

    out = await run_in_process(b, layout)

    for request in model_server.requests[1:]:
        [(content, is_error)] = request.tool_results()
        assert is_error, content
        assert "PathNotAllowed" in content
        assert "TOP SECRET" not in content and "hidden" not in content
    refused = [e for e in out.events("skill.file_read") if e["outcome"] == "refused"]
    assert len(refused) == len(attempts)


async def test_unknown_grant_warns_and_stays_inert(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("ok"))
    b = bundle(
        agents=[agent("sre", provider="m", skills=["incident-triage", "future-skill"])],
        skills=[TRIAGE],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))
    assert out.outcome == "Succeeded"
    assert "future-skill" not in model_server.requests[0].system
    [warning] = out.events("startup.warning")
    assert warning["skill"] == "future-skill" and "inert" in warning["message"]


async def test_skill_audit_policy_redacts_paths(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    from tests.support.bundles import mcp_tool_skill, stdio_server
    from tests.support.mcp_servers import stdio_command

    model_server.push(
        tool_call("echo-secret", text=json.dumps({"user": "ann", "password": "hunter2"})),
        text("done"),
    )
    b = bundle(
        agents=[agent("solo", provider="m", skills=["echo-secret"])],
        skills=[
            mcp_tool_skill(
                "echo-secret",
                "t",
                "echo",
                audit={"redact": ["input.text", "output.password"]},
            )
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
        mcp_servers=[stdio_server("t", stdio_command())],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    [call] = out.tool_calls("echo-secret")
    assert call["input"] == {"text": "[REDACTED]"}
    assert call["output"] == {"user": "ann", "password": "[REDACTED]"}
    assert "hunter2" not in out.stdout
    # The model itself still gets the real result.
    assert "hunter2" in model_server.requests[1].tool_results()[0][0]
