"""``import`` at the scale of real migrations: size limits known at import time,
``--skip-invalid``, ``--prefix`` for collisions across collections, nothing imported."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from swarmkit_api import validate_manifest
from swarmkit_api.skill import MAX_SKILL_BYTES
from swarmkit_cli.importer.sizes import CONFIG_MAP_LIMIT

from .support import import_tree, run_cli, write_tree


def md(name: str) -> str:
    return f"---\nname: {name}\ndescription: Use when {name} is needed.\n---\n\nSteps.\n"


def test_binary_files_are_spread_over_config_maps_of_at_most_1_mib(tmp_path: Path) -> None:
    blobs = {f"skills/big/assets/b{i}.bin": os.urandom(340 * 1024) for i in range(3)}
    r = import_tree(tmp_path, {"skills/big/SKILL.md": md("big"), **blobs})
    assert not r.errors
    maps = {n: m for (k, n), m in r.objects.items() if k == "ConfigMap"}
    assert sorted(maps) == ["big-files-0", "big-files-1"]
    for cm in maps.values():
        data = cm["binaryData"]  # type: ignore[index]
        assert sum(len(k) + len(v) * 3 // 4 for k, v in data.items()) <= CONFIG_MAP_LIMIT  # type: ignore[union-attr]
    refs = {f["path"]: f["configMapRef"] for f in r.spec("Skill", "big")["files"]}  # type: ignore[union-attr]
    assert {ref["name"] for ref in refs.values()} == set(maps)
    for ref in refs.values():
        assert ref["key"] in maps[ref["name"]]["binaryData"]  # type: ignore[operator]


def test_a_skill_the_operator_would_refuse_as_too_large_is_an_error_now(
    tmp_path: Path,
) -> None:
    # Files of 1,000,000 bytes (each fits one ConfigMap), together past MAX_SKILL_BYTES.
    big = "x" * 1_000_000
    refs = {
        f"skills/huge/reference/{i:02d}.md": big for i in range(MAX_SKILL_BYTES // len(big) + 1)
    }
    r = import_tree(
        tmp_path, {"skills/huge/SKILL.md": md("huge"), **refs, "skills/ok/SKILL.md": md("ok")}
    )
    (e,) = r.errors
    assert e.startswith("skills/huge/SKILL.md:2: Skill 'huge' renders to about ")
    assert f"over the operator's {MAX_SKILL_BYTES}-byte limit (it would end TooLarge)" in e


def test_a_skill_of_8_mib_of_text_imports_with_its_files_in_config_maps(tmp_path: Path) -> None:
    # Inline, 8 MiB of text would make the Skill object too large for etcd (~1.5 MiB).
    files = {f"skills/docs/reference/{i}.md": f"{i}" * 900_000 for i in range(9)}
    r = import_tree(tmp_path, {"skills/docs/SKILL.md": md("docs"), **files})
    assert not r.errors
    spec = r.spec("Skill", "docs")
    assert all("content" not in f for f in spec["files"])  # type: ignore[union-attr]
    maps = {n: m for (k, n), m in r.objects.items() if k == "ConfigMap"}
    assert len(maps) == 9
    for f in spec["files"]:  # type: ignore[union-attr]
        ref = f["configMapRef"]  # type: ignore[index]
        text = maps[ref["name"]]["data"][ref["key"]]  # type: ignore[index]
        assert text == files["skills/docs/" + f["path"]]  # type: ignore[index, operator]
    assert len(yaml.safe_dump(r.objects[("Skill", "docs")])) < 64 * 1024


def test_skip_invalid_writes_the_rest_and_says_what_was_left_out(tmp_path: Path) -> None:
    src = write_tree(
        tmp_path / "src",
        {
            "a/good/SKILL.md": md("good"),
            "a/bad/SKILL.md": md("bad").replace("name: bad", "name: wrong"),
            "tools.yaml": "ok_tool:\n  description: d\n  http: {url: 'https://x'}\n"
            "bad_tool:\n  description: d\n  http: {url: '{{input.u}}'}\n",
            "agents.yaml": "a1:\n  intent: {inline: x}\n  model: openai/gpt-4.1\n"
            "  tools: [ok_tool]\na2:\n  model: cheap\n",
        },
    )
    out = tmp_path / "out"
    res = run_cli("import", str(src), "-o", str(out))
    assert res.code == 1 and not out.exists()
    res = run_cli("import", str(src), "-o", str(out), "--skip-invalid")
    assert res.code == 0, res.err
    kust = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert sorted(kust["resources"]) == [
        "agent-a1.yaml",
        "skill-good.yaml",
        "workspace-default.yaml",
    ]
    ws = yaml.safe_load((out / "workspace-default.yaml").read_text())
    assert [t["name"] for t in ws["spec"]["tools"]] == ["ok_tool"]
    skipped = yaml.safe_load((out / "import-skipped.yaml").read_text())["skipped"]
    assert {(s["file"].rsplit("src/", 1)[-1], s["field"]) for s in skipped} == {
        ("a/bad/SKILL.md", "name"),
        ("tools.yaml", "bad_tool.http"),
        ("agents.yaml", "a2"),
    }
    assert all(s["reason"] for s in skipped)
    assert "(skipped)" in res.err and "import-skipped.yaml" in res.err
    for path in out.glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if doc.get("apiVersion") == "swarmkit.dev/v1alpha1":
            validate_manifest(doc)


def test_skip_invalid_also_leaves_out_what_depends_on_a_skipped_item(tmp_path: Path) -> None:
    arch = (
        "apiVersion: swarmkit/v1\nkind: Archetype\nmetadata: {id: a, name: A, "
        "description: An archetype.}\nrole: worker\ndefaults:\n  model: {provider: openai, "
        "name: m}\n  skills:\n    - abstract: {category: decision}\nprovenance: "
        "{authored_by: human, version: 1.0.0}\n"
    )
    topo = (
        "apiVersion: swarmkit/v1\nkind: Topology\nmetadata: {name: t, version: 1.0.0}\n"
        "agents:\n  root: {id: root, role: root, archetype: a, skills_additional: [x]}\n"
    )
    r = import_tree(
        tmp_path, {"archetypes/a.yaml": arch, "topologies/t.yaml": topo}, skip_invalid=True
    )
    # the node's own Agent cannot bind the abstract skill, so the topology goes too
    assert ("Agent", "t-root") not in r.objects and ("Topology", "t") not in r.objects
    assert ("Agent", "a") in r.objects


def test_prefix_renames_a_collection_and_its_own_references(tmp_path: Path) -> None:
    files = {
        "vendor-a/pdf/SKILL.md": md("pdf"),
        "vendor-b/pdf/SKILL.md": md("pdf"),
        "vendor-b/agents.yaml": "reader:\n  intent: {inline: Read PDFs.}\n"
        "  model: openai/gpt-4.1\n  skills: [pdf, elsewhere]\n",
    }
    r = import_tree(tmp_path, files)
    assert r.errors == ["vendor-b/pdf/SKILL.md:2: Skill 'pdf' is defined twice (first at "
                        "vendor-a/pdf/SKILL.md:2)"]  # fmt: skip
    r = import_tree(tmp_path, prefixes=((Path("vendor-a"), "a"), (Path("vendor-b"), "b")))
    assert not r.errors
    assert {n for k, n in r.objects if k == "Skill"} == {"a-pdf", "b-pdf"}
    assert ("Agent", "b-reader") in r.objects
    assert r.spec("Agent", "b-reader")["skills"] == ["b-pdf", "elsewhere"]
    ann = r.objects[("Skill", "b-pdf")]["metadata"]["annotations"]  # type: ignore[index]
    assert ann["swarmkit.dev/source-name"] == "pdf"  # type: ignore[index]


def test_prefix_is_a_cli_option(tmp_path: Path) -> None:
    src = write_tree(tmp_path / "src", {"c1/pdf/SKILL.md": md("pdf"), "c2/pdf/SKILL.md": md("pdf")})
    res = run_cli(
        "import", str(src), "--prefix", f"{src / 'c1'}=one", "--prefix", f"{src / 'c2'}=two"
    )
    assert res.code == 0, res.err
    names = {d["metadata"]["name"] for d in yaml.safe_load_all(res.out)}
    assert names == {"one-pdf", "two-pdf"}
    assert run_cli("import", str(src), "--prefix", "c1").code == 2


def test_importing_nothing_exits_1_with_the_reason(tmp_path: Path) -> None:
    src = write_tree(tmp_path, {"README.md": "# notes\n", ".git/HEAD": "ref\n"})
    res = run_cli("import", str(src))
    assert res.code == 1
    assert "imported nothing: no SwarmKit document, Swarm file or SKILL.md directory" in res.err
    assert "hidden directories are searched" in res.err


def test_strict_is_about_the_users_data_not_readmes(tmp_path: Path) -> None:
    src = write_tree(
        tmp_path,
        {
            "README.md": "# notes\n",
            "LICENSE": "MIT\n",
            "skills/x/SKILL.md": md("x"),
            "scripts/setup.sh": "#!/bin/sh\n",
        },
    )
    res = run_cli("import", str(src), "--strict")
    assert res.code == 0, res.err
    assert "passed over 3 file(s) of no source format" in res.err


def test_the_size_estimate_is_an_upper_bound_close_to_the_operators_render(
    tmp_path: Path,
) -> None:
    """The importer cannot import the operator (layers); it estimates. The estimate must
    never be under what the operator renders (or a TooLarge would slip through), and close
    enough not to refuse what fits."""
    from swarmkit_cli.importer.sizes import rendered_skill_bytes
    from swarmkit_operator.builders import ObjectRef
    from swarmkit_operator.builders.skill import SourceConfigMap, render_skill
    from swarmkit_operator.config import OperatorConfig

    files: dict[str, str | bytes] = {
        "skills/s/SKILL.md": md("s") + "Long instructions.\n" * 3000,
        "skills/s/reference/a.md": "reference text, " * 20000,
        "skills/s/scripts/run.py": "print('x')\n" * 500,
        "skills/s/assets/logo.png": os.urandom(50_000),
    }
    r = import_tree(tmp_path, files)
    spec = r.spec("Skill", "s")
    maps = {
        n: SourceConfigMap(binary_data=m["binaryData"])  # type: ignore[arg-type,index]
        for (k, n), m in r.objects.items()
        if k == "ConfigMap"
    }
    render = render_skill(ObjectRef("Skill", "s", "ns", "uid"), spec, maps, OperatorConfig())
    assert render.size is not None and render.size > 400_000
    estimate = rendered_skill_bytes(spec, 50_000)
    assert render.size <= estimate <= render.size * 1.02
