"""The command line every generator shares: ``--out ROOT`` writes, ``--verify ROOT`` fails
on any difference (``make generate`` / ``make verify`` run ``crdgen`` and ``docgen``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path


def main(
    argv: list[str] | None,
    doc: str | None,
    write: Callable[[Path], Iterable[Path]],
    verify: Callable[[Path], list[str]],
    what: str,
) -> int:
    """Parse ``--out``/``--verify``; write (printing each path) or report what is stale."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else "")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="repo root to write into")
    group.add_argument("--verify", type=Path, help="repo root to check")
    args = parser.parse_args(argv)
    if args.out is not None:
        for path in write(args.out):
            print(f"wrote {path}")
        return 0
    problems = verify(args.verify)
    if problems:
        print(f"generated {what} are out of date; run `make generate`:", file=sys.stderr)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1
    print(f"generated {what} are up to date")
    return 0
