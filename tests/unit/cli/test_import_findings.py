"""Every warning and error ``import`` reports: file, line, field and what to do.

Nothing is dropped silently: each field the mappers do not take is a warning, each invalid
document an error naming file and field. One test per warning.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from .support import FIXTURES, import_tree, run_cli, write_tree

SKILL = """apiVersion: swarmkit/v1
kind: Skill
metadata: {id: s1, description: Use when testing.}
category: capability
provenance: {authored_by: human, version: 1.0.0}
"""


# --- warnings ------------------------------------------------------------------------


def test_unknown_field_names_file_line_and_field(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL + "implementation:\n  type: llm_prompt\n"
            "  prompt: p\n  temprature: 0.2\n"
        },
    )
    assert r.warnings == [
        "skills/s1.yaml:9: implementation.temprature: unknown field, not imported (known: "
        "type, server, tool, arguments, prompt, model, composes, strategy, pack, command, "
        "topology, card_url, skill_id, credentials_ref, timeout_s, on_unanswerable, "
        "max_agent_answers, permission, effects)"
    ]
    assert "temprature" not in str(r.spec("Skill", "s1"))


def test_unknown_top_level_field_of_each_format_warns(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": "apiVersion: swarmkit/v1\nkind: Workspace\n"
            "metadata: {id: ws, name: W}\nmcp_servers: []\nflavour: 3\n",
            "tools.yaml": "t:\n  description: d\n  http: {url: 'https://x'}\n  cache: true\n",
            "agents.yaml": "a1:\n  intent: {inline: x}\n  model: cheap\n  colour: blue\n",
            "skills/x/SKILL.md": "---\nname: x\ndescription: d\nlicence: MIT\n---\nbody\n",
        },
    )
    fields = sorted(
        w.split(": ")[0] + ": " + w.split(": ")[1] for w in r.warnings if "unknown field" in w
    )
    assert fields == [
        "agents.yaml:4: a1.colour",
        "skills/x/SKILL.md:4: licence",
        "tools.yaml:4: t.cache",
        "workspace.yaml:5: flavour",
    ]


def test_duplicate_key_warns_that_the_last_wins(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/s1.yaml": SKILL + "category: decision\n"})
    assert "skills/s1.yaml:6: category: duplicate key: the last one wins" in r.warnings


def test_files_of_no_source_format_are_one_note_and_unknown_yaml_one_warning(
    tmp_path: Path,
) -> None:
    r = import_tree(
        tmp_path,
        {
            "notes.txt": "hello",
            "README.md": "# hi",
            "other.yaml": "a: 1\n",
            "more.yaml": "b: 2\n",
            ".git/config": "x",
            ".github/workflows/ci.yaml": "on: push\n",
            ".claude/skills/x/SKILL.md": "---\nname: x\ndescription: d\n---\nbody\n",
            ".github/skills/y/SKILL.md": "---\nname: y\ndescription: d\n---\nbody\n",
        },
    )
    assert r.warnings == [
        "more.yaml:1: not a recognized source document (no apiVersion swarmkit/v1, and not "
        "workspace.yaml or a Swarm file); skipped: more.yaml, other.yaml"
    ]
    assert r.notes == ["passed over 2 file(s) of no source format (README.md, notes.txt)"]
    # hidden directories are searched (Agent Skills live in .claude/skills, .github/skills);
    # .git and CI workflows are not
    assert ("Skill", "x") in r.objects and ("Skill", "y") in r.objects


def test_an_unknown_swarmkit_kind_is_reported(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"x.yaml": "apiVersion: swarmkit/v1\nkind: Contract\n"})
    assert r.warnings == [
        "x.yaml:2: kind: kind 'Contract': 1 document(s) not imported: express the contract as "
        "a decision skill's outputs schema (imported kinds: Skill, Archetype, Topology, "
        "Workspace)"
    ]


def test_an_existing_swarmkit_dev_manifest_is_left_alone(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"x.yaml": "apiVersion: swarmkit.dev/v1alpha1\nkind: Skill\n"})
    assert r.warnings == [
        "x.yaml:1: apiVersion: already a swarmkit.dev manifest; apply it as it is; skipped"
    ]


def test_a_literal_secret_looking_env_value_warns(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": "mcp_servers:\n  - id: gh\n    transport: stdio\n"
            "    command: [gh]\n    env:\n      GITHUB_TOKEN: ghp_abc\n"
        },
    )
    assert r.warnings == [
        "workspace.yaml:6: mcp_servers[0].env.GITHUB_TOKEN: literal value of a secret-looking "
        "variable is copied into the Workspace in clear text; use ${VAR} to reference a Secret "
        "instead"
    ]


def test_text_around_a_variable_becomes_its_own_secret_key_with_a_warning(
    tmp_path: Path,
) -> None:
    r = import_tree(
        tmp_path,
        {
            "policy.yaml": "mcp_servers:\n  db:\n    command: db\n"
            "    env:\n      DSN: 'postgres://u:${PGPASS}@db/x'\n"
        },
    )
    (w,) = r.warnings
    assert w.startswith("policy.yaml:5: mcp_servers.db.env.DSN: 'postgres://u:${PGPASS}@db/x'")
    (server,) = r.workspace()["mcpServers"]  # type: ignore[misc]
    assert server["env"] == [
        {"name": "DSN", "secretKeyRef": {"name": "default-credentials", "key": "DSN"}}
    ]


def test_a_literal_header_is_not_imported(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "policy.yaml": "mcp_servers:\n  kb:\n    url: https://kb\n"
            "    headers: {X-Team: support}\n"
        },
    )
    assert r.warnings == [
        "policy.yaml:4: mcp_servers.kb.headers.X-Team: only headers whose value is "
        "[prefix]${VAR} can be imported (a Secret reference); literal header not imported"
    ]


def test_args_without_command_warn(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {"policy.yaml": "mcp_servers:\n  kb:\n    url: https://kb\n    args: [-v]\n"},
    )
    assert r.warnings == ["policy.yaml:4: mcp_servers.kb.args: args without command; not imported"]


def test_unsupported_fields_say_why(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL + "requires: [jq]\n",
            "policy.yaml": "web_search_provider: brave\n",
            "workspace.yaml": "metadata: {id: ws, name: Support}\nmcp_servers:\n"
            "  - {id: a, transport: stdio, command: [a], cwd: /srv}\n",
        },
    )
    unsupported = sorted(w for w in r.warnings if "not supported" in w)
    assert unsupported == [
        "policy.yaml:1: web_search_provider: not supported: native web_search needs the "
        "Workspace searchProvider (a URL); set it by hand; not imported",
        "skills/s1.yaml:6: requires: not supported: skill prerequisites are checked by the "
        "runtime image, not the API; not imported",
        "workspace.yaml:3: mcp_servers[0].cwd: not supported: stdio servers start in the "
        "Run's scratch directory; not imported",
    ]


def test_a_symlink_in_a_skill_is_not_followed(tmp_path: Path) -> None:
    write_tree(tmp_path, {"skills/x/SKILL.md": "---\nname: x\ndescription: d\n---\nb\n"})
    os.symlink("/etc/passwd", tmp_path / "skills/x/passwd")
    r = import_tree(tmp_path)
    assert r.warnings == ["skills/x/passwd: symlink inside a skill is not followed; not imported"]
    assert "files" not in r.spec("Skill", "x")


def test_a_shorthand_type_it_does_not_know_warns(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "tools.yaml": "t:\n  description: d\n  http: {url: 'https://x'}\n"
            "  input_schema: {when: datetime}\n"
        },
    )
    assert r.warnings == [
        "tools.yaml:4: t.input_schema.when: unknown type 'datetime'; imported as a property of "
        "any type"
    ]


def test_an_unknown_skill_grant_warns_and_stays(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "agents.yaml": "a1:\n  intent: {inline: x}\n  model: anthropic/claude\n"
            "  skills: [ghost]\n"
        },
    )
    assert r.warnings == [
        "agents.yaml:1: a1.skills: skill 'ghost' is not in this import; the grant stays inert "
        "until a Skill of that name exists"
    ]
    assert r.spec("Agent", "a1")["skills"] == ["ghost"]


def test_an_unknown_tool_warns(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "agents.yaml": "a1:\n  intent: {inline: x}\n  model: anthropic/claude\n"
            "  tools: [mailbox_send, pg.query]\n"
        },
    )
    assert r.warnings == [
        "agents.yaml:1: a1.tools: tool 'pg.query' is neither an imported tool, an MCP tool "
        "<prefix>.<tool> of an imported server, nor a platform builtin"
    ]


def test_skill_references_outside_the_import_warn(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL + "implementation: {type: mcp_tool, server: gh, tool: get}\n",
            "skills/s2.yaml": SKILL.replace("id: s1", "id: s2")
            + "implementation: {type: agent, topology: research}\n",
            "skills/s3.yaml": SKILL.replace("id: s1", "id: s3")
            + "implementation: {type: agent, card_url: 'https://x/card', credentials_ref: tok}\n",
        },
    )
    assert r.warnings == [
        "skills/s1.yaml:6: implementation: MCP server 'gh' is not declared in the imported "
        "workspace; calls fail until it is",
        "skills/s2.yaml:6: implementation: topology 'research' is not in this import",
        "skills/s3.yaml:6: implementation: credentials 'tok' is not a credentials entry of the "
        "imported workspace",
    ]


def test_no_model_provider_anywhere_adds_anthropic_and_says_so(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"agents.yaml": "a1:\n  intent: {inline: x}\n  model: house-model\n"})
    w = r.warnings[-1]
    assert w.startswith("agents.yaml:1: a1.model: no model provider in the sources: added")
    assert r.workspace()["modelProviders"][0]["name"] == "anthropic"  # type: ignore[index]


# --- errors --------------------------------------------------------------------------


def test_invalid_yaml_is_an_error_with_its_line(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"tools.yaml": "t:\n  description: [unclosed\n  http: {}\n"})
    (e,) = r.errors
    assert e.startswith("tools.yaml:3: invalid YAML")


def test_missing_metadata_id_is_an_error(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/s1.yaml": SKILL.replace("id: s1, ", "")})
    assert r.errors == [
        "skills/s1.yaml:3: metadata: metadata.id is required (it becomes metadata.name)"
    ]


def test_an_invalid_document_names_file_and_source_field(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL.replace("capability", "decision")
            + "outputs: {type: object, properties: {verdict: {type: string}}}\n",
            "skills/s2.yaml": SKILL.replace("id: s1", "id: s2")
            + "implementation: {type: agent, card_url: 'ftp://x'}\n",
            "skills/s3.yaml": SKILL.replace("id: s1", "id: S_3"),
        },
    )
    assert r.errors == [
        "skills/s1.yaml:6: outputs: Skill 's1': decision skills must declare "
        "outputs (JSON Schema) with a reasoning property (API field outputs)",
        "skills/s2.yaml:6: implementation.card_url: Skill 's2': String should match pattern "
        "'^https?://' (API field implementation.cardUrl)",
        "skills/s3.yaml:3: metadata.id: 'S_3' must be lowercase-kebab, at most 63 characters "
        "(it becomes metadata.name)",
    ]


def test_the_same_name_twice_is_an_error(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/a.yaml": SKILL, "skills/b.yaml": SKILL})
    assert r.errors == ["skills/b.yaml:1: Skill 's1' is defined twice (first at skills/a.yaml:1)"]


def test_a_node_naming_an_unknown_archetype_is_an_error(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "t.yaml": "apiVersion: swarmkit/v1\nkind: Topology\n"
            "metadata: {name: t, version: 1.0.0}\nagents:\n"
            "  root: {id: root, role: root, archetype: ghost}\n"
        },
    )
    assert r.errors == [
        "t.yaml:5: agents.root: node 'root': archetype 'ghost' is not among the imported archetypes"
    ]


def test_errors_write_nothing_and_exit_1(tmp_path: Path) -> None:
    src = write_tree(tmp_path / "src", {"skills/s1.yaml": SKILL.replace("id: s1, ", "")})
    out = tmp_path / "out"
    res = run_cli("import", str(src), "-o", str(out))
    assert res.code == 1
    assert "metadata.id is required" in res.err
    assert "nothing written" in res.err
    assert not out.exists()


def test_warnings_write_and_exit_0_but_strict_turns_them_into_errors(tmp_path: Path) -> None:
    src = write_tree(tmp_path / "src", {"skills/s1.yaml": SKILL + "colour: red\n"})
    res = run_cli("import", str(src), "-o", str(tmp_path / "out"))
    assert res.code == 0 and "warning: " in res.err and "colour" in res.err
    assert (tmp_path / "out" / "skill-s1.yaml").exists()
    res = run_cli("import", str(src), "-o", str(tmp_path / "strict"), "--strict")
    assert res.code == 1
    assert "error: " in res.err and "colour: unknown field, not imported" in res.err
    assert res.err.splitlines()[0].endswith("(--strict)")
    assert not (tmp_path / "strict").exists()


def test_dir_output_has_a_kustomization_in_apply_order_and_a_separate_secret_template(
    tmp_path: Path,
) -> None:
    res = run_cli("import", str(FIXTURES / "swarmkit"), "-n", "team-a", "-o", str(tmp_path))
    assert res.code == 0, res.err
    kust = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    assert kust["namespace"] == "team-a"
    kinds = [r.split("-", 1)[0] for r in kust["resources"]]
    order = ["workspace", "configmap", "skill", "agent", "topology"]
    assert kinds == sorted(kinds, key=order.index)
    assert not any("secret" in r for r in kust["resources"])
    template = tmp_path / "secret-incident-desk-credentials.template.yaml"
    secret = yaml.safe_load(template.read_text())
    assert secret["metadata"] == {"name": "incident-desk-credentials", "namespace": "team-a"}
    assert set(secret["stringData"]) == {
        "BRAVE_API_KEY",
        "GITHUB_PAT",
        "LLM_GATEWAY_TOKEN",
        "OPENROUTER_API_KEY",
        "REVIEW_TOKEN",
    }
    assert set(secret["stringData"].values()) == {""}
    assert "secret-incident-desk-credentials.template.yaml" in res.err
    assert f"kubectl apply --server-side -k {tmp_path}" in res.err
    assert "&id" not in "".join(f.read_text() for f in tmp_path.glob("*.yaml"))


def test_stdout_output_is_one_yaml_stream(tmp_path: Path) -> None:
    res = run_cli("import", str(FIXTURES / "swarm"))
    assert res.code == 0, res.err
    docs = list(yaml.safe_load_all(res.out))
    assert [d["kind"] for d in docs] == ["Workspace", "Agent", "Agent", "Agent"]
    assert "Secret" not in res.out


def test_a_bad_workspace_name_is_a_usage_error(tmp_path: Path) -> None:
    assert run_cli("import", str(tmp_path), "--workspace", "Bad_Name").code == 2


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    res = run_cli("import", str(tmp_path / "nope"))
    assert res.code == 1 and "no such file or directory" in res.err


def test_a_document_that_is_not_a_mapping_is_skipped(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"tools.yaml": "- a\n- b\n"})
    assert r.warnings == ["tools.yaml:1: expected a mapping at the top; skipped"]


def test_swarmkit_labels_and_workspace_file_lists_are_unsupported(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/s1.yaml": SKILL.replace(
                "metadata: {id: s1,", "metadata: {labels: {a: b}, id: s1,"
            ),
            "workspace.yaml": "mcp_servers: []\nskills: [skills/]\n",
        },
    )
    assert sorted(r.warnings) == [
        "skills/s1.yaml:3: metadata.labels: not supported: SwarmKit labels have no meaning "
        "here; add Kubernetes labels; not imported",
        "workspace.yaml:2: skills: not supported: skills are read from their own files (pass "
        "their directory); not imported",
    ]


def test_a_duplicate_key_in_front_matter_warns(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path, {"skills/x/SKILL.md": "---\nname: x\ndescription: a\ndescription: b\n---\nbody\n"}
    )
    assert r.warnings == ["skills/x/SKILL.md:4: description: duplicate key: the last one wins"]
    assert r.spec("Skill", "x")["description"] == "b"


def test_shape_errors_name_file_line_and_field(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "workspace.yaml": "mcp_servers:\n  - transport: stdio\n  - id: a\n"
            "    transport: stdio\n    command: [a]\n"
            "    env: [A, B]\ncredentials: 3\n",
            "tools.yaml": "t1: {}\nt2:\n  description: d\n  http: {url: 'https://x'}\n"
            "  input_schema: [q]\n",
            "agents.yaml": "a1:\n  intent: {inline: x}\n  model: 42\n",
            "t.yaml": "apiVersion: swarmkit/v1\nkind: Topology\n"
            "metadata: {name: t, version: 1.0.0}\nagents: {}\n",
            "skills/bin/SKILL.md": b"---\nname: bin\n---\n\xff\xfe",
        },
    )
    assert sorted(r.errors) == [
        "agents.yaml:3: a1.model: expected a model alias, got 42",
        "skills/bin/SKILL.md: SKILL.md is not UTF-8 text",
        "t.yaml:4: agents: expected agents.root: the root agent {id, role, ...}",
        "tools.yaml:1: t1: expected a mapping with at least description",
        "tools.yaml:5: t2.input_schema: expected a mapping (JSON Schema), got list",
        "workspace.yaml:2: mcp_servers[0]: an MCP server needs an id",
        "workspace.yaml:6: mcp_servers[1].env: expected a mapping NAME: value",
        "workspace.yaml:7: credentials: expected a mapping name → {source, config}",
    ]
