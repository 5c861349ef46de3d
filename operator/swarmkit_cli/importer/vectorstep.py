"""VectorStep skill directories (``skills/<name>/SKILL.md`` + bundled files) → Skills."""

from __future__ import annotations

from pathlib import Path

from .frontmatter import parse_skill_md
from .skilldir import SKILL_MD
from .yamlsrc import YamlError


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
