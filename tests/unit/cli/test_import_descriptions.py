"""``import`` of skills whose description is longer than the Agent Skills limit (1,024
characters): imported, cut at the limit, the remainder opening the instructions, a warning
naming both lengths (docs/how-to/import.md, "Descriptions over the limit")."""

from __future__ import annotations

from pathlib import Path

from swarmkit_api import validate_manifest
from swarmkit_api.skill import MAX_DESCRIPTION_CHARS
from swarmkit_cli.importer.description import CONTINUED

from .support import import_tree

#: 1,400 characters of words, as long descriptions are written (claude-api's is 1,300+).
LONG = " ".join(f"word{i:03d}" for i in range(175))


def _words(text: str) -> list[str]:
    return text.replace(CONTINUED.strip(), " ").split()


def test_a_long_agent_skills_description_is_cut_and_the_rest_opens_the_instructions(
    tmp_path: Path,
) -> None:
    md = f"---\nname: long\ndescription: {LONG}\n---\n\n# Long\n\nDo the thing.\n"
    r = import_tree(tmp_path, {"skills/long/SKILL.md": md})
    assert not r.errors
    manifest = r.objects[("Skill", "long")]
    validate_manifest(manifest)  # the CRD's maxLength holds
    spec = r.spec("Skill", "long")
    description, instructions = str(spec["description"]), str(spec["instructions"])
    assert len(LONG) > MAX_DESCRIPTION_CHARS
    assert MAX_DESCRIPTION_CHARS - 200 < len(description) <= MAX_DESCRIPTION_CHARS
    assert LONG.startswith(description)
    assert instructions.startswith(CONTINUED)
    assert instructions.rstrip().endswith("Do the thing.")
    # Nothing is lost and no word is split: the two parts are the whole description.
    carried = instructions.split("\n\n", 1)[0]
    assert _words(description) + _words(carried) == LONG.split()
    assert r.warnings == [
        f"skills/long/SKILL.md:3: description: {len(LONG):,} characters, over the 1,024 the "
        f"Agent Skills specification allows: imported cut at {len(description):,}; the other "
        f"{len(LONG) - len(description) - 1:,} open the instructions (loaded with load_skill)"
    ]


def test_a_description_at_the_limit_is_kept_as_it_is(tmp_path: Path) -> None:
    exact = ("x" * 9 + " ") * 102 + "abcd"
    assert len(exact) == MAX_DESCRIPTION_CHARS
    md = f"---\nname: exact\ndescription: {exact}\n---\nBody.\n"
    r = import_tree(tmp_path, {"skills/exact/SKILL.md": md})
    assert not r.findings
    assert r.spec("Skill", "exact")["description"] == exact
    assert r.spec("Skill", "exact")["instructions"] == "Body.\n"


def test_a_long_description_without_spaces_is_cut_at_the_limit(tmp_path: Path) -> None:
    solid = "y" * 1500
    md = f"---\nname: solid\ndescription: {solid}\n---\n"
    r = import_tree(tmp_path, {"skills/solid/SKILL.md": md})
    assert not r.errors
    spec = r.spec("Skill", "solid")
    assert spec["description"] == "y" * MAX_DESCRIPTION_CHARS
    assert spec["instructions"] == CONTINUED + "y" * (1500 - MAX_DESCRIPTION_CHARS)
    validate_manifest(r.objects[("Skill", "solid")])


def test_a_long_swarmkit_skill_description_is_cut_the_same_way(tmp_path: Path) -> None:
    doc = (
        "apiVersion: swarmkit/v1\nkind: Skill\n"
        f"metadata: {{id: s1, name: Skill One, description: {LONG}}}\n"
        "category: capability\nimplementation: {type: llm_prompt, prompt: Do it.}\n"
        "provenance: {authored_by: human, version: 1.0.0}\ninstructions: Step one.\n"
    )
    r = import_tree(tmp_path, {"skills/s1.yaml": doc})
    assert not r.errors
    validate_manifest(r.objects[("Skill", "s1")])
    spec = r.spec("Skill", "s1")
    assert len(str(spec["description"])) <= MAX_DESCRIPTION_CHARS
    assert str(spec["instructions"]).startswith(CONTINUED)
    assert str(spec["instructions"]).endswith("\n\nStep one.")
    assert len(r.warnings) == 1 and "skills/s1.yaml:3: metadata:" in r.warnings[0]


def test_the_level_one_catalog_of_a_cut_skill_stays_within_the_limit(tmp_path: Path) -> None:
    # The runner's level-1 catalog (one line per granted skill) of the imported skill: the
    # description is at most 1,024 characters, the carried rest is only in load_skill's body.
    from swarmkit_api.bundle import BundleSkill
    from swarmkit_api.skill import SkillSpec
    from swarmkit_runner.skills import catalog_section

    md = f"---\nname: long\ndescription: {LONG}\n---\nBody.\n"
    r = import_tree(tmp_path, {"skills/long/SKILL.md": md})
    spec = SkillSpec.model_validate(r.spec("Skill", "long"))
    skill = BundleSkill(name="long", content_hash="0" * 64, spec=spec, directory="/skills/long")
    (line,) = [ln for ln in catalog_section([skill]).splitlines() if ln.startswith("- long:")]
    assert len(line) <= len("- long: ") + MAX_DESCRIPTION_CHARS
    assert "word174" not in line and "word174" in spec.instructions
