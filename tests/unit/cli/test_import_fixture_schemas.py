"""The import fixtures follow the real formats, checked against facts recorded from
upstream (not against our own reading of them, and without vendoring upstream's files):

- SwarmKit: ``packages/schema/schemas/{workspace,skill,archetype,topology,trigger}.schema.json``
  of github.com/delivstat/swarmkit at e3bb1f4f (required fields, closed property sets,
  identifier/semver patterns, enums, the implementation and credential unions).
- Swarm: ``platform-spec.yaml`` of github.com/division-sh/swarm at 1f9a335f2
  (``agent_intent_model``, ``platform_defaults``, ``custom_tool_schema``,
  ``http_tool_definition``, ``mcp_client.registration``, ``flow_package``).
- Agent Skills: ``docs/specification.mdx`` of github.com/agentskills/agentskills at 69ef37e.

A fixture that drifts from those formats (the old fixtures did: 7 of 8 SwarmKit documents
failed upstream's schemas) fails here with the document and the rule it breaks.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from .support import FIXTURES

IDENTIFIER = re.compile(r"^[a-z][a-z0-9-]*$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
IAM_SCOPE = re.compile(r"^[a-z][a-z0-9_-]*:[a-z*][a-z0-9_*-]*$")

# --- SwarmKit (JSON Schemas, draft 2020-12) -----------------------------------------
#: kind → (required top-level fields, every allowed top-level field)
SWARMKIT_TOP = {
    "Workspace": (
        {"apiVersion", "kind", "metadata"},
        {"apiVersion", "kind", "metadata", "organisation", "team", "governance", "identity",
         "model_providers", "credentials", "mcp_servers", "storage", "context_compression",
         "planning", "synthesis", "server"},
    ),
    "Skill": (
        {"apiVersion", "kind", "metadata", "category", "implementation", "provenance"},
        {"apiVersion", "kind", "metadata", "category", "inputs", "outputs", "implementation",
         "iam", "constraints", "audit", "provenance"},
    ),
    "Archetype": (
        {"apiVersion", "kind", "metadata", "role", "defaults", "provenance"},
        {"apiVersion", "kind", "metadata", "role", "defaults", "executor", "provenance"},
    ),
    "Topology": (
        {"apiVersion", "kind", "metadata", "agents"},
        {"apiVersion", "kind", "metadata", "runtime", "agents", "artifacts",
         "intent_monitoring", "governance"},
    ),
    "Trigger": (
        {"apiVersion", "kind", "metadata", "type", "targets"},
        {"apiVersion", "kind", "metadata", "type", "enabled", "targets", "provider_id",
         "config"},
    ),
}  # fmt: skip
#: kind → (required metadata fields, allowed metadata fields)
SWARMKIT_META = {
    "Workspace": ({"id", "name"}, {"id", "name", "description", "annotations"}),
    "Skill": ({"id", "name", "description"}, {"id", "name", "description"}),
    "Archetype": ({"id", "name", "description"}, {"id", "name", "description"}),
    "Topology": ({"name", "version"}, {"name", "version", "description"}),
    "Trigger": ({"id", "name"}, {"id", "name", "description"}),
}
CATEGORIES = {"capability", "decision", "coordination", "persistence"}
AUTHORED_BY = {
    "human", "authored_by_swarm", "derived_from_template", "imported_from_registry",
    "vendor_published",
}  # fmt: skip
#: the skill implementation union: type → (required, allowed)
IMPLEMENTATIONS = {
    "mcp_tool": ({"type", "server", "tool"}, {"type", "server", "tool", "arguments"}),
    "llm_prompt": ({"type", "prompt"}, {"type", "prompt", "model"}),
    "composed": ({"type", "composes"}, {"type", "composes", "strategy"}),
}
CREDENTIAL_SOURCES = {
    "env", "file", "hashicorp-vault", "aws-secrets-manager", "gcp-secret-manager",
    "azure-key-vault", "plugin",
}  # fmt: skip
MCP_SERVER_FIELDS = {
    "id", "transport", "command", "endpoint", "env", "cwd", "credentials_ref", "sandboxed",
    "sandbox_image", "permission", "permission_overrides",
}  # fmt: skip
TIERS = {"open", "cautious", "strict", "readonly"}
NODE_FIELDS = {
    "id", "role", "archetype", "model", "prompt", "skills", "skills_additional", "requires",
    "iam", "output_schema", "intent_monitoring", "funnel", "children", "depends_on",
}  # fmt: skip
DEFAULTS_FIELDS = {"model", "prompt", "skills", "iam", "output_schema"}
IAM_FIELDS = {"base_scope", "elevated_scopes"}

# --- Swarm (platform-spec.yaml) -----------------------------------------------------
#: agent_intent_model.authored_source_union and platform_defaults.no_default_fields
SWARM_AGENT_REQUIRED = {"intent", "model"}
#: custom_tool_schema, and the decoder of a tools.yaml entry
#: (internal/runtime/contracts/workflow_contract_yaml_schema.go: ``permission`` is the one
#: field the spec's list lacks; an agent without that permission fails boot verification's
#: agent_permission_validation, tests/tier8-boot-verification/test-boot-permission-tool-mismatch)
SWARM_TOOL_FIELDS = {
    "description", "category", "handler_type", "effect_class", "permission", "input_schema",
    "output_schema", "http", "response_mapping", "response_success", "credentials",
    "managed_credential", "rate_limit", "rate_limit_max_wait",
}  # fmt: skip
#: the fields an agents.yaml entry decodes (AgentRegistryEntry, minus the retired ones)
SWARM_AGENT_FIELDS = {
    "id", "type", "role", "intent", "entity_writes", "permissions", "permissions_bundle",
    "workspace_class", "manager_fallback", "node_type", "model", "memory", "mock",
    "max_turns_per_task", "subscriptions", "tools", "native_tools", "flow_data_access",
    "criteria", "emit_events", "implementation",
}  # fmt: skip
HANDLER_TYPES = {"platform_builtin", "mcp", "http"}  # default http
HTTP_BLOCK = ({"method", "url"}, {"method", "url", "headers", "body", "timeout_seconds"})
HTTP_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
TEMPLATE = re.compile(r"\{\{\s*([^}]*?)\s*\}\}")
#: mcp_client.registration.format
SWARM_MCP_FIELDS = {
    "description", "transport", "url", "command", "args", "prefix", "credentials_key",
    "rate_limit", "rate_limit_max_wait",
}  # fmt: skip
#: flow_package.manifest_self_facts.strict_decoding.supported_fields
PACKAGE_FIELDS = {
    "name", "version", "platform_version", "author", "description", "keywords", "license",
    "repository", "extra", "requires", "flows", "packages", "children", "subpackages",
    "connect", "connector_packs", "provider_trigger_events", "handoffs",
}  # fmt: skip
#: minimum_flow_package.required_files
FLOW_REQUIRED_FILES = {"package.yaml", "schema.yaml"}
#: permissions_model.permissions (workflows may add their own)
PLATFORM_PERMISSIONS = {
    "approve_spend", "configure_routing", "create_flow_instance", "human_task_request",
    "mailbox_send", "message_flow", "message_peers", "schedule",
}  # fmt: skip

# --- Agent Skills (specification.mdx) ------------------------------------------------
SKILL_MD_FIELDS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def _keys(doc: dict[str, Any], required: set[str], allowed: set[str], where: str) -> None:
    assert required <= set(doc), f"{where}: missing {sorted(required - set(doc))}"
    assert set(doc) <= allowed, f"{where}: not in the schema {sorted(set(doc) - allowed)}"


def _swarmkit_docs() -> list[tuple[str, dict[str, Any]]]:
    root = FIXTURES / "swarmkit"
    return [
        (str(p.relative_to(FIXTURES)), doc)
        for p in sorted(root.rglob("*.yaml"))
        for doc in yaml.safe_load_all(p.read_text())
    ]


@pytest.mark.parametrize(("where", "doc"), _swarmkit_docs(), ids=lambda v: str(v)[:40])
def test_swarmkit_fixture_follows_upstream_schema(where: str, doc: dict[str, Any]) -> None:
    assert doc["apiVersion"] == "swarmkit/v1", where
    kind = doc["kind"]
    _keys(doc, *SWARMKIT_TOP[kind], where)
    _keys(doc["metadata"], *SWARMKIT_META[kind], f"{where} metadata")
    meta = doc["metadata"]
    if "id" in meta:
        assert IDENTIFIER.match(meta["id"]), where
    if kind in ("Skill", "Archetype"):
        assert len(meta["description"]) >= 10, f"{where}: description minLength 10"
    check = {"Workspace": _workspace, "Skill": _skill, "Archetype": _archetype,
             "Topology": _topology}.get(kind)  # fmt: skip
    if check is not None:
        check(doc, where)


def _provenance(prov: dict[str, Any], where: str) -> None:
    _keys(prov, {"authored_by", "version"},
          {"authored_by", "authored_date", "version", "registry", "vendor"}, where)  # fmt: skip
    assert prov["authored_by"] in AUTHORED_BY and SEMVER.match(str(prov["version"])), where


def _workspace(doc: dict[str, Any], where: str) -> None:
    for name, cred in (doc.get("credentials") or {}).items():
        _keys(cred, {"source", "config"}, {"source", "config", "provider_id"}, f"{where} {name}")
        assert cred["source"] in CREDENTIAL_SOURCES and isinstance(cred["config"], dict)
        if cred["source"] == "plugin":
            assert "provider_id" in cred, where
    for mp in doc.get("model_providers") or []:
        _keys(mp, {"class", "provider_id"}, {"class", "provider_id", "config"}, where)
        assert IDENTIFIER.match(mp["provider_id"]), where
    for server in doc.get("mcp_servers") or []:
        _keys(server, {"id", "transport"}, MCP_SERVER_FIELDS, f"{where} {server.get('id')}")
        assert IDENTIFIER.match(server["id"]) and server["transport"] in {"stdio", "http"}
        needs = "command" if server["transport"] == "stdio" else "endpoint"
        assert needs in server, f"{where}: {server['transport']} servers need {needs}"
        assert all(isinstance(v, str) for v in (server.get("env") or {}).values())
        assert server.get("permission", "cautious") in TIERS, where
        assert set((server.get("permission_overrides") or {}).values()) <= TIERS, where
        if "credentials_ref" in server:
            assert server["credentials_ref"] in (doc.get("credentials") or {}), where
    limits = (doc.get("governance") or {}).get("limits") or {}
    assert set(limits) <= {"max_steps_per_agent", "max_steps_per_run", "max_cost_per_run_usd"}


def _skill(doc: dict[str, Any], where: str) -> None:
    assert doc["category"] in CATEGORIES, where
    impl = doc["implementation"]
    assert impl["type"] in IMPLEMENTATIONS, f"{where}: upstream has no {impl['type']!r} skills"
    _keys(impl, *IMPLEMENTATIONS[impl["type"]], f"{where} implementation")
    if impl["type"] == "composed":
        assert impl.get("strategy", "sequential") in {"parallel-consensus", "sequential", "custom"}
    if doc["category"] == "decision":
        assert "reasoning" in doc["outputs"]["properties"], f"{where}: decision needs reasoning"
    for scope in (doc.get("iam") or {}).get("required_scopes", []):
        assert IAM_SCOPE.match(scope), where
    audit = doc.get("audit") or {}
    assert {audit.get(k, "full") for k in ("log_inputs", "log_outputs")} <= {
        "full", "summary", "none"
    }  # fmt: skip
    _provenance(doc["provenance"], where)


def _archetype(doc: dict[str, Any], where: str) -> None:
    assert doc["role"] in {"root", "leader", "worker"}, where
    defaults = doc["defaults"]
    assert set(defaults) <= DEFAULTS_FIELDS, where
    for entry in defaults.get("skills", []):
        if isinstance(entry, str):
            assert IDENTIFIER.match(entry), where
        else:
            assert set(entry) == {"abstract"}, where
            _keys(entry["abstract"], {"category"}, {"category", "capability"}, where)
            assert entry["abstract"]["category"] in CATEGORIES, where
    assert set(defaults.get("iam") or {}) <= IAM_FIELDS, where
    _provenance(doc["provenance"], where)


def _topology(doc: dict[str, Any], where: str) -> None:
    assert set(doc["agents"]) == {"root"}, f"{where}: agents has exactly root"
    assert SEMVER.match(doc["metadata"]["version"]) and IDENTIFIER.match(doc["metadata"]["name"])

    def node(n: dict[str, Any], roles: set[str]) -> None:
        _keys(n, {"id", "role"}, NODE_FIELDS, f"{where} node {n.get('id')}")
        assert IDENTIFIER.match(n["id"]) and n["role"] in roles, where
        assert isinstance(n.get("children", []), list), f"{where}: children is a list"
        for child in n.get("children", []):
            node(child, {"leader", "worker"})

    node(doc["agents"]["root"], {"root"})


# --- Swarm ---------------------------------------------------------------------------


def _bundle() -> Path:
    return FIXTURES / "swarm"


def test_swarm_fixture_flows_have_the_required_files_and_package_fields() -> None:
    flows = [_bundle(), *sorted(p for p in (_bundle() / "flows").iterdir() if p.is_dir())]
    for flow in flows:
        assert {p.name for p in flow.iterdir()} >= FLOW_REQUIRED_FILES, flow
        package = yaml.safe_load((flow / "package.yaml").read_text())
        assert set(package) <= PACKAGE_FIELDS, flow
        for entry in package.get("flows") or []:
            assert (flow / "flows" / entry["flow"] / "package.yaml").is_file(), entry


def test_swarm_fixture_agents_follow_the_agent_contract() -> None:
    for path in sorted(_bundle().rglob("agents.yaml")):
        for name, agent in (yaml.safe_load(path.read_text()) or {}).items():
            where = f"{path.relative_to(FIXTURES)}: {name}"
            assert set(agent) >= SWARM_AGENT_REQUIRED, f"{where}: intent and model required"
            assert set(agent) <= SWARM_AGENT_FIELDS, f"{where}: {set(agent) - SWARM_AGENT_FIELDS}"
            intent = agent["intent"]
            if isinstance(intent, str):  # a local path, never inline prose
                assert (path.parent / intent).is_file(), where
                assert not intent.startswith("/") and ".." not in intent, where
            else:
                assert set(intent) == {"inline"} and intent["inline"].strip(), where
            assert isinstance(agent["model"], str) and agent["model"], where
            for retired in ("prompt_ref", "prompt_inputs", "tools_tier2", "subscribes_to",
                            "model_tier", "mode", "session_scope"):  # fmt: skip
                assert retired not in agent, f"{where}: {retired} is retired upstream"
            assert set(agent.get("native_tools") or {}) <= {"bash", "web_search", "file_io"}


def test_swarm_fixture_tools_follow_the_tool_schema() -> None:
    for path in sorted(_bundle().rglob("tools.yaml")):
        for name, tool in (yaml.safe_load(path.read_text()) or {}).items():
            where = f"{path.relative_to(FIXTURES)}: {name}"
            assert "description" in tool and set(tool) <= SWARM_TOOL_FIELDS, where
            assert tool.get("handler_type", "http") in HANDLER_TYPES, where
            if tool.get("handler_type", "http") != "http":
                continue
            _keys(tool["http"], *HTTP_BLOCK, where)
            assert tool["http"]["method"] in HTTP_METHODS, where
            declared = set(tool.get("credentials") or [])
            texts = [tool["http"]["url"], *(tool["http"].get("headers") or {}).values(),
                     *(tool["http"].get("body") or {}).values()]  # fmt: skip
            for text in texts:
                for var in TEMPLATE.findall(str(text)):
                    scope, _, key = var.partition(".")
                    assert scope in {"input", "credentials"}, f"{where}: {var}"
                    if scope == "credentials":
                        assert key in declared, f"{where}: {key} not in credentials"
            for value in (tool.get("response_mapping") or {}).values():
                assert TEMPLATE.fullmatch(value) and value.startswith("{{response."), where
            kind = (tool.get("response_success") or {}).get("kind", "http_status_2xx")
            assert kind in {"http_status_2xx", "json_field_equals"}, where


def test_swarm_fixture_policy_follows_the_registration_format() -> None:
    for path in sorted(_bundle().rglob("policy.yaml")):
        policy = yaml.safe_load(path.read_text()) or {}
        for sid, server in (policy.get("mcp_servers") or {}).items():
            assert set(server) <= SWARM_MCP_FIELDS and "prefix" in server, sid
            assert server["transport"] in {"http", "stdio"}, sid
        for bundle in (policy.get("permission_bundles") or {}).values():
            assert set(bundle["permissions"]) <= PLATFORM_PERMISSIONS


# --- Agent Skills --------------------------------------------------------------------


def test_agent_skills_fixtures_follow_the_specification() -> None:
    skills = sorted((FIXTURES / "vectorstep" / "skills").glob("*/SKILL.md"))
    assert len(skills) >= 2
    for path in skills:
        text = path.read_text()
        assert text.startswith("---\n"), path
        front = yaml.safe_load(text.split("---\n", 2)[1])
        assert {"name", "description"} <= set(front) <= SKILL_MD_FIELDS, path
        name = front["name"]
        assert len(name) <= 64 and SKILL_NAME.match(name) and name == path.parent.name, path
        assert 1 <= len(front["description"]) <= 1024, path
        assert 1 <= len(front.get("compatibility", "x")) <= 500, path
        meta = front.get("metadata") or {}
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()), path
        assert isinstance(front.get("allowed-tools", ""), str), path
