"""``import`` of Swarm bundles: one test per row of the README's Swarm table."""

from __future__ import annotations

from pathlib import Path

from .support import import_tree

KB_TOOL = """knowledge_base_search:
  description: Search the support knowledge base.
  handler_type: http
  input_schema:
    query: text
    max_results: integer
  http:
    method: POST
    url: "https://kb.internal/search"
"""
POLICY = """mcp_servers:
  postgres:
    transport: http
    url: "https://mcp.internal/pg"
    prefix: pg
    credentials_key: pg_token

permission_bundles:
  coordinator:
    description: Top-level flow coordinator
    permissions: [configure_routing, message_flow, mailbox_send, human_task_request, schedule]
  worker:
    description: Does the work, talks to its manager
    permissions: [message_flow, mailbox_send]
"""


def test_a_tool_becomes_a_workspace_tool_named_by_its_key(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"tools.yaml": KB_TOOL})
    assert not r.findings
    (tool,) = r.workspace()["tools"]  # type: ignore[misc]
    assert tool["name"] == "knowledge_base_search"
    assert tool["description"] == "Search the support knowledge base."
    assert tool["handlerType"] == "http"


def test_shorthand_input_schema_becomes_json_schema(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"tools.yaml": KB_TOOL})
    (tool,) = r.workspace()["tools"]  # type: ignore[misc]
    assert tool["inputSchema"] == {
        "type": "object",
        "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
    }


def test_parameters_and_returns_are_aliases_and_json_schema_is_kept(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": """t:
  description: d
  parameters: {type: object, properties: {q: {type: string}}, required: [q]}
  returns: {ok: boolean}
  http: {url: "https://x"}
"""
        },
    )
    (tool,) = r.workspace()["tools"]  # type: ignore[misc]
    assert tool["inputSchema"] == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }
    assert tool["outputSchema"] == {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def test_http_block_maps_with_the_method_upper_cased(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": """t:
  description: d
  http:
    {method: get, url: "https://x/{id}", headers: {Accept: application/json}, timeout_seconds: 5}
"""
        },
    )
    (tool,) = r.workspace()["tools"]  # type: ignore[misc]
    assert tool["http"] == {
        "method": "GET",
        "url": "https://x/{id}",
        "headers": {"Accept": "application/json"},
        "timeoutSeconds": 5,
    }


def test_response_mapping_permission_effects(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": """t:
  description: d
  http: {url: "https://x"}
  response_mapping: {title: data.title}
  permission: readonly
  effects: read
"""
        },
    )
    (tool,) = r.workspace()["tools"]  # type: ignore[misc]
    assert (tool["responseMapping"], tool["permission"], tool["effects"]) == (
        {"title": "data.title"},
        "readonly",
        "read",
    )


def test_tool_credentials_reference_the_generated_secret(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": """t:
  description: d
  http: {url: "https://x"}
  credentials: {key: kb_token, header: X-Api-Key, prefix: ""}
"""
        },
    )
    (tool,) = r.workspace()["tools"]  # type: ignore[misc]
    assert tool["credentials"] == {
        "header": "X-Api-Key",
        "prefix": "",
        "secretKeyRef": {"name": "default-credentials", "key": "kb_token"},
    }
    assert r.secret is not None and r.secret["stringData"] == {"kb_token": ""}


def test_api_call_is_http_and_workflow_registered_is_not_imported(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": """old:
  description: d
  handler_type: api_call
  http: {url: "https://x"}
wf:
  description: d
  handler_type: workflow_registered
"""
        },
    )
    (tool,) = r.workspace()["tools"]  # type: ignore[misc]
    assert tool["name"] == "old" and tool["handlerType"] == "http"
    assert r.warnings == [
        "tools.yaml:3: old.handler_type: api_call is the old name of http; imported as http",
        "tools.yaml:7: wf.handler_type: workflow_registered tools are not supported; tool not "
        "imported",
    ]


def test_endpoint_and_type_are_errors_naming_the_replacement(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {"tools.yaml": "t:\n  description: d\n  endpoint: https://x\n  type: http\n"},
    )
    assert r.errors == [
        "tools.yaml:3: t.endpoint: tool 't': endpoint is not accepted: use http.url "
        "(API field endpoint)"
    ]
    assert not r.objects
    r = import_tree(
        tmp_path / "b",
        {"tools.yaml": "t:\n  description: d\n  type: http\n  http: {url: 'https://x'}\n"},
    )
    assert r.errors == [
        "tools.yaml:3: t.type: tool 't': type is not accepted: use handlerType (API field type)"
    ]


def test_policy_mcp_server_keeps_its_prefix_and_credentials_key_is_a_bearer_header(
    tmp_path: Path,
) -> None:
    r = import_tree(tmp_path, {"policy.yaml": POLICY})
    assert not r.findings
    (server,) = r.workspace()["mcpServers"]  # type: ignore[misc]
    assert server == {
        "id": "postgres",
        "transport": "http",
        "url": "https://mcp.internal/pg",
        "prefix": "pg",
        "headers": [
            {
                "name": "Authorization",
                "prefix": "Bearer ",
                "secretKeyRef": {"name": "default-credentials", "key": "pg_token"},
            }
        ],
    }


def test_policy_server_id_with_underscores_becomes_kebab_keeping_the_prefix(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "policy.yaml": """mcp_servers:
  code_graph: {command: [code-graph-mcp], credentials_key: graph_token}
"""
        },
    )
    (server,) = r.workspace()["mcpServers"]  # type: ignore[misc]
    assert (server["id"], server["prefix"], server["transport"]) == (
        "code-graph",
        "code_graph",
        "stdio",
    )
    assert server["env"] == [
        {
            "name": "GRAPH_TOKEN",
            "secretKeyRef": {"name": "default-credentials", "key": "graph_token"},
        }
    ]


def test_permission_bundles_map_to_workspace_bundles(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"policy.yaml": POLICY})
    assert r.workspace()["permissionBundles"] == [
        {
            "name": "coordinator",
            "description": "Top-level flow coordinator",
            "permissions": [
                "configure_routing",
                "message_flow",
                "mailbox_send",
                "human_task_request",
                "schedule",
            ],
        },
        {
            "name": "worker",
            "description": "Does the work, talks to its manager",
            "permissions": ["message_flow", "mailbox_send"],
        },
    ]


def test_an_agent_maps_bundle_permissions_tools_native_tools_flow_data(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "policy.yaml": POLICY,
            "tools.yaml": KB_TOOL,
            "agents.yaml": """
analysis-agent:
  permissions_bundle: worker        # the named set from policy.yaml
  permissions: [schedule]           # optional, added on top of the bundle
  tools: [knowledge_base_search, pg.list_tables]
  native_tools: {bash: true, web_search: false, file_io: true}
  flow_data_access: [exclusions.yaml]
  model: openai/gpt-4o
  soul: You analyse.
  skills: []
""",
        },
    )
    assert [w for w in r.warnings] == []
    assert r.spec("Agent", "analysis-agent") == {
        "workspaceRef": {"name": "default"},
        "skills": [],
        "model": {"provider": "openai", "name": "gpt-4o"},
        "systemPrompt": "You analyse.",
        "tools": ["knowledge_base_search", "pg.list_tables"],
        "permissions": ["schedule"],
        "flowDataAccess": ["exclusions.yaml"],
        "permissionsBundle": "worker",
        "nativeTools": {"bash": True, "webSearch": False, "fileIo": True},
    }


def test_an_unknown_permission_bundle_is_an_error(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path, {"policy.yaml": POLICY, "agents.yaml": "a1:\n  permissions_bundle: boss\n"}
    )
    assert r.errors == [
        "agents.yaml:2: a1.permissions_bundle: permission bundle 'boss' is not defined in any "
        "policy.yaml (known: coordinator, worker)"
    ]
