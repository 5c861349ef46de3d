"""A funnel's reviewer agent must be read-only: what the Topology's reconcile refuses.

The effects model is the runner's (``swarmkit_runner.permissions``): undeclared
``llm_prompt`` skills read, composed skills take the widest component, a ``readonly`` tier
only lets reads through, MCP tools are ``unknown`` and Workspace HTTP tools ``write`` unless
declared. The runner-side refusal is tested in tests/unit/runner/test_funnel.py.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.conditions import REASON_REVIEWER_NOT_READ_ONLY
from swarmkit_api.topology import TopologySpec
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders.funnel import check_funnels
from swarmkit_operator.builders.reviewer import SkillFacts, not_read_only

WORKSPACE = WorkspaceSpec.model_validate(
    {
        "mcpServers": [
            {
                "id": "gh",
                "transport": "http",
                "url": "http://127.0.0.1:1/mcp",
                "toolOverrides": [
                    {"tool": "get_issue", "effects": "read"},
                    {"tool": "create_issue", "effects": "write"},
                ],
            },
            {
                "id": "docs",
                "transport": "http",
                "url": "http://127.0.0.1:1/mcp",
                "permission": "readonly",
            },
        ],
        "tools": [
            {
                "name": "lookup",
                "description": "Look up.",
                "http": {"url": "http://x/", "method": "GET"},
                "effects": "read",
            },
            {"name": "post_note", "description": "Post.", "http": {"url": "http://x/"}},
        ],
    }
)


def facts(**skills: dict[str, Any]) -> Any:
    table = {n: SkillFacts.of({"implementation": impl}) for n, impl in skills.items()}
    table["scripted"] = SkillFacts.of({"implementation": {"type": "llm_prompt"}}, scripts=1)
    return table.get


SKILLS = facts(
    summarize={"type": "llm_prompt"},
    publish={"type": "llm_prompt", "effects": "write"},
    guarded={"type": "agent", "permission": "readonly"},
    ask_other={"type": "agent", "topology": "x"},
    mixed={"type": "composed", "composes": ["summarize", "publish"]},
    reads={"type": "composed", "composes": ["summarize", "guarded"]},
    issue={"type": "mcp_tool", "server": "gh", "tool": "get_issue"},
    file_issue={"type": "mcp_tool", "server": "gh", "tool": "create_issue"},
)


def test_a_reviewer_holding_only_reads_passes() -> None:
    spec = {
        "skills": ["summarize", "guarded", "reads", "issue", "missing-skill"],
        "tools": ["gh.get_issue", "docs.search", "lookup"],
        "nativeTools": {"webSearch": True},
    }
    assert not_read_only(spec, SKILLS, WORKSPACE) == []


def test_every_grant_that_can_change_something_is_named() -> None:
    spec = {
        "skills": ["publish", "ask_other", "mixed", "file_issue", "scripted", "pack:workspace"],
        "tools": ["gh.list_prs", "post_note", "human_task_request"],
        "nativeTools": {"bash": True, "fileIo": True, "webSearch": True},
    }
    assert not_read_only(spec, SKILLS, WORKSPACE) == [
        "skill publish (effects write)",
        "skill ask_other (effects unknown)",
        "skill mixed (effects write)",
        "skill file_issue (effects write)",
        "skill scripted (bundles scripts: run_skill_script)",
        "grant pack:workspace (command packs and topologies are not read-only)",
        "MCP tool gh.list_prs (effects unknown)",
        "tool post_note (effects write)",
        "builtin tool human_task_request",
        "native tool bash",
        "native tool file_io",
    ]


def test_the_topology_is_not_ready_naming_the_offending_skill() -> None:
    topology = TopologySpec.model_validate(
        {
            "workspaceRef": {"name": "default"},
            "agents": [
                {
                    "name": "w",
                    "agentRef": {"name": "writer"},
                    "role": "root",
                    "funnel": {"name": "f"},
                }
            ],
        }
    )
    funnel = {
        "review": {"agent": "critic"},
        "approve": {
            "rules": [{"roles": ["leads"], "quorum": "any"}],
            "roles": {"leads": {"groups": ["l"]}},
        },
    }
    agents = {"critic": {"skills": ["summarize", "publish"]}, "writer": {}}

    def writes(agent: str) -> list[str]:
        return not_read_only(agents[agent], SKILLS, WORKSPACE)

    check = check_funnels(
        topology, {"f": funnel}, lambda a: [], agents.__contains__, reviewer_writes=writes
    )
    assert check.problem is not None
    assert check.problem.status == "False"
    assert check.problem.reason == REASON_REVIEWER_NOT_READ_ONLY == "ReviewerNotReadOnly"
    assert check.problem.message == (
        "node w: Funnel f's reviewer agent critic must be read-only but holds: "
        "skill publish (effects write)"
    )
    agents["critic"] = {"skills": ["summarize"]}
    assert (
        check_funnels(
            topology, {"f": funnel}, lambda a: [], agents.__contains__, reviewer_writes=writes
        ).problem
        is None
    )
