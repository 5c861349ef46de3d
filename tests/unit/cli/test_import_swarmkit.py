"""``import`` of SwarmKit workspaces: one test per row of the README's SwarmKit table."""

from __future__ import annotations

from pathlib import Path

from swarmkit_api import validate_manifest

from .support import FIXTURES, import_tree

SKILL_HEAD = """apiVersion: swarmkit/v1
kind: Skill
metadata:
  id: s1
  name: Skill One
  description: Use when testing.
category: capability
provenance: {authored_by: human, version: 1.0.0}
"""
ARCHETYPE = """apiVersion: swarmkit/v1
kind: Archetype
metadata: {id: researcher, name: Researcher, description: Finds things.}
model: anthropic/claude-sonnet-4-6
prompt: You research.
defaults:
  skills: [s1]
"""


def test_mcp_servers_list_maps_to_workspace_mcp_servers(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": """
mcp_servers:
  - id: gh
    transport: stdio
    command: npx
    args: [-y, "@modelcontextprotocol/server-github"]
    permission: readonly
    timeout_seconds: 20
    retries: 2
    prefix: github
"""
        },
    )
    assert not r.findings
    (server,) = r.workspace()["mcpServers"]  # type: ignore[misc]
    assert server == {
        "id": "gh",
        "transport": "stdio",
        "command": ["npx", "-y", "@modelcontextprotocol/server-github"],
        "prefix": "github",
        "permission": "readonly",
        "timeoutSeconds": 20,
        "retries": 2,
    }


def test_mcp_servers_mapping_by_id_is_accepted_too(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"workspace.yaml": "mcp_servers:\n  kb: {url: 'https://kb/mcp'}\n"})
    assert not r.findings
    assert r.workspace()["mcpServers"] == [
        {"id": "kb", "transport": "http", "url": "https://kb/mcp"}
    ]


def test_env_var_reference_becomes_a_secret_key_ref_and_a_template_key(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": """
mcp_servers:
  - id: brave-search
    transport: stdio
    command: ["npx", "-y", "@anthropic/brave-search-mcp"]
    env:
      BRAVE_API_KEY: "${BRAVE_API_KEY}"
      LOG_LEVEL: info
"""
        },
    )
    assert not r.findings
    (server,) = r.workspace()["mcpServers"]  # type: ignore[misc]
    assert server["env"] == [
        {
            "name": "BRAVE_API_KEY",
            "secretKeyRef": {"name": "default-credentials", "key": "BRAVE_API_KEY"},
        },
        {"name": "LOG_LEVEL", "value": "info"},
    ]
    assert r.secret is not None
    assert r.secret["stringData"] == {"BRAVE_API_KEY": ""}
    assert r.secret["metadata"] == {"name": "default-credentials"}


def test_http_header_with_a_variable_becomes_a_header_from_secret(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": """
mcp_servers:
  - id: kb
    transport: http
    url: https://kb/mcp
    headers: {Authorization: "Bearer ${KB_TOKEN}"}
"""
        },
    )
    assert not r.findings
    (server,) = r.workspace()["mcpServers"]  # type: ignore[misc]
    assert server["headers"] == [
        {
            "name": "Authorization",
            "secretKeyRef": {"name": "default-credentials", "key": "KB_TOKEN"},
            "prefix": "Bearer ",
        }
    ]


def test_sse_transport_imports_as_http_with_a_warning(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {"workspace.yaml": "mcp_servers:\n  - {id: kb, transport: sse, url: 'https://kb'}\n"},
    )
    assert r.workspace()["mcpServers"][0]["transport"] == "http"  # type: ignore[index]
    assert r.warnings == [
        "workspace.yaml:2: mcp_servers[0].transport: 'sse' imported as 'http' (streamable HTTP)"
    ]


def test_credentials_map_to_secret_backed_workspace_credentials(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": """
credentials:
  - id: research-agent
    value: "${RESEARCH_TOKEN}"
"""
        },
    )
    assert not r.findings
    assert r.workspace()["credentials"] == [
        {
            "name": "research-agent",
            "secretKeyRef": {"name": "default-credentials", "key": "RESEARCH_TOKEN"},
        }
    ]


def test_a_literal_credential_is_an_error(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"workspace.yaml": "credentials:\n  research-agent: hunter2\n"})
    assert r.errors == [
        "workspace.yaml:2: credentials.research-agent: a credential must be ${VAR} (a Secret "
        "reference), never a literal"
    ]
    assert "hunter2" not in "".join(r.errors)


def test_workspace_description_maps_to_spec_description(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path, {"workspace.yaml": "description: Support team agents.\nmcp_servers: []\n"}
    )
    assert r.workspace()["description"] == "Support team agents."


def test_skill_metadata_maps_to_name_display_name_and_description(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/s1.yaml": SKILL_HEAD})
    assert not r.findings
    skill = r.objects[("Skill", "s1")]
    assert skill["metadata"]["name"] == "s1"  # type: ignore[index]
    assert r.spec("Skill", "s1")["displayName"] == "Skill One"
    assert r.spec("Skill", "s1")["description"] == "Use when testing."
    validate_manifest(skill)


def test_skill_category_inputs_outputs_are_kept_as_json_schema(tmp_path: Path) -> None:
    body = (
        SKILL_HEAD.replace("category: capability", "category: decision")
        + """
inputs: {type: object, properties: {diff_text: {type: string}}}
outputs:
  type: object
  properties: {verdict: {type: string}, reasoning: {type: string}, max_items: {type: integer}}
  required: [verdict, reasoning]
implementation: {type: llm_prompt, prompt: Judge it.}
"""
    )
    r = import_tree(tmp_path, {"skills/s1.yaml": body})
    assert not r.findings
    spec = r.spec("Skill", "s1")
    assert spec["category"] == "decision"
    # property names inside a JSON Schema are data, not fields: never camelCased
    assert spec["inputs"] == {"type": "object", "properties": {"diff_text": {"type": "string"}}}
    assert set(spec["outputs"]["properties"]) == {"verdict", "reasoning", "max_items"}  # type: ignore[index]


def test_implementation_fields_are_camel_cased(tmp_path: Path) -> None:
    body = (
        SKILL_HEAD.replace("category: capability", "category: coordination")
        + """
implementation:
  type: agent
  card_url: https://research.internal/.well-known/agent-card.json
  skill_id: deep-research
  credentials_ref: research-agent
  timeout_s: 600
  on_unanswerable: relay
  max_agent_answers: 2
  permission: cautious
  effects: read
"""
    )
    r = import_tree(tmp_path, {"skills/s1.yaml": body})
    assert r.spec("Skill", "s1")["implementation"] == {
        "type": "agent",
        "cardUrl": "https://research.internal/.well-known/agent-card.json",
        "skillId": "deep-research",
        "credentialsRef": "research-agent",
        "timeoutS": 600,
        "onUnanswerable": "relay",
        "maxAgentAnswers": 2,
        "permission": "cautious",
        "effects": "read",
    }


def test_constraints_are_camel_cased(tmp_path: Path) -> None:
    body = (
        SKILL_HEAD
        + """
constraints:
  max_latency_ms: 500
  timeout_seconds: 30
  retry: {attempts: 2, backoff: linear}
  on_failure: escalate_to_human
  output_retries: 1
"""
    )
    r = import_tree(tmp_path, {"skills/s1.yaml": body})
    assert not r.findings
    assert r.spec("Skill", "s1")["constraints"] == {
        "maxLatencyMs": 500,
        "timeoutSeconds": 30,
        "onFailure": "escalate_to_human",
        "outputRetries": 1,
        "retry": {"attempts": 2, "backoff": "linear"},
    }


def test_iam_required_scopes(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path, {"skills/s1.yaml": SKILL_HEAD + "iam:\n  required_scopes: [repo:read]\n"}
    )
    assert r.spec("Skill", "s1")["iam"] == {"requiredScopes": ["repo:read"]}


def test_provenance_is_camel_cased_and_swarm_authored_warns(tmp_path: Path) -> None:
    body = SKILL_HEAD.replace("authored_by: human", "authored_by: authored_by_swarm")
    r = import_tree(tmp_path, {"skills/s1.yaml": body})
    assert r.spec("Skill", "s1")["provenance"] == {
        "authoredBy": "authored_by_swarm",
        "version": "1.0.0",
    }
    (warning,) = r.warnings
    assert warning == (
        "skills/s1.yaml:8: provenance.authored_by: authored_by_swarm: the skill is locked "
        "until a reviewer approves its Review skill-<name>-<hash8> (kubectl swarmkit review "
        "approve)"
    )


def test_audit_policy_is_camel_cased(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {"skills/s1.yaml": SKILL_HEAD + "audit: {log_inputs: false, redact: [input.password]}\n"},
    )
    assert r.spec("Skill", "s1")["audit"] == {"logInputs": False, "redact": ["input.password"]}


def test_archetype_becomes_an_agent_with_its_defaults_as_grants(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path, {"skills/s1.yaml": SKILL_HEAD, "archetypes/researcher.yaml": ARCHETYPE}
    )
    assert not r.findings
    agent = r.objects[("Agent", "researcher")]
    assert agent["metadata"]["annotations"]["swarmkit.dev/display-name"] == "Researcher"  # type: ignore[index]
    assert r.spec("Agent", "researcher") == {
        "workspaceRef": {"name": "default"},
        "description": "Finds things.",
        "model": {"provider": "anthropic", "name": "claude-sonnet-4-6"},
        "systemPrompt": "You research.",
        "skills": ["s1"],
    }


def test_a_model_of_a_known_provider_adds_a_workspace_model_provider(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path, {"skills/s1.yaml": SKILL_HEAD, "archetypes/researcher.yaml": ARCHETYPE}
    )
    assert r.workspace()["modelProviders"] == [
        {
            "name": "anthropic",
            "type": "anthropic",
            "apiKey": {"name": "default-credentials", "key": "ANTHROPIC_API_KEY"},
        }
    ]
    assert r.secret is not None and "ANTHROPIC_API_KEY" in r.secret["stringData"]  # type: ignore[operator]


def test_topology_nodes_become_a_tree_with_roles_from_nesting(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL_HEAD,
            "archetypes/researcher.yaml": ARCHETYPE,
            "topologies/t.yaml": """apiVersion: swarmkit/v1
kind: Topology
metadata: {id: t, description: Research.}
agents:
  root:
    archetype: researcher
    children:
      lead:
        archetype: researcher
        children:
          helper: {archetype: researcher}
      solo: {archetype: researcher}
""",
        },
    )
    assert not r.findings
    assert r.spec("Topology", "t")["agents"] == [
        {"name": "root", "agentRef": {"name": "researcher"}, "role": "root"},
        {"name": "lead", "agentRef": {"name": "researcher"}, "role": "leader", "parent": "root"},
        {"name": "helper", "agentRef": {"name": "researcher"}, "role": "worker", "parent": "lead"},
        {"name": "solo", "agentRef": {"name": "researcher"}, "role": "worker", "parent": "root"},
    ]
    assert r.spec("Topology", "t")["workspaceRef"] == {"name": "default"}


def test_a_node_adding_skills_gets_its_own_agent_based_on_the_archetype(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL_HEAD,
            "archetypes/researcher.yaml": ARCHETYPE,
            "topologies/t.yaml": """apiVersion: swarmkit/v1
kind: Topology
metadata: {id: t}
agents:
  root: {archetype: researcher, skills: ["pack:workspace", s1]}
""",
        },
    )
    assert not r.findings
    assert r.spec("Topology", "t")["agents"][0]["agentRef"] == {"name": "t-root"}  # type: ignore[index]
    spec = r.spec("Agent", "t-root")
    assert spec["skills"] == ["s1", "pack:workspace"]
    assert spec["systemPrompt"] == "You research."


def test_topology_schedule_is_camel_cased(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "archetypes/researcher.yaml": ARCHETYPE.replace("[s1]", "[]"),
            "topologies/t.yaml": """apiVersion: swarmkit/v1
kind: Topology
metadata: {id: t}
schedule: {cron: "0 9 * * 1-5", timezone: Europe/Berlin, concurrency_policy: Replace}
agents:
  root: {archetype: researcher}
""",
        },
    )
    assert r.spec("Topology", "t")["schedule"] == {
        "cron": "0 9 * * 1-5",
        "timezone": "Europe/Berlin",
        "concurrencyPolicy": "Replace",
    }


def test_every_object_records_where_it_came_from_and_its_sync_wave(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/s1.yaml": "# comment\n" + SKILL_HEAD})
    ann = r.objects[("Skill", "s1")]["metadata"]["annotations"]  # type: ignore[index]
    assert ann == {
        "swarmkit.dev/imported-from": "skills/s1.yaml:2",
        "argocd.argoproj.io/sync-wave": "1",
    }


def test_the_fixture_tree_imports_without_errors_and_validates() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        r = import_tree(Path(tmp))  # empty: nothing, no findings
        assert not r.objects and not r.findings
    r = import_tree(FIXTURES)
    assert not r.errors
    assert r.warnings == ["README.md: not a source format import reads; skipped"]
    for manifest in r.objects.values():
        validate_manifest(manifest)
