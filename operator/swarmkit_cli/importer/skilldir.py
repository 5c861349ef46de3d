"""A VectorStep skill directory on disk: ``SKILL.md`` (front matter + body) and its files.

Shared by ``import`` (which maps it to a Skill) and ``pin`` (which hashes its scripts), so
both agree on which files are scripts: anything under ``scripts/`` or with an executable
bit, the same rule the operator applies (``SkillFile.is_script``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .safefs import read_bytes

SKILL_MD = "SKILL.md"
SCRIPTS_DIR = "scripts/"
#: Directories and files that are tooling noise, never skill content.
IGNORED_NAMES = frozenset({".git", "__pycache__", ".DS_Store", ".pytest_cache", ".mypy_cache"})


@dataclass(frozen=True)
class BundledFile:
    """One file of the skill directory other than SKILL.md."""

    path: str  # relative, POSIX separators
    data: bytes
    executable: bool

    @property
    def is_script(self) -> bool:
        return self.executable or self.path.startswith(SCRIPTS_DIR)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def text(self) -> str | None:
        """The content as UTF-8 text, or None for a binary file."""
        if b"\x00" in self.data:
            return None
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


def is_skill_dir(path: Path) -> bool:
    """A directory holding SKILL.md (a symlinked SKILL.md counts: it is refused when read,
    so that the directory is reported as a skill not imported, not read file by file)."""
    skill_md = path / SKILL_MD
    return skill_md.is_symlink() or skill_md.is_file()


def bundled_files(skill_dir: Path) -> list[BundledFile]:
    """Every regular file under ``skill_dir`` except SKILL.md, sorted by path.

    Symlinks are skipped (a link could point outside the skill; :func:`symlinks` lists them
    for the caller to report); hidden tooling directories too. Each file is read without
    following a link and within the size cap (:class:`~.safefs.Refused` otherwise: a
    special file, a file too large).
    """
    found: list[BundledFile] = []
    for root, dirs, files in os.walk(skill_dir):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_NAMES)
        for name in sorted(files):
            full = Path(root) / name
            rel = full.relative_to(skill_dir).as_posix()
            if rel == SKILL_MD or name in IGNORED_NAMES or full.is_symlink():
                continue
            mode = full.lstat().st_mode
            found.append(BundledFile(rel, read_bytes(full), bool(mode & 0o111)))
    return sorted(found, key=lambda f: f.path)


def symlinks(skill_dir: Path) -> list[str]:
    """Relative paths of symlinks inside the skill (reported, never followed)."""
    out = []
    for root, dirs, files in os.walk(skill_dir):
        dirs[:] = [d for d in dirs if d not in IGNORED_NAMES]
        for name in dirs + files:
            full = Path(root) / name
            if full.is_symlink():
                out.append(full.relative_to(skill_dir).as_posix())
    return sorted(out)


def scripts(skill_dir: Path) -> list[BundledFile]:
    return [f for f in bundled_files(skill_dir) if f.is_script]
