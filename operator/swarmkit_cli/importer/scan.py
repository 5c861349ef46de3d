"""Find and classify the source files under the PATHs given to ``import``.

A directory holding ``SKILL.md`` is a VectorStep skill (nothing below it is read
separately). A YAML document with ``apiVersion: swarmkit/v1`` is dispatched by ``kind``;
otherwise the file name decides (``workspace.yaml``, ``tools.yaml``, ``policy.yaml``,
``agents.yaml``). Anything else is reported as skipped. Hidden files and directories
(``.git``, editor state) are not sources and are passed over without a word.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from . import swarm, swarmkit
from .collected import Collected
from .mapping import Src
from .skilldir import SKILL_MD, is_skill_dir
from .vectorstep import read_skill_dir
from .yamlsrc import Doc, YamlError, load_docs

Reader = Callable[[Collected, Src], None]
BY_KIND: dict[str, Reader] = {
    "Skill": swarmkit.read_skill,
    "Archetype": swarmkit.read_archetype,
    "Topology": swarmkit.read_topology,
    "Workspace": swarmkit.read_workspace,
}
BY_FILE: dict[str, Reader] = {
    "workspace": swarmkit.read_workspace,
    "tools": swarm.read_tools,
    "policy": swarm.read_policy,
    "agents": swarm.read_agents,
}
YAML_SUFFIXES = (".yaml", ".yml")


def shown_path(path: Path) -> str:
    """How a file is named in findings: relative to the working directory when inside it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def scan(col: Collected, paths: list[Path]) -> None:
    for path in paths:
        if not path.exists():
            col.report.error(shown_path(path), None, "", "no such file or directory")
        elif path.is_dir():
            _walk(col, path)
        elif path.name == SKILL_MD:
            read_skill_dir(col, path.parent, shown_path(path))
        else:
            read_file(col, path)


def _walk(col: Collected, root: Path) -> None:
    if is_skill_dir(root):
        read_skill_dir(col, root, shown_path(root / SKILL_MD))
        return
    for dirpath, dirs, files in os.walk(root):
        here = Path(dirpath)
        keep = []
        for d in sorted(dirs):
            if d.startswith("."):
                continue
            if is_skill_dir(here / d):
                read_skill_dir(col, here / d, shown_path(here / d / SKILL_MD))
            else:
                keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            if not name.startswith("."):
                read_file(col, here / name)


def read_file(col: Collected, path: Path) -> None:
    shown = shown_path(path)
    if path.suffix not in YAML_SUFFIXES:
        col.report.warn(shown, None, "", "not a source format import reads; skipped")
        return
    try:
        docs = load_docs(path.read_text(encoding="utf-8"), shown)
    except YamlError as exc:
        col.report.error(exc.file, exc.line, "", exc.message)
        return
    except UnicodeDecodeError:
        col.report.error(shown, None, "", "not UTF-8 text")
        return
    for doc in docs:
        for dup, line in doc.duplicates:
            col.report.warn(
                shown, line, ".".join(map(str, dup)), "duplicate key: the last one wins"
            )
        reader = classify(col, doc, path)
        if reader is None:
            continue
        reader(col, Src(doc))


def classify(col: Collected, doc: Doc, path: Path) -> Reader | None:
    """The reader for ``doc``, or None (reported as skipped)."""
    value = doc.value
    if not isinstance(value, dict):
        col.report.warn(doc.file, doc.start_line, "", "expected a mapping at the top; skipped")
        return None
    api = value.get("apiVersion")
    if api == swarmkit.SWARMKIT_API:
        reader = BY_KIND.get(str(value.get("kind")))
        if reader is None:
            col.report.warn(
                doc.file,
                doc.line("kind"),
                "kind",
                f"kind {value.get('kind')!r} of swarmkit/v1 is not imported "
                f"(known: {', '.join(BY_KIND)}); skipped",
            )
        return reader
    if isinstance(api, str) and api.startswith("swarmkit.dev/"):
        col.report.warn(
            doc.file,
            doc.line("apiVersion"),
            "apiVersion",
            "already a swarmkit.dev manifest; apply it as it is; skipped",
        )
        return None
    reader = BY_FILE.get(path.stem)
    if reader is None:
        col.report.warn(
            doc.file,
            doc.start_line,
            "",
            "not a recognized source document (no apiVersion swarmkit/v1, and not "
            "workspace.yaml, tools.yaml, policy.yaml or agents.yaml); skipped",
        )
    return reader
