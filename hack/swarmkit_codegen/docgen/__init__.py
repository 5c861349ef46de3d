"""Docs generator: the reference pages of the docs site, and the chart's README.

``python -m swarmkit_codegen.docgen --out .`` writes ``docs/reference/`` (every CRD field,
every ``kubectl swarmkit`` command, every Helm value, every metric, condition and Event
reason), ``docs/performance/index.md`` (from the committed ``bench/results/*.json``),
``charts/swarmkit-operator/README.md``, the figures block of ``README.md`` and the figures
blocks of the prose pages (:mod:`.figures`); ``--verify .``
regenerates in memory and fails on any difference, as ``crdgen --verify`` does (``make
generate`` / ``make verify`` run both). Output is deterministic: no dates, no terminal
widths, no dict ordering from the environment.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from .. import generate
from . import bench, cli, crds, figures, headlines, helm, observability

DOCS = Path("docs")
REFERENCE = DOCS / "reference"


def render_all(root: Path) -> dict[Path, str]:
    """Every generated docs file, path (relative to the repo root) → content."""
    files: dict[Path, str] = {DOCS / rel: text for rel, text in crds.pages().items()}
    files[REFERENCE / "cli.md"] = cli.render()
    files[REFERENCE / "helm-values.md"] = helm.render(root)
    files[REFERENCE / "metrics.md"] = observability.render_metrics()
    files[REFERENCE / "conditions-and-events.md"] = observability.render_reasons()
    files[REFERENCE / "rbac.md"] = observability.render_rbac()
    files[DOCS / "performance" / "index.md"] = bench.render(root)
    files[helm.CHART_README] = helm.render_chart_readme(root)
    files[Path("README.md")] = headlines.render_readme(root)
    for page in figures.pages():  # the prose pages' figures blocks
        files[page] = figures.render_page(root, page)
    return files


def verify(root: Path) -> list[str]:
    """Differences between the tree at ``root`` and fresh output (empty = up to date)."""
    problems = []
    expected = render_all(root)
    for rel, content in expected.items():
        path = root / rel
        actual = path.read_text() if path.exists() else ""
        if actual != content:
            diff = difflib.unified_diff(
                actual.splitlines(), content.splitlines(), str(rel), "generated", lineterm=""
            )
            problems.append("\n".join(list(diff)[:40]))
    for path in sorted((root / REFERENCE).rglob("*.md")):
        if path.relative_to(root) not in expected:
            problems.append(f"{path.relative_to(root)}: not produced by the generator")
    return problems


def write(root: Path) -> list[Path]:
    """Write every generated page under ``root``; returns their paths."""
    written = []
    for rel, content in render_all(root).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    return generate.main(argv, __doc__, write, verify, "docs")
