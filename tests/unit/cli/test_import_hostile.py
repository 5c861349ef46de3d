"""``import`` on a hostile folder (issue 46 item 8): no symlink is ever followed, files or
directories, and the warning says so truthfully; YAML is read with a bounded loader, so a
billion-laughs document or a recursive alias is a clear error naming the file, in
milliseconds and a few megabytes, never a MemoryError."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from swarmkit_cli.importer.yamlsrc import MAX_NODES, YamlError, load_docs

from .support import import_tree, write_tree

OUTSIDE_SKILL = "---\nname: {name}\ndescription: Secret skill from outside the tree.\n---\nSECRET\n"
LINK = "a symlink: not followed; not imported"


def billion_laughs(levels: int = 12) -> str:
    """The classic alias bomb: each level lists the previous one ten times."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_a_symlinked_skill_md_is_not_imported(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_tree(outside, {"x/SKILL.md": OUTSIDE_SKILL.format(name="x")})
    tree = tmp_path / "tree"
    (tree / "skills/x").mkdir(parents=True)
    os.symlink(outside / "x/SKILL.md", tree / "skills/x/SKILL.md")
    r = import_tree(tree)
    assert ("Skill", "x") not in r.objects
    assert r.warnings == [f"skills/x/SKILL.md: {LINK}; the skill is not imported"]


def test_a_symlinked_directory_and_file_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_tree(
        outside,
        {
            "y/SKILL.md": OUTSIDE_SKILL.format(name="y"),
            "workspace.yaml": "apiVersion: swarmkit/v1\nkind: Workspace\nmetadata: {id: evil}\n",
        },
    )
    tree = tmp_path / "tree"
    write_tree(
        tree, {"skills/z/SKILL.md": "---\nname: z\ndescription: Use when testing.\n---\nb\n"}
    )
    os.symlink(outside / "y", tree / "skills/y")
    os.symlink(outside / "workspace.yaml", tree / "workspace.yaml")
    r = import_tree(tree)
    assert [k for k in r.objects if k[0] == "Skill"] == [("Skill", "z")]
    assert ("Workspace", "evil") not in r.objects
    assert sorted(r.warnings) == [f"skills/y: {LINK}", f"workspace.yaml: {LINK}"]


def test_a_file_referenced_through_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_tree(outside, {"triage.md": "You triage. SECRET"})
    tree = tmp_path / "tree"
    write_tree(
        tree,
        {
            "package.yaml": "name: p\nversion: 1.0.0\n",
            "agents.yaml": "triage:\n  type: generic\n  intent: prompts/triage.md\n"
            "  model: anthropic/claude-sonnet-4\n",
        },
    )
    os.symlink(outside, tree / "prompts")
    r = import_tree(tree)
    assert any("prompts: a symlink: not followed; not imported" in e for e in r.errors), r.errors
    assert all("SECRET" not in str(m) for m in r.objects.values())


def test_a_fifo_in_a_skill_is_refused_not_waited_on(tmp_path: Path) -> None:
    write_tree(tmp_path, {"skills/f/SKILL.md": "---\nname: f\ndescription: d\n---\nb\n"})
    os.mkfifo(tmp_path / "skills/f/pipe")
    r = import_tree(tmp_path)
    assert r.errors == [
        "skills/f/pipe: not a regular file; not imported; the skill is not imported"
    ]


def test_a_billion_laughs_skill_md_is_a_clear_error_in_bounded_memory(tmp_path: Path) -> None:
    bomb = billion_laughs()
    assert len(bomb.splitlines()) == 12  # 10**11 values once expanded
    write_tree(tmp_path, {"skills/b/SKILL.md": f"---\nname: b\ndescription: d\n{bomb}---\nb\n"})
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        r = import_tree(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.monotonic() - t0
    assert r.errors == [
        f"skills/b/SKILL.md:2: front matter: more than {MAX_NODES} values once its aliases "
        "are expanded (an alias bomb?); not read"
    ]
    assert ("Skill", "b") not in r.objects
    assert peak < 50 * 1024 * 1024, peak
    assert elapsed < 10, elapsed


def test_a_billion_laughs_workspace_yaml_fails_the_cli_with_one_line(tmp_path: Path) -> None:
    write_tree(tmp_path, {"workspace.yaml": billion_laughs(13)})
    proc = subprocess.run(
        [sys.executable, "-m", "swarmkit_cli", "import", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    assert "workspace.yaml:1: more than" in proc.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &a [*a]\n", "an alias refers to itself"),
        ("x: " + "[" * 150 + "]" * 150 + "\n", "nested deeper than 100 levels"),
    ],
)
def test_recursive_and_deep_documents_are_refused(text: str, message: str) -> None:
    with pytest.raises(YamlError, match=message) as info:
        load_docs(text, "hostile.yaml")
    assert info.value.file == "hostile.yaml"


def test_an_oversized_document_is_refused_before_parsing() -> None:
    with pytest.raises(YamlError, match="over the 4194304-byte limit"):
        load_docs("x: " + "a" * (4 * 1024 * 1024), "big.yaml")


def test_shared_anchors_below_the_cap_still_load() -> None:
    docs = load_docs("base: &b {k: v}\none: *b\ntwo: *b\n", "ok.yaml")
    assert docs[0].value == {"base": {"k": "v"}, "one": {"k": "v"}, "two": {"k": "v"}}
