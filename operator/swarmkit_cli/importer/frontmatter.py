"""SKILL.md: YAML front matter between ``---`` lines, then the Markdown body."""

from __future__ import annotations

from dataclasses import dataclass

from .yamlsrc import Doc, load_docs


@dataclass(frozen=True)
class SkillMarkdown:
    front: Doc | None  # None when the file has no front matter
    body: str


def parse_skill_md(text: str, file: str) -> SkillMarkdown:
    """Split SKILL.md; the front matter's lines are numbered as in the file.

    Raises :class:`~.yamlsrc.YamlError` for invalid front matter or a missing closing
    ``---``.
    """
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return SkillMarkdown(None, text)
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            front_text = "".join(lines[1:i])
            body = "".join(lines[i + 1 :])
            docs = load_docs(front_text, file, line_offset=1)
            front = docs[0] if docs else Doc(file, {}, start_line=2)
            return SkillMarkdown(front, body.lstrip("\n"))
    from .yamlsrc import YamlError

    raise YamlError(file, 1, "front matter starts with --- but never ends (no closing ---)")
