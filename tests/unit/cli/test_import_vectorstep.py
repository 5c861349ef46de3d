"""``import`` of VectorStep skill directories: one test per row of docs/how-to/import.md's table."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from swarmkit_api import validate_manifest

from .support import INCIDENT_TRIAGE, import_tree

SKILL_MD = """---
name: triage
description: >
  Use when the user reports an incident.
---

# Triage

Ask for the service.
"""


def test_front_matter_name_is_the_skill_name(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/triage/SKILL.md": SKILL_MD})
    assert not r.findings
    assert ("Skill", "triage") in r.objects


def test_name_must_match_the_directory(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/other/SKILL.md": SKILL_MD})
    assert r.errors == [
        "skills/other/SKILL.md:2: name: must match the directory name 'other', got 'triage'"
    ]
    assert not r.objects


def test_description_comes_from_the_front_matter(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/triage/SKILL.md": SKILL_MD})
    assert r.spec("Skill", "triage")["description"] == "Use when the user reports an incident."


def test_a_missing_description_is_an_error(tmp_path: Path) -> None:
    md = "---\nname: triage\n---\nbody\n"
    r = import_tree(tmp_path, {"skills/triage/SKILL.md": md})
    assert r.errors == [
        "skills/triage/SKILL.md:2: description is required (write it like a router: when to use it)"
    ]


def test_missing_front_matter_is_an_error(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/triage/SKILL.md": "# Triage\n"})
    assert r.errors == [
        "skills/triage/SKILL.md:1: front matter: SKILL.md needs YAML front matter "
        "(--- name, description ---)"
    ]


def test_the_body_becomes_the_instructions(tmp_path: Path) -> None:
    r = import_tree(tmp_path, {"skills/triage/SKILL.md": SKILL_MD})
    assert r.spec("Skill", "triage")["instructions"] == "# Triage\n\nAsk for the service.\n"


def test_text_files_are_bundled_inline_with_their_paths(tmp_path: Path) -> None:
    r = import_tree(
        tmp_path,
        {
            "skills/triage/SKILL.md": SKILL_MD,
            "skills/triage/reference/matrix.md": "| sev |\n",
            "skills/triage/scripts/classify.py": "print('Sev2')\n",
        },
    )
    assert r.spec("Skill", "triage")["files"] == [
        {"path": "reference/matrix.md", "content": "| sev |\n"},
        {"path": "scripts/classify.py", "content": "print('Sev2')\n"},
    ]


def test_binary_files_go_base64_into_a_generated_config_map(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    r = import_tree(
        tmp_path, {"skills/triage/SKILL.md": SKILL_MD, "skills/triage/assets/logo.png": png}
    )
    (entry,) = r.spec("Skill", "triage")["files"]  # type: ignore[misc]
    assert entry["path"] == "assets/logo.png"
    ref = entry["configMapRef"]
    cm = r.objects[("ConfigMap", "triage-files")]
    assert ref["name"] == "triage-files"
    assert base64.b64decode(cm["binaryData"][ref["key"]]) == png  # type: ignore[index]
    assert cm["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "0"  # type: ignore[index]


def test_an_executable_file_outside_scripts_is_marked_executable(tmp_path: Path) -> None:
    import_tree(
        tmp_path,
        {"skills/triage/SKILL.md": SKILL_MD, "skills/triage/bin/collect.sh": "#!/bin/sh\n"},
    )
    (tmp_path / "skills/triage/bin/collect.sh").chmod(0o755)
    r = import_tree(tmp_path)
    assert r.spec("Skill", "triage")["files"] == [
        {"path": "bin/collect.sh", "content": "#!/bin/sh\n", "executable": True}
    ]


def test_category_and_provenance_default_and_can_be_set_in_front_matter(tmp_path: Path) -> None:
    r = import_tree(tmp_path / "a", {"skills/triage/SKILL.md": SKILL_MD})
    spec = r.spec("Skill", "triage")
    assert spec["category"] == "capability"
    assert spec["provenance"] == {"authoredBy": "human", "version": "1.0.0"}
    md = SKILL_MD.replace(
        "name: triage\n",
        "name: triage\nversion: 2.1.0\ncategory: persistence\nauthored_by: vendor_published\n",
    )
    r = import_tree(tmp_path / "b", {"skills/triage/SKILL.md": md})
    spec = r.spec("Skill", "triage")
    assert spec["category"] == "persistence"
    assert spec["provenance"] == {"authoredBy": "vendor_published", "version": "2.1.0"}


def test_the_seed_skill_directory_keeps_its_script_bytes() -> None:
    r = import_tree(INCIDENT_TRIAGE)
    assert not r.findings
    skill = r.objects[("Skill", "incident-triage")]
    validate_manifest(skill)
    files = {f["path"]: f["content"] for f in skill["spec"]["files"]}  # type: ignore[index]
    script = (INCIDENT_TRIAGE / "scripts" / "classify_severity.py").read_bytes()
    assert hashlib.sha256(files["scripts/classify_severity.py"].encode()).digest() == (
        hashlib.sha256(script).digest()
    )


def test_agent_skills_front_matter_is_kept_as_annotations(tmp_path: Path) -> None:
    md = SKILL_MD.replace(
        "name: triage\n",
        "name: triage\nlicense: Apache-2.0\ncompatibility: Requires git and jq\n"
        "metadata:\n  author: sre-team\n  version: '1.4.0'\n"
        "allowed-tools: Bash(git:*) Read\n",
    )
    r = import_tree(tmp_path, {"skills/triage/SKILL.md": md})
    assert not r.findings
    ann = r.objects[("Skill", "triage")]["metadata"]["annotations"]  # type: ignore[index]
    assert {k: v for k, v in ann.items() if k.startswith("agentskills.io/")} == {  # type: ignore[union-attr]
        "agentskills.io/license": "Apache-2.0",
        "agentskills.io/compatibility": "Requires git and jq",
        "agentskills.io/allowed-tools": "Bash(git:*) Read",
        "agentskills.io/metadata.author": "sre-team",
        "agentskills.io/metadata.version": "1.4.0",
    }
    # metadata.version is the skill's version when the front matter has no version of its own
    assert r.spec("Skill", "triage")["provenance"] == {"authoredBy": "human", "version": "1.4.0"}
    validate_manifest(r.objects[("Skill", "triage")])


def test_names_the_specification_forbids_are_errors(tmp_path: Path) -> None:
    for i, bad in enumerate(("pdf--tools", "-pdf", "Pdf")):
        md = SKILL_MD.replace("name: triage", f"name: {bad}")
        r = import_tree(tmp_path / str(i), {f"skills/{bad}/SKILL.md": md})
        (e,) = r.errors
        assert "1-64 lowercase letters, digits and single hyphens" in e, bad


def test_the_fixture_collection_imports_with_its_licence_and_binary_asset() -> None:
    from .support import FIXTURES

    r = import_tree(FIXTURES / "vectorstep")
    assert not r.findings
    assert set(r.objects) == {
        ("Skill", "incident-triage"),
        ("Skill", "release-notes"),
        ("ConfigMap", "release-notes-files"),
    }
    notes = r.objects[("Skill", "release-notes")]
    ann = notes["metadata"]["annotations"]  # type: ignore[index]
    assert ann["agentskills.io/license"] == "Proprietary. LICENSE.txt has complete terms"  # type: ignore[index]
    paths = [f["path"] for f in notes["spec"]["files"]]  # type: ignore[index]
    assert paths == ["LICENSE.txt", "assets/logo.png"]
