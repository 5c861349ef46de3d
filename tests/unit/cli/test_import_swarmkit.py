"""``import`` of SwarmKit workspaces in upstream's format (workspace, skill, archetype and
topology JSON Schemas): one test per row of the SwarmKit table in docs/how-to/import.md."""

from __future__ import annotations

import tempfile
from pathlib import Path

from swarmkit_api import validate_manifest

from .support import FIXTURES, import_tree

WS = "apiVersion: swarmkit/v1\nkind: Workspace\nmetadata: {id: desk, name: Desk}\n"
SKILL_HEAD = """apiVersion: swarmkit/v1
kind: Skill
metadata:
  id: s1
  name: Skill One
  description: Use when testing.
category: capability
implementation: {type: llm_prompt, prompt: Do it.}
provenance: {authored_by: human, version: 1.0.0}
"""
ARCHETYPE = """apiVersion: swarmkit/v1
kind: Archetype
metadata: {id: researcher, name: Researcher, description: Finds things on the web.}
role: worker
defaults:
  model: {provider: anthropic, name: claude-sonnet-4-6, temperature: 0.3}
  prompt: {system: You research.}
  skills: [s1]
  iam: {base_scope: ["web:read"]}
provenance: {authored_by: human, version: 1.0.0}
"""


def skill(name: str, category: str = "capability", extra: str = "") -> str:
    return SKILL_HEAD.replace("id: s1", f"id: {name}").replace("capability", category) + extra


def topology(agents: str, name: str = "t") -> str:
    return (
        f"apiVersion: swarmkit/v1\nkind: Topology\nmetadata: {{name: {name}, version: 1.0.0}}\n"
        f"agents:\n{agents}"
    )


# --- workspace.yaml --------------------------------------------------------------------


def test_workspace_metadata_names_the_workspace_and_its_secret(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": WS.replace(
                "Desk}",
                "Desk, description: Support agents., annotations: {cost_center: '42', "
                "'bad key!': x}}",
            )
        },
    )
    assert r.warnings == [
        "workspace.yaml:3: metadata.annotations.bad key!: not a valid annotation name; not imported"
    ]
    meta = r.objects[("Workspace", "desk")]["metadata"]
    assert meta["annotations"]["swarmkit.dev/display-name"] == "Desk"  # type: ignore[index]
    assert meta["annotations"]["swarmkit.dev/annotation.cost_center"] == "42"  # type: ignore[index]
    assert r.workspace("desk")["description"] == "Support agents."
    validate_manifest(r.objects[("Workspace", "desk")])


def test_workspace_flag_keeps_the_name_it_gives(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"workspace.yaml": WS}, workspace="team-a", workspace_fixed=True)
    assert ("Workspace", "team-a") in r.objects and ("Workspace", "desk") not in r.objects


def test_every_object_refers_to_the_workspace_named_by_metadata_id(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "archetypes/r.yaml": ARCHETYPE,
            "skills/s1.yaml": SKILL_HEAD,
            "workspace.yaml": WS,
            "topologies/t.yaml": topology(
                "  root: {id: root, role: root, archetype: researcher}\n"
            ),
        },
    )
    assert r.spec("Agent", "researcher")["workspaceRef"] == {"name": "desk"}
    assert r.spec("Topology", "t")["workspaceRef"] == {"name": "desk"}
    provider = r.workspace("desk")["modelProviders"][0]  # type: ignore[index]
    assert provider["apiKey"]["name"] == "desk-credentials"


def test_stdio_and_http_mcp_servers_with_their_credentials(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": WS
            + """credentials:
  github_pat: {source: env, config: {env: GITHUB_TOKEN}}
  rynko_key: {source: env, config: {env: RYNKO_API_KEY}}
mcp_servers:
  - id: github
    transport: stdio
    command: ["mcp-github", "--read-only"]
    credentials_ref: github_pat
    env: {LOG_LEVEL: info}
    permission: readonly
    permission_overrides: {create_issue: strict}
  - id: rynko
    transport: http
    endpoint: https://mcp.rynko.dev
    credentials_ref: rynko_key
"""
        },
    )
    assert not r.findings
    gh, rynko = r.workspace("desk")["mcpServers"]  # type: ignore[misc]
    ref = {"name": "desk-credentials", "key": "GITHUB_TOKEN"}
    assert gh == {
        "id": "github",
        "transport": "stdio",
        "command": ["mcp-github", "--read-only"],
        "env": [
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "GITHUB_TOKEN", "secretKeyRef": ref},
        ],
        "permission": "readonly",
        "toolOverrides": [{"tool": "create_issue", "permission": "strict"}],
    }
    assert rynko == {
        "id": "rynko",
        "transport": "http",
        "url": "https://mcp.rynko.dev",
        "headers": [
            {
                "name": "Authorization",
                "secretKeyRef": {"name": "desk-credentials", "key": "RYNKO_API_KEY"},
                "prefix": "Bearer ",
            }
        ],
    }
    assert r.workspace("desk")["credentials"] == [
        {"name": "github-pat", "secretKeyRef": ref},
        {
            "name": "rynko-key",
            "secretKeyRef": {"name": "desk-credentials", "key": "RYNKO_API_KEY"},
            # the host of the HTTP MCP server that sends it (issue 46 item 7)
            "allowedHosts": ["mcp.rynko.dev"],
        },
    ]


def test_credentials_of_every_source_become_secret_keys_saying_where_the_value_is(
    tmp_path: Path,
) -> None:
    sources = {
        "file": "{path: /run/secrets/a}",
        "hashicorp-vault": "{path: secret/data/a, field: token}",
        "aws-secrets-manager": "{secret_id: prod/a}",
        "gcp-secret-manager": "{name: projects/p/secrets/a}",
        "azure-key-vault": "{vault: v, name: a}",
    }
    creds = "".join(
        f"  c-{i}: {{source: {s}, config: {c}}}\n" for i, (s, c) in enumerate(sources.items())
    )
    creds += "  c-plug: {source: plugin, provider_id: my-vault, config: {ref: a}}\n"
    r = import_tree(tmp_path, {"workspace.yaml": WS + "credentials:\n" + creds})
    assert not r.errors
    names = [c["name"] for c in r.workspace("desk")["credentials"]]  # type: ignore[union-attr]
    assert names == ["c-0", "c-1", "c-2", "c-3", "c-4", "c-plug"]
    assert r.secret is not None
    assert set(r.secret["stringData"]) == {"C_0", "C_1", "C_2", "C_3", "C_4", "C_PLUG"}  # type: ignore[arg-type]
    assert len(r.warnings) == 6
    assert "secret/data/a" in r.warnings[1] and "key C_1" in r.warnings[1]


def test_a_credential_without_source_or_config_is_an_error(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {"workspace.yaml": WS + "credentials:\n  a: {source: env}\n  b: {source: keyring}\n"},
    )
    assert r.errors == [
        "workspace.yaml:5: credentials.a.config: a credential needs its config (where the "
        "value lives)",
        "workspace.yaml:6: credentials.b.source: 'keyring' is not one of env, file, "
        "hashicorp-vault, aws-secrets-manager, gcp-secret-manager, azure-key-vault, plugin",
    ]


def test_an_unknown_credentials_ref_is_an_error(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": WS + "mcp_servers:\n  - {id: kb, transport: http, "
            "endpoint: 'https://kb', credentials_ref: nope}\n"
        },
    )
    assert r.errors == [
        "workspace.yaml:5: mcp_servers[0].credentials_ref: 'nope' is not a credentials entry "
        "of this workspace"
    ]


def test_a_value_composed_from_variables_keeps_its_meaning_in_its_own_secret_key(
    tmp_path: Path,
) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": WS + "mcp_servers:\n  - id: rag\n    transport: stdio\n"
            "    command: [rag]\n    env: {BASE_DIR: '${DATA}/docs', MODE: '${MODE:-fast}', "
            "WHOLE: '${DATA}'}\n"
        },
    )
    assert not r.errors
    (server,) = r.workspace("desk")["mcpServers"]  # type: ignore[misc]
    keys = {e["name"]: e["secretKeyRef"]["key"] for e in server["env"]}
    # never the variable alone: the entry's own key, to hold the expanded value
    assert keys == {"BASE_DIR": "BASE_DIR", "MODE": "MODE", "WHOLE": "DATA"}
    base, mode = r.warnings
    assert base.startswith("workspace.yaml:8: mcp_servers[0].env.BASE_DIR: '${DATA}/docs' is ")
    assert "key BASE_DIR: put the expanded value there" in base
    assert "'${MODE:-fast}' is composed from the environment" in mode
    assert r.secret is not None
    assert set(r.secret["stringData"]) == {"BASE_DIR", "MODE", "DATA"}  # type: ignore[arg-type]


def test_the_secret_template_says_how_to_fill_a_composed_key(tmp_path: Path) -> None:
    from .support import run_cli, write_tree

    src = write_tree(
        tmp_path / "src",
        {
            "workspace.yaml": WS + "mcp_servers:\n  - id: rag\n    transport: stdio\n"
            "    command: [rag]\n    env: {BASE_DIR: '${DATA}/docs'}\n"
        },
    )
    res = run_cli("import", str(src), "-o", str(tmp_path / "out"))
    assert res.code == 0, res.err
    template = (tmp_path / "out" / "secret-desk-credentials.template.yaml").read_text()
    assert "#   BASE_DIR: the expansion of ${DATA}/docs\n" in template


def test_model_fields_from_the_environment_take_their_default_said_once(
    tmp_path: Path,
) -> None:
    arch = ARCHETYPE.replace(
        "model: {provider: anthropic, name: claude-sonnet-4-6, temperature: 0.3}",
        "model: {provider: '${WRITING_PROVIDER:-openrouter}', name: qwen/qwen3}",
    )
    node = (
        "  root:\n    id: root\n    role: root\n    archetype: researcher\n"
        "    model: {provider: '${WRITING_PROVIDER:-openrouter}', name: '${MODEL}'}\n"
    )
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL_HEAD,
            "archetypes/r.yaml": arch,
            "topologies/t.yaml": topology(node),
        },
    )
    assert r.spec("Agent", "researcher")["model"] == {
        "provider": "openrouter",
        "name": "qwen/qwen3",
    }
    (w,) = r.warnings
    assert "'${WRITING_PROVIDER:-openrouter}' imported as its default 'openrouter'" in w
    (e,) = r.errors
    assert e.startswith("topologies/t.yaml:9: agents.root.model.name: '${MODEL}' is chosen from")


def test_model_providers_known_ids_and_openai_compatible_endpoints(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": WS
            + """model_providers:
  - class: acme.llm.Gateway
    provider_id: acme
    config: {base_url: 'https://llm.acme/v1', auth_token_env: ACME_TOKEN}
  - class: swarmkit_runtime.model_providers.OpenRouterModelProvider
    provider_id: openrouter
  - class: acme.llm.Secret
    provider_id: closed
"""
        },
    )
    providers = r.workspace("desk")["modelProviders"]
    assert providers == [
        {
            "name": "acme",
            "type": "openai",
            "baseUrl": "https://llm.acme/v1",
            "apiKey": {"name": "desk-credentials", "key": "ACME_TOKEN"},
        },
        {
            "name": "openrouter",
            "type": "openai",
            "baseUrl": "https://openrouter.ai/api/v1",
            "apiKey": {"name": "desk-credentials", "key": "OPENROUTER_API_KEY"},
        },
    ]
    assert r.warnings == [
        "workspace.yaml:5: model_providers[0].class: custom provider class 'acme.llm.Gateway' "
        "is not loaded: provider 'acme' is called as an OpenAI-compatible endpoint at "
        "https://llm.acme/v1"
    ]
    assert r.errors == [
        "workspace.yaml:10: model_providers[2].class: custom provider class 'acme.llm.Secret' "
        "cannot run in the runner, and its config has no base_url of an OpenAI-compatible "
        "endpoint to call instead"
    ]


def test_governance_limits_map_and_the_rest_is_named(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": WS
            + "governance:\n  provider: agt\n  limits: {max_steps_per_agent: 9, "
            "max_steps_per_run: 40, max_cost_per_run_usd: 2.5}\n"
            "storage: {audit: {backend: sqlite}}\nidentity: {provider: builtin}\n"
        },
    )
    assert r.workspace("desk")["governance"] == {"maxStepsPerAgent": 9, "maxStepsPerRun": 40}
    fields = sorted(w.split(": ")[1] for w in r.warnings)
    assert fields == ["governance.limits.max_cost_per_run_usd", "identity", "storage"]


# --- skills --------------------------------------------------------------------------


def test_skill_metadata_maps_to_name_display_name_and_description(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/s1.yaml": SKILL_HEAD})
    assert not r.findings
    spec = r.spec("Skill", "s1")
    assert spec["displayName"] == "Skill One"
    assert spec["description"] == "Use when testing."
    assert spec["implementation"] == {"type": "llm_prompt", "prompt": "Do it."}


def test_skill_category_inputs_outputs_are_kept_as_json_schema(tmp_path: Path) -> None:
    outputs = (
        "outputs:\n  type: object\n  properties:\n    verdict: {type: string}\n"
        "    reasoning: {type: string}\n  required: [verdict, reasoning]\n"
        "inputs: {type: object, properties: {diff: {type: string}}}\n"
    )
    r = import_tree(tmp_path, {"skills/s1.yaml": skill("s1", "decision", outputs)})
    spec = r.spec("Skill", "s1")
    assert spec["category"] == "decision"
    assert spec["outputs"]["required"] == ["verdict", "reasoning"]  # type: ignore[index]
    assert spec["inputs"] == {"type": "object", "properties": {"diff": {"type": "string"}}}


def test_llm_prompt_model_object_becomes_provider_slash_name(tmp_path: Path) -> None:
    body = SKILL_HEAD.replace(
        "implementation: {type: llm_prompt, prompt: Do it.}",
        "implementation:\n  type: llm_prompt\n  prompt: Summarize.\n"
        "  model: {provider: openrouter, name: meta-llama/llama-3.3-70b-instruct}",
    )
    r = import_tree(tmp_path, {"skills/s1.yaml": body})
    assert not r.findings
    assert r.spec("Skill", "s1")["implementation"] == {
        "type": "llm_prompt",
        "prompt": "Summarize.",
        "model": "openrouter/meta-llama/llama-3.3-70b-instruct",
    }
    assert r.workspace()["modelProviders"][0]["name"] == "openrouter"  # type: ignore[index]


def test_composed_skills_keep_their_order_and_strategy(tmp_path: Path) -> None:
    body = SKILL_HEAD.replace(
        "implementation: {type: llm_prompt, prompt: Do it.}",
        "implementation: {type: composed, composes: [s2, s3], strategy: sequential}",
    )
    r = import_tree(tmp_path, {"skills/s1.yaml": body})
    assert r.spec("Skill", "s1")["implementation"] == {
        "type": "composed",
        "composes": ["s2", "s3"],
        "strategy": "sequential",
    }


def test_constraints_iam_and_provenance(tmp_path: Path) -> None:
    extra = (
        "constraints: {max_latency_ms: 500, timeout_seconds: 20, on_failure: escalate_to_human,"
        " retry: {attempts: 2, backoff: linear}}\niam: {required_scopes: ['repo:read']}\n"
    )
    body = skill("s1", extra=extra).replace(
        "provenance: {authored_by: human, version: 1.0.0}",
        "provenance: {authored_by: vendor_published, version: 2.1.0, vendor: acme, "
        "authored_date: 2025-01-31}",
    )
    r = import_tree(tmp_path, {"skills/s1.yaml": body})
    assert not r.findings
    spec = r.spec("Skill", "s1")
    assert spec["constraints"] == {
        "maxLatencyMs": 500,
        "timeoutSeconds": 20,
        "onFailure": "escalate_to_human",
        "retry": {"attempts": 2, "backoff": "linear"},
    }
    assert spec["iam"] == {"requiredScopes": ["repo:read"]}
    assert spec["provenance"] == {"authoredBy": "vendor_published", "version": "2.1.0"}
    ann = r.objects[("Skill", "s1")]["metadata"]["annotations"]  # type: ignore[index]
    assert ann["swarmkit.dev/provenance-vendor"] == "acme"  # type: ignore[index]
    assert ann["swarmkit.dev/provenance-authored-date"] == "2025-01-31"  # type: ignore[index]


def test_swarm_authored_skills_warn_that_they_wait_for_review(tmp_path: Path) -> None:
    body = skill("s1").replace("authored_by: human", "authored_by: authored_by_swarm")
    r = import_tree(tmp_path, {"skills/s1.yaml": body})
    assert r.warnings == [
        "skills/s1.yaml:9: provenance.authored_by: authored_by_swarm: the skill is locked until "
        "a reviewer approves its Review skill-<name>-<hash8> (kubectl swarmkit review approve)"
    ]


def test_audit_levels_become_booleans_and_summary_says_so(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": skill(
                "s1", extra="audit: {log_inputs: none, log_outputs: summary, redact: [$.pw]}\n"
            )
        },
    )
    assert r.spec("Skill", "s1")["audit"] == {
        "logInputs": False,
        "logOutputs": True,
        "redact": ["$.pw"],
    }
    (w,) = r.warnings
    assert w.startswith("skills/s1.yaml:10: audit.log_outputs: summary: the audit log")


# --- archetypes ----------------------------------------------------------------------


def test_archetype_becomes_an_agent_prompt_model_grants_and_scopes(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path, {"skills/s1.yaml": SKILL_HEAD, "archetypes/researcher.yaml": ARCHETYPE}
    )
    assert not r.findings
    agent = r.objects[("Agent", "researcher")]
    ann = agent["metadata"]["annotations"]  # type: ignore[index]
    assert ann["swarmkit.dev/display-name"] == "Researcher"  # type: ignore[index]
    assert ann["swarmkit.dev/role"] == "worker"  # type: ignore[index]
    assert r.spec("Agent", "researcher") == {
        "workspaceRef": {"name": "default"},
        "description": "Finds things on the web.",
        "model": {"provider": "anthropic", "name": "claude-sonnet-4-6", "temperature": 0.3},
        "systemPrompt": "You research.",
        "scopes": ["web:read"],
        "skills": ["s1"],
    }
    assert r.workspace()["modelProviders"] == [
        {
            "name": "anthropic",
            "type": "anthropic",
            "apiKey": {"name": "default-credentials", "key": "ANTHROPIC_API_KEY"},
        }
    ]


def test_openrouter_is_an_openai_compatible_provider(tmp_path: Path) -> None:
    arch = ARCHETYPE.replace("provider: anthropic", "provider: openrouter")
    r = import_tree(tmp_path, {"skills/s1.yaml": SKILL_HEAD, "archetypes/r.yaml": arch})
    assert r.workspace()["modelProviders"] == [
        {
            "name": "openrouter",
            "type": "openai",
            "baseUrl": "https://openrouter.ai/api/v1",
            "apiKey": {"name": "default-credentials", "key": "OPENROUTER_API_KEY"},
        }
    ]


def test_an_abstract_skill_is_bound_to_the_one_matching_skill(tmp_path: Path) -> None:
    arch = ARCHETYPE.replace(
        "skills: [s1]", "skills:\n    - abstract: {category: decision, capability: quality}"
    )
    outputs = "outputs: {type: object, properties: {reasoning: {type: string}}}\n"
    r = import_tree(
        tmp_path,
        {
            "archetypes/r.yaml": arch,
            "skills/a.yaml": skill("code-quality", "decision", outputs),
            "skills/b.yaml": skill("web-quality"),  # right capability, wrong category
            "skills/c.yaml": skill("style-check", "decision", outputs),
        },
    )
    assert not r.findings
    assert r.spec("Agent", "researcher")["skills"] == ["code-quality"]


def test_an_abstract_skill_matching_none_or_several_is_reported(tmp_path: Path) -> None:
    arch = ARCHETYPE.replace(
        "skills: [s1]", "skills:\n    - abstract: {category: capability, capability: web}"
    )
    files = {
        "archetypes/r.yaml": arch,
        "skills/a.yaml": skill("web-a"),
        "skills/b.yaml": skill("web-b"),
    }
    r = import_tree(tmp_path, files)
    (w,) = r.warnings  # no topology uses it: the archetype imports without that grant
    assert "it matches 2 skills (web-a, web-b)" in w and "not granted" in w
    assert "skills" not in r.spec("Agent", "researcher")
    files["topologies/t.yaml"] = topology("  root: {id: root, role: root, archetype: researcher}\n")
    r = import_tree(tmp_path / "used", files)
    (e,) = r.errors  # SwarmKit refuses such a topology at load
    assert "abstract skill {category: capability, capability: web}" in e


# --- topologies ----------------------------------------------------------------------


def test_topology_children_lists_become_the_tree(tmp_path: Path) -> None:
    agents = """  root:
    id: root
    role: root
    archetype: researcher
    children:
      - id: lead
        role: leader
        archetype: researcher
        children:
          - {id: helper, role: worker, archetype: researcher}
      - {id: solo, role: worker, archetype: researcher}
"""
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL_HEAD,
            "archetypes/researcher.yaml": ARCHETYPE,
            "topologies/t.yaml": topology(agents).replace("1.0.0}", "1.0.0, description: R.}"),
        },
    )
    assert not r.findings
    spec = r.spec("Topology", "t")
    assert spec["agents"] == [
        {"name": "root", "agentRef": {"name": "researcher"}, "role": "root"},
        {"name": "lead", "agentRef": {"name": "researcher"}, "role": "leader", "parent": "root"},
        {"name": "helper", "agentRef": {"name": "researcher"}, "role": "worker", "parent": "lead"},
        {"name": "solo", "agentRef": {"name": "researcher"}, "role": "worker", "parent": "root"},
    ]
    assert spec["description"] == "R."
    ann = r.objects[("Topology", "t")]["metadata"]["annotations"]  # type: ignore[index]
    assert ann["swarmkit.dev/source-version"] == "1.0.0"  # type: ignore[index]


def test_a_node_overriding_its_archetype_gets_the_merge_as_its_own_agent(
    tmp_path: Path,
) -> None:
    agents = """  root:
    id: root
    role: root
    archetype: researcher
    model: {name: claude-opus-4-7}
    prompt: {system: You lead the research.}
    skills_additional: [s2]
    iam: {base_scope: ["web:read", "kb:read"]}
"""
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL_HEAD,
            "skills/s2.yaml": skill("s2"),
            "archetypes/researcher.yaml": ARCHETYPE,
            "topologies/t.yaml": topology(agents),
        },
    )
    assert not r.findings
    assert r.spec("Topology", "t")["agents"][0]["agentRef"] == {"name": "t-root"}  # type: ignore[index]
    assert r.spec("Agent", "t-root") == {
        "workspaceRef": {"name": "default"},
        "description": "Finds things on the web.",
        # SwarmKit's shallow merge: the node's keys win, the archetype's others stay
        "model": {"provider": "anthropic", "name": "claude-opus-4-7", "temperature": 0.3},
        "systemPrompt": "You lead the research.",
        "scopes": ["web:read", "kb:read"],
        "skills": ["s1", "s2"],
    }


def test_node_skills_replace_the_archetype_skills(tmp_path: Path) -> None:
    agents = "  root: {id: root, role: root, archetype: researcher, skills: [s2]}\n"
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL_HEAD,
            "skills/s2.yaml": skill("s2"),
            "archetypes/researcher.yaml": ARCHETYPE,
            "topologies/t.yaml": topology(agents),
        },
    )
    assert r.spec("Agent", "t-root")["skills"] == ["s2"]


def test_a_node_without_archetype_is_its_own_agent(tmp_path: Path) -> None:
    agents = (
        "  root:\n    id: planner\n    role: root\n"
        "    model: {provider: openai, name: gpt-4.1}\n    prompt: {system: Plan.}\n"
    )
    r = import_tree(tmp_path, {"topologies/t.yaml": topology(agents)})
    assert not r.findings
    assert r.spec("Agent", "t-planner") == {
        "workspaceRef": {"name": "default"},
        "model": {"provider": "openai", "name": "gpt-4.1"},
        "systemPrompt": "Plan.",
    }


def test_node_fields_without_an_equivalent_are_named(tmp_path: Path) -> None:
    agents = """  root:
    id: root
    role: root
    archetype: researcher
    children:
      - id: a
        role: worker
        archetype: researcher
        depends_on: [b]
        requires: {s1: [s2]}
      - {id: b, role: worker, archetype: researcher, funnel: review-gate}
"""
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL_HEAD,
            "archetypes/researcher.yaml": ARCHETYPE,
            "topologies/t.yaml": topology(agents),
        },
    )
    assert sorted(w.split(": not supported")[0] for w in r.warnings) == [
        "topologies/t.yaml:13: agents.root.children[0].depends_on",
        "topologies/t.yaml:14: agents.root.children[0].requires",
        "topologies/t.yaml:15: agents.root.children[1].funnel",
    ]


def test_every_object_records_where_it_came_from_and_its_sync_wave(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/s1.yaml": "# comment\n" + SKILL_HEAD})
    ann = r.objects[("Skill", "s1")]["metadata"]["annotations"]  # type: ignore[index]
    assert ann == {
        "swarmkit.dev/imported-from": "skills/s1.yaml:2",
        "argocd.argoproj.io/sync-wave": "1",
    }


def test_other_swarmkit_kinds_are_reported_once_each_with_what_to_do(tmp_path: Path) -> None:
    trigger = (
        "apiVersion: swarmkit/v1\nkind: Trigger\nmetadata: {id: n, name: N}\n"
        "type: cron\nconfig: {expression: '0 2 * * *'}\ntargets: [t]\n"
    )
    r = import_tree(
        tmp_path,
        {
            "triggers/a.yaml": trigger,
            "triggers/b.yaml": trigger,
            "f.yaml": "apiVersion: swarmkit/v1\nkind: Funnel\nmetadata: {id: f}\n",
        },
    )
    assert r.warnings == [
        "f.yaml:2: kind: kind 'Funnel': 1 document(s) not imported: gate an agent's output "
        "with a decision skill or a human Review (imported kinds: Skill, Archetype, Topology, "
        "Workspace)",
        "triggers/a.yaml:2: kind: kind 'Trigger': 2 document(s) not imported: "
        "start Runs from the event source, or give the Topology a cron schedule (imported "
        "kinds: Skill, Archetype, Topology, Workspace)",
    ]


# --- the fixture tree --------------------------------------------------------------


def test_the_swarmkit_fixture_workspace_imports_and_validates() -> None:
    r = import_tree(FIXTURES / "swarmkit")
    assert not r.errors
    assert {k for k, _ in r.objects} == {"Workspace", "Skill", "Agent", "Topology"}
    for manifest in r.objects.values():
        validate_manifest(manifest)
    # what the issue found broken, on a real-format workspace
    assert r.spec("Agent", "coordinator")["skills"] == [
        "research-and-review",
        "code-quality-review",
    ]
    assert r.spec("Agent", "triage-researcher")["skills"] == ["search-web", "summarize-findings"]
    assert [n["name"] for n in r.spec("Topology", "deep-research")["agents"]] == [  # type: ignore[attr-defined]
        "planner",
        "lead",
        "fact-checker",
    ]
    servers = {s["id"]: s for s in r.workspace("incident-desk")["mcpServers"]}  # type: ignore[attr-defined]
    assert servers["review-server"]["url"] == "https://review.internal/mcp"
    with tempfile.TemporaryDirectory() as tmp:
        empty = import_tree(Path(tmp))
        assert not empty.objects and not empty.findings


def test_nodes_of_long_ids_sharing_a_prefix_get_distinct_agents(tmp_path: Path) -> None:
    """Issue 47 item 5: the Agent name of a node is hashed past 63 characters, never cut
    (two nodes sharing their first 60 characters became one Agent)."""
    long = "n" * 60
    node = "    model: {provider: openai, name: gpt-4.1}\n    prompt: {system: Plan.}\n"
    agents = (
        f"  root:\n    id: {long}-a\n    role: root\n{node}    children:\n"
        f"      - id: {long}-b\n        role: worker\n"
        "        model: {provider: openai, name: gpt-4.1}\n        prompt: {system: Do.}\n"
    )
    r = import_tree(tmp_path, {"topologies/t.yaml": topology(agents)})
    names = sorted(name for kind, name in r.objects if kind == "Agent")
    assert len(names) == 2 and all(len(n) <= 63 for n in names), names
    nodes = r.spec("Topology", "t")["agents"]
    assert isinstance(nodes, list)
    assert sorted(n["agentRef"]["name"] for n in nodes) == names
