"""VectorStep skill directories (``skills/<name>/SKILL.md`` + bundled files) → Skills.

Front matter ``name`` (must equal the directory name) → ``metadata.name``; ``description``
→ ``spec.description``; the Markdown body → ``spec.instructions``; every other file →
``spec.files`` (UTF-8 text inline; binary files base64 in a generated ConfigMap
``<skill>-files`` referenced by ``configMapRef``). VectorStep skills have no category or
provenance: they import as ``capability``, authored by ``human``, version from the front
matter's ``version`` (default ``1.0.0``).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from swarmkit_api.skill import SkillSpec

from .collected import Collected, Piece, source_annotation
from .frontmatter import parse_skill_md
from .mapping import Fields, Src, check
from .skilldir import SKILL_MD, bundled_files, symlinks
from .yamlsrc import Doc, YamlError

DEFAULT_VERSION = "1.0.0"
FRONT_FIELDS = "name, description, version, category, authored_by"


def skill_name_of(skill_dir: Path) -> str:
    """The skill's name: front-matter ``name``, else the directory name."""
    try:
        md = parse_skill_md((skill_dir / SKILL_MD).read_text(encoding="utf-8"), str(skill_dir))
    except (YamlError, UnicodeDecodeError):
        return skill_dir.resolve().name
    if md.front is not None and isinstance(md.front.value, dict):
        name = md.front.value.get("name")
        if isinstance(name, str) and name:
            return name
    return skill_dir.resolve().name


def read_skill_dir(col: Collected, skill_dir: Path, shown: str) -> None:
    """Map one SKILL.md directory; ``shown`` is how its SKILL.md is named in findings."""
    report = col.report
    dir_name = skill_dir.resolve().name
    try:
        text = (skill_dir / SKILL_MD).read_text(encoding="utf-8")
        md = parse_skill_md(text, shown)
    except UnicodeDecodeError:
        report.error(shown, None, "", "SKILL.md is not UTF-8 text")
        return
    except YamlError as exc:
        report.error(exc.file, exc.line, "front matter", exc.message)
        return
    doc = md.front or Doc(shown, {}, start_line=1)
    if md.front is None:
        report.error(
            shown, 1, "front matter", "SKILL.md needs YAML front matter (--- name, description ---)"
        )
        return
    for path, line in doc.duplicates:
        report.warn(shown, line, ".".join(map(str, path)), "duplicate key: the last one wins")
    f = Fields(report, Src(doc))
    name = f.take("name")
    description = f.take("description")
    version = f.take("version", DEFAULT_VERSION)
    category = f.take("category", "capability")
    authored_by = f.take("authored_by", "human")
    f.finish(FRONT_FIELDS)
    if name is None:
        f.error(None, "name is required")
        return
    if name != dir_name:
        f.error("name", f"must match the directory name {dir_name!r}, got {name!r}")
        return
    if description is None:
        f.error(None, "description is required (write it like a router: when to use it)")
        return
    spec: dict[str, Any] = {
        "description": description.strip() if isinstance(description, str) else description,
        "category": category,
        "provenance": {"authoredBy": authored_by, "version": str(version)},
        "instructions": md.body,
    }
    files: list[dict[str, Any]] = []
    binary: dict[str, str] = {}
    for link in symlinks(skill_dir):
        report.warn(
            f"{Path(shown).parent / link}",
            None,
            "",
            "symlink inside a skill is not followed; not imported",
        )
    for bf in bundled_files(skill_dir):
        entry: dict[str, Any] = {"path": bf.path}
        content = bf.text()
        if content is None:
            key = "f" + str(len(binary)) + "." + bf.path.rsplit("/", 1)[-1]
            key = "".join(c if c.isalnum() or c in "-._" else "-" for c in key)
            binary[key] = base64.b64encode(bf.data).decode("ascii")
            entry["configMapRef"] = {"name": f"{name}-files", "key": key}
        else:
            entry["content"] = content
        if bf.executable and not bf.path.startswith("scripts/"):
            entry["executable"] = True
        files.append(entry)
    if files:
        spec["files"] = files
    src = Src(doc)
    if not check(report, SkillSpec, spec, src, f"Skill {name!r}"):
        return
    col.skills.append(Piece(str(name), spec, src, source_annotation(src)))
    if binary:
        col.config_maps.append(
            Piece(f"{name}-files", {"binaryData": binary}, src, source_annotation(src))
        )
