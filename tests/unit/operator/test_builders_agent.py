"""Agent resolution: versions fold in granted skills, packs expand, references validate."""

from __future__ import annotations

import json
from typing import Any

from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders.agent import SkillView, WorkspaceView, resolve_agent
from swarmkit_operator.builders.skill import ScriptVerdict

WS = WorkspaceSpec.model_validate(
    {
        "modelProviders": [{"name": "replay", "type": "replay"}],
        "permissionBundles": [{"name": "worker", "permissions": ["mailbox_send"]}],
        "tools": [{"name": "kb_search", "description": "x", "http": {"url": "https://kb"}}],
        "mcpServers": [{"id": "pg-main", "transport": "http", "url": "https://pg"}],
        "commandPacks": [
            {
                "id": "text",
                "commands": [
                    {"name": "wc", "description": "count", "argv": ["wc"], "effects": "read"},
                    {"name": "rm", "description": "remove", "argv": ["rm"], "effects": "write"},
                ],
            }
        ],
        "flowData": [{"path": "exclusions.yaml", "content": "- vendor/\n"}],
        "governance": {"deniedScripts": [{"skill": "b"}]},
    }
)
WORKSPACE = WorkspaceView("default", WS, ready=True, reason="Rendered", config_map="ws-default-1")


def owner(name: str = "reviewer") -> ObjectRef:
    return ObjectRef("Agent", name, "team-a", "uid-" + name)


def skill(name: str, h: str, **kw: Any) -> SkillView:
    return SkillView(name, h, f"skill-{name}-{h[:8]}", ready=True, reason="Rendered", **kw)


SKILLS = {n: skill(n, n * 12) for n in ("a", "b", "c")}


def resolve(spec: dict[str, Any], skills: dict[str, SkillView] | None = None, **kw: Any) -> Any:
    return resolve_agent(
        owner(),
        spec,
        SKILLS if skills is None else skills,
        kw.pop("workspace", WORKSPACE),
        kw.pop("topologies", {}),
    )


def v(render: Any) -> dict[str, tuple[str, str]]:
    return {x.type: (x.status, x.reason) for x in render.verdicts}


def test_version_folds_in_exactly_the_granted_skills() -> None:
    base = resolve({"skills": ["a", "b"]})
    assert v(base) == {
        "Accepted": ("True", "Valid"),
        "SkillsResolved": ("True", "AllResolved"),
        "Ready": ("True", "Rendered"),
    }
    assert len(base.version) == 12
    edited = dict(SKILLS, a=skill("a", "f" * 64))
    assert resolve({"skills": ["a", "b"]}, edited).version != base.version
    other = dict(SKILLS, c=skill("c", "f" * 64))
    assert resolve({"skills": ["a", "b"]}, other).version == base.version
    # no grants: no skill edit can touch it
    none = resolve({}, SKILLS).version
    assert resolve({}, edited).version == none == resolve({}, {}).version
    # order of grants matters; spec matters
    assert resolve({"skills": ["b", "a"]}).version != base.version
    assert resolve({"skills": ["a", "b"], "systemPrompt": "x"}).version != base.version
    assert [r.name for r in base.resolved] == ["a", "b"]
    assert base.status_fields()["resolvedSkills"][0] == {
        "name": "a",
        "contentHash": "a" * 12,
        "renderedConfigMap": "skill-a-aaaaaaaa",
    }


def test_unknown_skill_is_inert_and_its_arrival_changes_the_version() -> None:
    render = resolve({"skills": ["a", "ghost"]})
    assert v(render)["SkillsResolved"] == ("False", "SkillNotFound")
    assert v(render)["Ready"] == ("True", "Rendered")
    assert render.missing == ("ghost",)
    msg = next(x.message for x in render.verdicts if x.type == "SkillsResolved")
    assert "ghost" in msg
    arrived = resolve({"skills": ["a", "ghost"]}, dict(SKILLS, ghost=skill("ghost", "9" * 64)))
    assert arrived.version != render.version
    assert arrived.missing == ()


def test_skill_not_ready_counts_as_missing() -> None:
    broken = SkillView("a", None, None, ready=False, reason="TooLarge")
    render = resolve({"skills": ["a"]}, {"a": broken})
    assert v(render)["SkillsResolved"] == ("False", "SkillNotReady")
    assert "TooLarge" in next(x.message for x in render.verdicts if x.type == "SkillsResolved")
    assert render.missing == ("a",)


def test_composed_components_are_folded_in() -> None:
    skills = dict(SKILLS, combo=skill("combo", "d" * 64, composes=("a", "c")))
    render = resolve({"skills": ["combo"]}, skills)
    assert [r.name for r in render.resolved] == ["combo", "a", "c"]
    assert render.resolved[1].via == "combo"
    edited = dict(skills, c=skill("c", "e" * 64))
    assert resolve({"skills": ["combo"]}, edited).version != render.version


def test_packs_expand() -> None:
    topologies = {"review": "Reviews code.", "triage": ""}
    render = resolve({"skills": ["pack:workspace", "pack:text"]}, topologies=topologies)
    names = [s.name for s in render.synthesized]
    assert names == ["topology-review", "topology-triage", "pack:text"]
    data = json.loads(render.config_map["data"]["resolved.json"])
    assert data["commands"] == ["text/wc"]  # reads only
    assert data["synthesizedSkills"][0]["topology"] == "review"
    more = resolve({"skills": ["pack:workspace"]}, topologies=dict(topologies, new=""))
    assert more.version != resolve({"skills": ["pack:workspace"]}, topologies=topologies).version
    single = resolve({"skills": ["topology-review"]}, topologies=topologies)
    assert [s.name for s in single.synthesized] == ["topology-review"]
    gone = resolve({"skills": ["topology-nope"]}, topologies=topologies)
    assert gone.missing == ("topology-nope",)


def test_unknown_pack_bundle_tool_native_tool_flow_provider() -> None:
    cases: dict[str, dict[str, Any]] = {
        "UnknownCommandPack": {"skills": ["pack:nope"]},
        "UnknownPermissionBundle": {"permissionsBundle": "admin"},
        "UnknownTool": {"tools": ["jira_create"]},
        "NativeToolUnavailable": {"nativeTools": {"webSearch": True}},
        "UnknownFlowData": {"flowDataAccess": ["secret.yaml"]},
        "UnknownModelProvider": {"model": {"provider": "openai"}},
    }
    for reason, spec in cases.items():
        render = resolve(spec)
        accepted = next(x for x in render.verdicts if x.type == "Accepted")
        assert (accepted.status, accepted.reason) == ("False", reason), spec
        name = next(iter(str(x) for x in _names(spec)))
        assert name in accepted.message, (name, accepted.message)
        assert v(render)["Ready"] == ("False", reason)
        assert render.config_map is None
    ok = resolve(
        {
            "permissionsBundle": "worker",
            "permissions": ["schedule", "mailbox_send"],
            "tools": ["kb_search", "pg_main.list_tables", "human_task_request"],
            "nativeTools": {"bash": True, "fileIo": True},
            "flowDataAccess": ["exclusions.yaml"],
            "model": {"provider": "replay"},
        }
    )
    assert v(ok)["Accepted"] == ("True", "Valid"), ok.verdicts
    data = json.loads(ok.config_map["data"]["resolved.json"])
    assert data["permissions"] == ["mailbox_send", "schedule"]


def _names(spec: dict[str, Any]) -> list[str]:
    value = next(iter(spec.values()))
    if isinstance(value, list):
        return [str(value[0]).removeprefix("pack:")]
    if isinstance(value, dict):
        return [str(next(iter(value.values()))) if "provider" in value else "web_search"]
    return [str(value)]


def test_workspace_missing_or_not_ready() -> None:
    render = resolve({"skills": ["a"]}, workspace=None)
    assert v(render)["Ready"] == ("False", "WorkspaceNotFound")
    assert render.version == resolve({"skills": ["a"]}).version
    not_ready = WorkspaceView("default", WS, ready=False, reason="SecretNotFound", message="x")
    render = resolve({"skills": ["a"]}, workspace=not_ready)
    assert v(render)["Ready"] == ("False", "WorkspaceNotReady")


def test_workspace_narrowing_lands_in_the_render() -> None:
    approved = (ScriptVerdict("scripts/x.py", "0" * 64, True, "Approved"),)
    skills = {"b": skill("b", "b" * 64, scripts=approved)}
    render = resolve({"skills": ["b"]}, skills)
    data = json.loads(render.config_map["data"]["resolved.json"])
    assert data["skills"][0]["scripts"][0]["reason"] == "DeniedByWorkspace"


def test_invalid_spec() -> None:
    render = resolve({"skills": ["Bad Name"]})
    assert v(render)["Accepted"] == ("False", "Invalid")
    assert "spec.skills" in next(x.message for x in render.verdicts if x.type == "Accepted")


def test_config_map_is_content_addressed() -> None:
    a = resolve({"skills": ["a"]})
    b = resolve({"skills": ["a"]})
    assert a.config_map == b.config_map
    assert a.config_map["metadata"]["name"].startswith("agent-reviewer-")
    assert a.config_map["immutable"] is True
    c = resolve({"skills": ["a"]}, dict(SKILLS, a=skill("a", "1" * 64)))
    assert c.config_map["metadata"]["name"] != a.config_map["metadata"]["name"]


def test_a_temperature_the_agents_provider_refuses_is_not_accepted() -> None:
    ws = WS.model_copy(
        update={
            "model_providers": WorkspaceSpec.model_validate(
                {
                    "modelProviders": [
                        {"name": "claude", "type": "anthropic", "defaultModel": "claude-x"},
                        {"name": "oai", "type": "openai", "defaultModel": "o4-mini"},
                        {"name": "br", "type": "bedrock", "aws": {"region": "us-east-1"}},
                    ]
                }
            ).model_providers
        }
    )
    view = WorkspaceView("default", ws, ready=True, reason="Rendered", config_map="ws-default-1")
    refused = {
        # the first provider (anthropic) takes no temperature at this API version
        "anthropic": {"model": {"temperature": 0.3}},
        # the provider's default model is a reasoning model: no CEL rule on the Agent sees it
        "reasoning": {"model": {"provider": "oai", "temperature": 0.3}},
        # Converse's service model: 0 to 1, whatever the model
        "bedrock": {"model": {"provider": "br", "name": "meta.llama3-70b", "temperature": 1.5}},
    }
    for case, spec in refused.items():
        accepted = next(x for x in resolve(spec, workspace=view).verdicts if x.type == "Accepted")
        assert (accepted.status, accepted.reason) == ("False", "UnsupportedModelSetting"), case
        assert accepted.message.startswith("spec.model.temperature: "), accepted.message
    named = resolve({"model": {"provider": "oai", "name": "o3", "temperature": 0.3}})
    assert v(named)["Accepted"][1] == "Invalid"  # the spec itself is refused (CEL's twin)
    fine = resolve(
        {"model": {"provider": "oai", "name": "gpt-4o", "temperature": 1.7}}, workspace=view
    )
    assert v(fine)["Accepted"] == ("True", "Valid")
    unset = resolve({"model": {"provider": "claude"}}, workspace=view)
    assert v(unset)["Accepted"] == ("True", "Valid")


def test_a_skill_sending_a_credential_outside_its_allowed_hosts_is_not_accepted() -> None:
    """Issue 46 item 7: the Workspace admin names the hosts; an editor's Skill cannot add one."""
    ws = WorkspaceSpec.model_validate(
        {
            **WS.wire(),
            "credentials": [
                {
                    "name": "partner",
                    "secretKeyRef": {"name": "partner", "key": "token"},
                    "allowedHosts": ["agents.partner.example", "*.internal.example:8443"],
                },
                {"name": "unlisted", "secretKeyRef": {"name": "u", "key": "token"}},
            ],
        }
    )
    workspace = WorkspaceView("default", ws, ready=True, reason="Rendered", config_map="ws-1")

    def with_remote(ref: str, url: str) -> Any:
        skills = dict(SKILLS, remote=skill("remote", "r" * 12, credential=(ref, url)))
        return resolve({"skills": ["remote"]}, skills, workspace=workspace)

    allowed = with_remote("partner", "https://agents.partner.example/.well-known/agent-card.json")
    assert v(allowed)["Ready"] == ("True", "Rendered")
    assert v(with_remote("partner", "https://a.internal.example:8443/card"))["Ready"][0] == "True"

    evil = with_remote("partner", "https://eve.example.net/card.json")
    assert v(evil)["Accepted"] == ("False", "CredentialNotAllowed")
    assert v(evil)["Ready"] == ("False", "CredentialNotAllowed")
    [accepted] = [x for x in evil.verdicts if x.type == "Accepted"]
    assert accepted.message == (
        "Skill 'remote' would send Workspace credential 'partner' to host 'eve.example.net', "
        "which its allowedHosts does not list (allowed: agents.partner.example, "
        "*.internal.example:8443)"
    )
    assert evil.config_map is None
    wrong_port = with_remote("partner", "https://a.internal.example/card")
    assert v(wrong_port)["Accepted"] == ("False", "CredentialNotAllowed")
    nowhere = with_remote("unlisted", "https://agents.partner.example/card")
    assert "allowed: none: allowedHosts is empty" in nowhere.verdicts[0].message
    unknown = with_remote("nope", "https://agents.partner.example/card")
    assert unknown.verdicts[0].message == (
        "Skill 'remote': credentialsRef 'nope' is not a credential of the workspace"
    )
