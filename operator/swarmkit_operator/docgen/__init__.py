"""Docs generator: the reference pages of the docs site, and the chart's README.

``python -m swarmkit_operator.docgen --out .`` writes ``docs/reference/`` (every CRD field,
every ``kubectl swarmkit`` command, every Helm value, every metric, condition and Event
reason), ``docs/performance/index.md`` (from the committed ``bench/results/*.json``) and
``charts/swarmkit-operator/README.md``; ``--verify .`` regenerates in memory and fails on any
difference, as ``crdgen --verify`` does (``make generate`` / ``make verify`` run both). Output
is deterministic: no dates, no terminal widths, no dict ordering from the environment.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from . import bench, cli, crds, helm, observability

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="repo root to write into")
    group.add_argument("--verify", type=Path, help="repo root to check")
    args = parser.parse_args(argv)
    if args.out is not None:
        for rel, content in render_all(args.out).items():
            path = args.out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            print(f"wrote {path}")
        return 0
    problems = verify(args.verify)
    if problems:
        print("generated docs are out of date; run `make generate`:", file=sys.stderr)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1
    print("generated docs are up to date")
    return 0
