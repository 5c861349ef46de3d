"""One import, start to end: scan, rename (``--prefix``), assemble, and with
``--skip-invalid`` leave out what an error belongs to and assemble again.

An error belongs to the piece (Skill, Agent, tool, MCP server, ...) whose source lines
contain it, the innermost one when pieces nest (a topology node's own Agent inside its
topology). Leaving one out can make others invalid (a topology whose node Agent is gone),
so the import is repeated until nothing more is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from swarmkit_api import API_VERSION, ManifestError, validate_manifest

from .assemble import Output, assemble
from .collected import Collected, Piece
from .findings import Finding, Report
from .scan import scan

MAX_ROUNDS = 8


@dataclass(frozen=True)
class Options:
    workspace: str = "default"
    workspace_fixed: bool = False
    namespace: str | None = None
    model_aliases: dict[str, str] = field(default_factory=dict)
    prefixes: tuple[tuple[Path, str], ...] = ()
    skip_invalid: bool = False


@dataclass(frozen=True)
class Result:
    output: Output
    report: Report
    collected: Collected
    #: the errors whose items were left out (``--skip-invalid``)
    skipped: list[Finding] = field(default_factory=list)


def run(paths: list[Path], options: Options) -> Result:
    excluded: set[tuple[str, int, str]] = set()
    skipped: list[Finding] = []
    for _ in range(MAX_ROUNDS):
        col = _collect(paths, options, excluded)
        output = assemble(col, options.namespace)
        errors = col.report.errors
        if not options.skip_invalid or not errors:
            break
        owners = {_key(p) for e in errors for p in _owners(col, e)}
        skipped.extend(e for e in errors if e not in skipped)
        if not owners - excluded:
            break
        excluded |= owners
    if options.skip_invalid:
        output.manifests = [m for m in output.manifests if _valid(m)]
        col.report.findings = [f for f in col.report.findings if f.severity != "error"]
    return Result(output, col.report, col, skipped)


def _collect(paths: list[Path], options: Options, excluded: set[tuple[str, int, str]]) -> Collected:
    col = Collected(
        Report(),
        workspace=options.workspace,
        secret=f"{options.workspace}-credentials",
        workspace_fixed=options.workspace_fixed,
        model_aliases=dict(options.model_aliases),
    )
    scan(col, paths)
    if excluded:
        for _, pieces in _lists(col):
            pieces[:] = [p for p in pieces if _key(p) not in excluded]
    if options.prefixes:
        from .prefix import apply_prefixes

        apply_prefixes(col, options.prefixes)
    return col


def _lists(col: Collected) -> list[tuple[str, list[Piece]]]:
    return [
        ("skill", col.skills),
        ("agent", col.agents),
        ("topology", col.topologies),
        ("configmap", col.config_maps),
        ("mcp", col.mcp_servers),
        ("tool", col.tools),
        ("bundle", col.permission_bundles),
        ("credential", col.credentials),
        ("provider", col.model_providers),
    ]


def _key(p: Piece) -> tuple[str, int, str]:
    return (p.src.file, p.src.line, p.src.field())


def _span(p: Piece) -> tuple[int, int]:
    doc, path = p.src.doc, p.src.path
    start = doc.line(*path) if path else doc.start_line
    end = max((line for sub, line in doc.lines.items() if sub[: len(path)] == path), default=start)
    return start, max(start, end)


def _owners(col: Collected, error: Finding) -> list[Piece]:
    """The innermost pieces whose source lines hold ``error`` (all of the file's when the
    error has no line)."""
    same_file = [p for _, ps in _lists(col) for p in ps if p.src.file == error.file]
    if error.line is None:
        return same_file
    best: list[Piece] = []
    width = None
    for p in same_file:
        start, end = _span(p)
        if not start <= error.line <= end:
            continue
        if width is None or end - start < width:
            best, width = [p], end - start
        elif end - start == width:
            best.append(p)
    return best


def _valid(manifest: dict[str, object]) -> bool:
    if manifest.get("apiVersion") != API_VERSION:
        return True
    try:
        validate_manifest(manifest)
    except ManifestError:
        return False
    return True
