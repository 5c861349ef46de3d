"""Fail when a product function is longer than 80 lines (``make lint`` runs it).

The product packages (operator, API, CLI, runner) are read with ``ast``; a function's length
is its span, ``end_lineno - lineno + 1``, decorators excluded. Functions that were already
longer when the rule came in are listed in ``function-length-allowlist.txt`` beside this
file with the length they had: such a function may shrink (then its line is lowered, or
removed once it fits: the list stays exact), never grow, and no function joins the list.
Split by meaning, not by count.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

LIMIT = 80
ROOTS = (
    "operator/swarmkit_api",
    "operator/swarmkit_operator",
    "operator/swarmkit_cli",
    "runtime_image/swarmkit_runner",
)
HERE = Path(__file__).resolve().parent
ALLOWLIST = HERE / "function-length-allowlist.txt"


def spans(repo: Path) -> Iterator[tuple[str, int]]:
    """``(path::qualified.name, lines)`` for every function of the product packages."""
    for root in ROOTS:
        for path in sorted((repo / root).rglob("*.py")):
            rel = path.relative_to(repo).as_posix()
            yield from _functions(ast.parse(path.read_text(), rel), rel, "")


def _functions(node: ast.AST, rel: str, prefix: str) -> Iterator[tuple[str, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{child.name}"
            yield f"{rel}::{name}", (child.end_lineno or child.lineno) - child.lineno + 1
            yield from _functions(child, rel, f"{name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, rel, f"{prefix}{child.name}.")


def read_allowlist(path: Path) -> dict[str, int]:
    allowed: dict[str, int] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            where, lines = line.rsplit(None, 1)
            allowed[where] = int(lines)
    return allowed


def problems(found: dict[str, int], allowed: dict[str, int]) -> list[str]:
    out = []
    for where, lines in sorted(found.items()):
        ceiling = allowed.get(where, LIMIT)
        if lines > ceiling:
            what = f"grew past the {ceiling} it had" if where in allowed else f"over {LIMIT}"
            out.append(f"{where}: {lines} lines, {what}; split it by meaning")
    for where, ceiling in sorted(allowed.items()):
        lines = found.get(where, 0)
        if lines <= LIMIT:
            out.append(f"{ALLOWLIST.name}: {where} is gone or fits now; remove its line")
        elif lines < ceiling:
            out.append(f"{ALLOWLIST.name}: {where} shrank to {lines}; lower its line to {lines}")
    return out


def main(argv: list[str]) -> int:
    repo = Path(argv[1]) if len(argv) > 1 else HERE.parents[1]
    found = dict(spans(repo))
    bad = problems(found, read_allowlist(ALLOWLIST))
    for line in bad:
        print(line, file=sys.stderr)
    longer = sum(1 for n in found.values() if n > LIMIT)
    print(f"function length: {len(found)} functions, {longer} over {LIMIT} (allow-listed)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
