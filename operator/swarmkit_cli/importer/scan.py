"""Find and classify the source files under the PATHs given to ``import``.

A directory holding ``SKILL.md`` is an Agent Skills (VectorStep) skill (nothing below it is
read separately). A YAML document with ``apiVersion: swarmkit/v1`` is dispatched by
``kind``; otherwise the file name decides (SwarmKit's ``workspace.yaml``, Swarm's
``agents.yaml``, ``tools.yaml``, ``policy.yaml`` and ``package.yaml``). Workspace documents
(and Swarm's ``package.yaml``) are read first, so every other object already knows the
Workspace's name.

Hidden directories are searched (Agent Skills collections live in ``.claude/skills`` and
the like, ``.github/skills`` too) except tooling state (``.git``, ``.venv``, caches) and CI
workflows. Files of no source format
(READMEs, scripts beside a workspace) are counted in one note, not warned about one by one;
SwarmKit kinds and Swarm files with no equivalent are reported once per kind.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from . import swarm, swarmkit, swarmkit_agents, swarmkit_ws
from .collected import Collected
from .mapping import Src
from .safefs import SYMLINK, Refused, read_text
from .skilldir import SKILL_MD, is_skill_dir
from .vectorstep import read_skill_dir
from .yamlsrc import Doc, YamlError, load_docs

Reader = Callable[[Collected, Src], None]
BY_KIND: dict[str, Reader] = {
    "Skill": swarmkit.read_skill,
    "Archetype": swarmkit_agents.read_archetype,
    "Topology": swarmkit_agents.read_topology,
    "Workspace": swarmkit_ws.read_workspace,
}
BY_FILE: dict[str, Reader] = {
    "workspace": swarmkit_ws.read_workspace,
    "tools": swarm.read_tools,
    "policy": swarm.read_policy,
    "agents": swarm.read_agents,
    "package": swarm.read_package,
}
#: SwarmKit kinds with no swarmkit.dev equivalent, and what to do instead.
OTHER_KINDS = {
    "Trigger": "start Runs from the event source, or give the Topology a cron schedule",
    "Funnel": "gate an agent's output with a decision skill or a human Review",
    "EvalSet": "run evaluations against a Run's output outside the cluster",
    "Contract": "express the contract as a decision skill's outputs schema",
    "ApprovalPolicy": "use Reviews (kubectl swarmkit review) and RBAC on them",
    "RoleRegistry": "map roles to Kubernetes users and groups with RBAC",
    "ExecutorAdapter": "agents run in the runner image; harness adapters are not supported",
}
#: Swarm flow files that describe event-driven state machines (no equivalent here).
SWARM_FLOW_FILES = {
    "schema": "a flow's pins and state machine",
    "nodes": "system nodes and their event handlers",
    "events": "event payload declarations",
    "entities": "entity contracts",
    "types": "shared named types",
}
#: Tooling state, never sources.
NOISE_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".cache",
        ".idea",
        ".vscode",
        ".swarmkit",
    }
)
YAML_SUFFIXES = (".yaml", ".yml")


def shown_path(path: Path) -> str:
    """How a file is named in findings: relative to the working directory when inside it."""
    # The parent is resolved, never the file itself: a symlink is named as the link.
    try:
        return (path.parent.resolve() / path.name).relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


class _Scan:
    """One pass over the PATHs: the documents to read, in the order they are read."""

    def __init__(self, col: Collected) -> None:
        self.col = col
        self.first: list[tuple[Reader, Src]] = []  # Workspace documents
        self.rest: list[Callable[[], None]] = []
        self.passed_over: list[str] = []
        self.unrecognized: list[Doc] = []
        self.other_kinds: dict[str, list[Doc]] = {}
        self.flow_files: dict[str, list[str]] = {}

    def walk(self, root: Path) -> None:
        if is_skill_dir(root):
            self.skill_dir(root, shown_path(root / SKILL_MD))
            return
        for dirpath, dirs, files in os.walk(root):
            here = Path(dirpath)
            keep = []
            for d in sorted(dirs):
                if (here / d).is_symlink():
                    self.col.report.warn(shown_path(here / d), None, "", SYMLINK)
                    continue
                if d in NOISE_DIRS or (here.name == ".github" and d == "workflows"):
                    # .github/skills holds skills; its workflows are CI configuration
                    continue
                if d == "runtime" and (here / "package.yaml").is_file():
                    # Swarm's generated flat copy of the whole bundle: reading it would
                    # define every agent and tool twice.
                    self.col.report.note(
                        f"{shown_path(here / d)}/: Swarm's generated merged copy of the "
                        "bundle; not read (the flows are)"
                    )
                    continue
                if is_skill_dir(here / d):
                    self.skill_dir(here / d, shown_path(here / d / SKILL_MD))
                else:
                    keep.append(d)
            dirs[:] = keep
            for name in sorted(files):
                if (here / name).is_symlink():
                    self.col.report.warn(shown_path(here / name), None, "", SYMLINK)
                    continue
                self.file(here / name)

    def skill_dir(self, path: Path, shown: str) -> None:
        col = self.col
        self.rest.append(lambda: read_skill_dir(col, path, shown))

    def file(self, path: Path) -> None:
        col = self.col
        shown = shown_path(path)
        if path.suffix not in YAML_SUFFIXES:
            self.passed_over.append(shown)
            return
        try:
            docs = load_docs(read_text(path), shown)
        except Refused as exc:
            col.report.error(shown, None, "", exc.reason)
            return
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
            reader = self.classify(doc, path)
            if reader is None:
                continue
            if reader in (swarmkit_ws.read_workspace, swarm.read_package):
                self.first.append((reader, Src(doc)))
            else:
                self.rest.append(lambda r=reader, d=doc: r(col, Src(d)))  # type: ignore[misc]

    def classify(self, doc: Doc, path: Path) -> Reader | None:
        """The reader for ``doc``, or None (reported, once per kind, at the end)."""
        col = self.col
        value = doc.value
        if not isinstance(value, dict):
            col.report.warn(doc.file, doc.start_line, "", "expected a mapping at the top; skipped")
            return None
        api = value.get("apiVersion")
        if api == swarmkit.SWARMKIT_API:
            kind = str(value.get("kind"))
            reader = BY_KIND.get(kind)
            if reader is None:
                self.other_kinds.setdefault(kind, []).append(doc)
            return reader
        if isinstance(api, str) and api.startswith("swarmkit.dev/"):
            col.report.warn(
                doc.file,
                doc.line("apiVersion"),
                "apiVersion",
                "already a swarmkit.dev manifest; apply it as it is; skipped",
            )
            return None
        if path.stem in SWARM_FLOW_FILES:
            self.flow_files.setdefault(path.stem, []).append(doc.file)
            return None
        reader = BY_FILE.get(path.stem)
        if reader is None:
            self.unrecognized.append(doc)
        return reader

    def summarize(self) -> None:
        report = self.col.report
        for kind, docs in sorted(self.other_kinds.items()):
            hint = OTHER_KINDS.get(kind, "there is no swarmkit.dev equivalent")
            report.warn(
                docs[0].file,
                docs[0].line("kind"),
                "kind",
                f"kind {kind!r}: {len(docs)} document(s) not imported: {hint} "
                f"(imported kinds: {', '.join(BY_KIND)})",
            )
        for stem, files in sorted(self.flow_files.items()):
            report.warn(
                files[0],
                None,
                "",
                f"Swarm {stem}.yaml ({SWARM_FLOW_FILES[stem]}): {len(files)} file(s) "
                "not imported: swarmkit.dev runs agent trees, not event-driven flows; "
                "drive the agents from a Topology or start Runs from your events",
            )
        if self.unrecognized:
            first = self.unrecognized[0]
            names = ", ".join(d.file for d in self.unrecognized[:5])
            more = "" if len(self.unrecognized) <= 5 else f", … ({len(self.unrecognized)} in all)"
            report.warn(
                first.file,
                first.start_line,
                "",
                f"not a recognized source document (no apiVersion swarmkit/v1, and not "
                f"workspace.yaml or a Swarm file); skipped: {names}{more}",
            )
        used = {os.path.normpath(u) for u in self.col.used_files}
        self.passed_over = [f for f in self.passed_over if os.path.normpath(f) not in used]
        if self.passed_over:
            names = ", ".join(self.passed_over[:3])
            more = "" if len(self.passed_over) <= 3 else ", …"
            report.note(
                f"passed over {len(self.passed_over)} file(s) of no source format ({names}{more})"
            )


def scan(col: Collected, paths: list[Path]) -> None:
    s = _Scan(col)
    for path in paths:
        if not path.exists():
            col.report.error(shown_path(path), None, "", "no such file or directory")
        elif path.is_dir():
            s.walk(path)
        elif path.name == SKILL_MD:
            s.skill_dir(path.parent, shown_path(path))
        else:
            s.file(path)
    # a SwarmKit workspace names the Workspace before a Swarm package does
    s.first.sort(key=lambda item: item[0] is not swarmkit_ws.read_workspace)
    for reader, src in s.first:
        reader(col, src)
    for read in s.rest:
        read()
    s.summarize()
