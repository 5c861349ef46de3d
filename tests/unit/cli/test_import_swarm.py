"""``import`` of Swarm bundles: one test per row of the Swarm table in docs/how-to/import.md."""

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
AGENT = "{name}:\n  intent: {{inline: You help.}}\n  model: openai/gpt-4.1\n{extra}"
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


def test_json_schemas_are_kept_and_retired_fields_are_refused_as_swarm_does(
    tmp_path: Path,
) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": """t:
  description: d
  input_schema: {type: object, properties: {q: {type: string}}, required: [q]}
  output_schema: {ok: boolean}
  http: {url: "https://x"}
old:
  description: d
  parameters: {type: object}
  returns: {type: object}
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
    assert r.errors == [
        "tools.yaml:8: old.parameters: retired upstream (Swarm refuses it): use input_schema",
        "tools.yaml:9: old.returns: retired upstream (Swarm refuses it): use output_schema",
    ]


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


def test_tool_templates_translate_to_the_runner_http_executor(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": """refund:
  description: Refund an order.
  effect_class: non_idempotent_write
  input_schema:
    type: object
    properties: {order_id: {type: string}, reason: {type: string}}
  http:
    method: post
    url: "https://billing/orders/{{input.order_id}}/refund"
    headers: {Authorization: "Token {{credentials.billing_key}}", Accept: application/json}
    body: {reason: "{{input.reason}}"}
    timeout_seconds: 5
  response_mapping: {id: "{{response.body.refunds[0].id}}", all: "{{response.body}}"}
  response_success: {kind: http_status_2xx}
  credentials: [billing_key]
"""
        },
    )
    assert not r.findings
    (tool,) = r.workspace()["tools"]  # type: ignore[misc]
    assert tool["http"] == {
        "method": "POST",
        "url": "https://billing/orders/{order_id}/refund",
        "headers": {"Accept": "application/json"},
        "timeoutSeconds": 5,
    }
    assert tool["credentials"] == {
        "secretKeyRef": {"name": "default-credentials", "key": "billing_key"},
        "header": "Authorization",
        "prefix": "Token ",
    }
    assert tool["responseMapping"] == {"id": "refunds.0.id", "all": ""}
    assert tool["effects"] == "write"
    assert r.secret is not None and r.secret["stringData"] == {"billing_key": ""}


def test_templates_the_runner_cannot_reproduce_are_refused_with_the_reason(
    tmp_path: Path,
) -> None:
    base = "  description: d\n  handler_type: http\n"
    tools = {
        "by_url": base + "  http: {method: GET, url: '{{input.url}}'}\n",
        "policy_var": base + "  http: {method: GET, url: '{{kb_url}}/search'}\n",
        "input_header": base + "  http: {url: 'https://x', headers: {X-User: '{{input.user}}'}}\n",
        "reshaped_body": base + "  input_schema: {type: object, properties: {q: {type: string}}}\n"
        "  http: {url: 'https://x', body: {query: '{{input.q}}'}}\n",
        "status": base + "  http: {url: 'https://x'}\n"
        "  response_mapping: {code: '{{response.status}}'}\n",
        "json_ok": base + "  http: {url: 'https://x'}\n"
        "  response_success: {kind: json_field_equals, path: response.body.ok, equals: true}\n",
    }
    r = import_tree(tmp_path, {"tools.yaml": "".join(f"{k}:\n{v}" for k, v in tools.items())})
    assert ("Workspace", "default") not in r.objects
    reasons = {e.split(": ", 2)[1]: e.split("not imported: ", 1)[1] for e in r.errors}
    assert set(reasons) == {f"{name}.http" for name in tools}
    assert reasons["by_url.http"].startswith("a URL chosen entirely at call time")
    assert "policy variables are not imported" in reasons["policy_var.http"]
    assert reasons["input_header.http"].startswith("header X-User: only a literal")
    assert reasons["reshaped_body.http"].startswith("body field 'query': the runner sends")
    assert reasons["status.http"].startswith("response_mapping code: only {{response.body...}}")
    assert reasons["json_ok.http"].startswith("response_success other than http_status_2xx")


def test_a_tool_permission_that_is_not_a_tier_is_required_of_the_agents(
    tmp_path: Path,
) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": "refund:\n  description: d\n  permission: approve_spend\n"
            "  http: {url: 'https://x'}\nlookup:\n  description: d\n  permission: readonly\n"
            "  http: {url: 'https://y'}\n",
            "policy.yaml": "permission_bundles:\n  boss: {permissions: [approve_spend]}\n",
            "agents.yaml": AGENT.format(
                name="lead", extra="  permissions_bundle: boss\n  tools: [refund, lookup]\n"
            )
            + AGENT.format(name="clerk", extra="  tools: [refund, lookup]\n"),
        },
    )
    tools = {t["name"]: t for t in r.workspace()["tools"]}  # type: ignore[union-attr]
    assert tools["lookup"]["permission"] == "readonly"
    assert "permission" not in tools["refund"]  # not a tier: the default tier applies
    assert r.spec("Agent", "lead")["tools"] == ["refund", "lookup"]
    assert r.spec("Agent", "clerk")["tools"] == ["lookup"]
    (w,) = [w for w in r.warnings if "requires permission" in w]
    assert w == (
        "agents.yaml:6: clerk.tools: tool 'refund' requires permission 'approve_spend', which "
        "agent 'clerk' does not hold: not granted (Swarm refuses the call)"
    )


def test_retired_handler_types_are_errors(tmp_path: Path) -> None:
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
    assert "tools" not in r.objects.get(("Workspace", "default"), {}).get("spec", {})  # type: ignore[attr-defined]
    assert [e.split(": ")[1] for e in r.errors] == ["old.handler_type", "wf.handler_type"]
    assert "retired upstream" in r.errors[0]


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


def test_an_agent_maps_intent_model_bundle_permissions_tools_native_tools_flow_data(
    tmp_path: Path,
) -> None:
    r = import_tree(
        tmp_path,
        {
            "policy.yaml": POLICY,
            "tools.yaml": KB_TOOL,
            "prompts/analysis.md": "You analyse.\n\nExactly these bytes.\n",
            "agents.yaml": """
analysis-agent:
  type: generic
  role: analyst
  intent: prompts/analysis.md
  model: regular
  permissions_bundle: worker        # the named set from policy.yaml
  permissions: [schedule]           # optional, added on top of the bundle
  tools: [knowledge_base_search, pg.list_tables]
  native_tools: {bash: true, web_search: false, file_io: true}
  flow_data_access: [exclusions.yaml]
  max_turns_per_task: 30
""",
        },
        model_aliases={"regular": "openai/gpt-4.1"},
    )
    assert r.warnings == []
    assert r.spec("Agent", "analysis-agent") == {
        "workspaceRef": {"name": "default"},
        "systemPrompt": "You analyse.\n\nExactly these bytes.\n",
        "model": {"provider": "openai", "name": "gpt-4.1"},
        "tools": ["knowledge_base_search", "pg.list_tables"],
        "permissions": ["schedule"],
        "flowDataAccess": ["exclusions.yaml"],
        "permissionsBundle": "worker",
        "maxSteps": 30,
        "nativeTools": {"bash": True, "webSearch": False, "fileIo": True},
    }
    ann = r.objects[("Agent", "analysis-agent")]["metadata"]["annotations"]  # type: ignore[index]
    assert ann["swarm.dev/role"] == "analyst"  # type: ignore[index]
    assert not any("prompts/analysis.md" in n for n in r.notes)  # read, not passed over


def test_inline_intent_and_the_intent_forms_swarm_rejects(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "agents.yaml": "a:\n  intent: {inline: Be brief.}\n  model: openai/gpt-4.1\n"
            "b:\n  intent: {import: support-drafter@1}\n  model: cheap\n"
            "c:\n  model: cheap\n"
            "d:\n  intent: ../outside.md\n  model: cheap\n"
            "e:\n  intent: missing.md\n  model: cheap\n"
        },
    )
    assert r.spec("Agent", "a")["systemPrompt"] == "Be brief."
    assert [e.split(": ", 2)[1] for e in r.errors] == [
        "b.intent",
        "c",
        "d.intent",
        "e.intent",
    ]
    assert "rejected by Swarm itself" in r.errors[0]
    assert "intent is required" in r.errors[1]


def test_model_aliases_are_resolved_or_reported(tmp_path: Path) -> None:
    agents = "".join(
        AGENT.format(name=n, extra="").replace("model: openai/gpt-4.1", f"model: {m}")
        for n, m in (("a", "cheap"), ("b", "house-model"), ("c", "openrouter/qwen/qwen3"))
    )
    r = import_tree(tmp_path, {"agents.yaml": agents})
    assert r.spec("Agent", "a")["model"] == {"provider": "anthropic", "name": "claude-3-5-haiku"}
    assert r.spec("Agent", "b")["model"] == {"name": "house-model"}
    assert r.spec("Agent", "c")["model"] == {"provider": "openrouter", "name": "qwen/qwen3"}
    alias, unknown = r.warnings[:2]
    assert "alias 'cheap' resolved to upstream's built-in Anthropic default" in alias
    assert "--model-alias cheap=PROVIDER/MODEL" in alias
    assert "'house-model' is not a built-in alias" in unknown
    providers = [p["name"] for p in r.workspace()["modelProviders"]]  # type: ignore[union-attr]
    assert providers == ["anthropic", "openrouter"]


def test_event_routing_fields_are_named_once_per_agent(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "agents.yaml": AGENT.format(
                name="a",
                extra="  subscriptions: [x.y]\n  emit_events: [x.z]\n"
                "  manager_fallback: boss\n  memory: true\n",
            )
        },
    )
    assert [w.split(": ", 2)[1] for w in r.warnings] == ["a.memory", "a.subscriptions"]
    assert "subscriptions, emit_events, manager_fallback: event routing" in r.warnings[1]


def test_child_flows_override_root_tools_for_their_own_agents(tmp_path: Path) -> None:
    kb = "kb:\n  description: {d}\n  http: {{url: 'https://{host}'}}\n"
    r = import_tree(
        tmp_path,
        {
            "package.yaml": "name: support_desk\nversion: '1.0.0'\nflows: [{id: esc, flow: esc}]\n"
            "connect: [{from: a.x, to: esc.x}]\n",
            "tools.yaml": kb.format(d="Root KB.", host="kb"),
            "agents.yaml": AGENT.format(name="root-agent", extra="  tools: [kb]\n"),
            "flows/esc/tools.yaml": kb.format(d="Escalation KB.", host="esc"),
            "flows/esc/agents.yaml": AGENT.format(name="esc-agent", extra="  tools: [kb]\n"),
            "flows/same/tools.yaml": kb.format(d="Root KB.", host="kb"),
            "runtime/agents.yaml": AGENT.format(name="root-agent", extra=""),
        },
    )
    assert not r.errors
    ws = r.workspace("support-desk")
    assert [(t["name"], t["http"]["url"]) for t in ws["tools"]] == [  # type: ignore[union-attr]
        ("kb", "https://kb"),
        ("esc_kb", "https://esc"),
    ]
    assert r.spec("Agent", "root-agent")["tools"] == ["kb"]
    assert r.spec("Agent", "esc-agent")["tools"] == ["esc_kb"]
    assert any("runtime/: Swarm's generated merged copy" in n for n in r.notes)
    assert [w.split(": not supported")[0] for w in r.warnings] == ["package.yaml:4: connect"]


def test_flow_state_machine_files_are_reported_once_per_kind(tmp_path: Path) -> None:
    schema = "initial_state: a\nterminal_states: [b]\nstates: [a, b]\n"
    r = import_tree(
        tmp_path,
        {
            "schema.yaml": schema,
            "flows/x/schema.yaml": schema,
            "flows/x/nodes.yaml": "n: {event_handlers: {}}\n",
            "agents.yaml": AGENT.format(name="a", extra=""),
        },
    )
    flows = [w for w in r.warnings if "Swarm " in w]
    assert flows == [
        "flows/x/nodes.yaml: Swarm nodes.yaml (system nodes and their event handlers): 1 "
        "file(s) not imported: swarmkit.dev runs agent trees, not event-driven flows; drive "
        "the agents from a Topology or start Runs from your events",
        "schema.yaml: Swarm schema.yaml (a flow's pins and state machine): 2 file(s) not "
        "imported: swarmkit.dev runs agent trees, not event-driven flows; drive the agents "
        "from a Topology or start Runs from your events",
    ]


def test_an_unknown_permission_bundle_is_an_error(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "policy.yaml": POLICY,
            "agents.yaml": AGENT.format(name="a1", extra="  permissions_bundle: boss\n"),
        },
    )
    assert r.errors == [
        "agents.yaml:4: a1.permissions_bundle: permission bundle 'boss' is not defined in any "
        "policy.yaml (known: coordinator, worker)"
    ]


def test_model_alias_is_a_cli_option() -> None:
    import yaml

    from .support import FIXTURES, run_cli

    res = run_cli(
        "import",
        str(FIXTURES / "swarm"),
        "--model-alias",
        "regular=openrouter/qwen/qwen3-235b",
        "--model-alias=cheap=openai/gpt-4.1-mini",
    )
    assert res.code == 0, res.err
    agents = {
        d["metadata"]["name"]: d["spec"]["model"]
        for d in yaml.safe_load_all(res.out)
        if d["kind"] == "Agent"
    }
    assert agents["triage-agent"] == {"provider": "openrouter", "name": "qwen/qwen3-235b"}
    assert agents["analysis-agent"] == {"provider": "openai", "name": "gpt-4.1-mini"}
    assert "alias 'regular'" not in res.err and "alias 'frontier'" in res.err
    assert run_cli("import", str(FIXTURES / "swarm"), "--model-alias", "regular").code == 2


def test_an_agent_without_a_model_runs_on_the_workspace_default_named_in_a_warning(
    tmp_path: Path,
) -> None:
    # Upstream's runtime test bundles name no model: the agent is kept, never refused.
    agents = "bare:\n  intent: {inline: You help.}\n" + AGENT.format(name="named", extra="")
    r = import_tree(tmp_path, {"agents.yaml": agents})
    assert not r.errors
    assert "model" not in r.spec("Agent", "bare")
    assert r.spec("Agent", "named")["model"] == {"provider": "openai", "name": "gpt-4.1"}
    providers = r.workspace()["modelProviders"]  # type: ignore[index]
    # openai is the first provider (from the named agent); it declares no defaultModel
    assert [p["name"] for p in providers] == ["openai"]  # type: ignore[union-attr, index]
    assert [w for w in r.warnings if "bare" in w] == [
        "agents.yaml:1: bare.model: no model: imported with the Workspace's default model, "
        "but provider 'openai' names no defaultModel; set one or its Runs fail"
    ]


def test_without_any_provider_the_default_is_upstreams_regular_model(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"agents.yaml": "bare:\n  intent: {inline: You help.}\n"})
    assert not r.errors
    assert "model" not in r.spec("Agent", "bare")
    (provider,) = r.workspace()["modelProviders"]  # type: ignore[misc]
    assert provider["name"] == "anthropic"
    assert provider["defaultModel"] == "claude-3-5-sonnet"
    assert (
        "agents.yaml:1: bare.model: no model: imported with the Workspace's default model, "
        "anthropic/claude-3-5-sonnet (its first provider's defaultModel); name one with "
        "model: ALIAS"
    ) in r.warnings


def test_a_model_alias_that_does_not_resolve_keeps_its_error(tmp_path: Path) -> None:
    agents = AGENT.format(name="a", extra="").replace("model: openai/gpt-4.1", "model: [x]")
    r = import_tree(tmp_path, {"agents.yaml": agents})
    assert r.errors == ["agents.yaml:3: a.model: expected a model alias, got ['x']"]
    assert not [w for w in r.warnings if "no model:" in w]
