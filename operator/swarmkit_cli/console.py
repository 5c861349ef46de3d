"""Terminal output: colour only on a TTY and without ``NO_COLOR``; tables; warnings.

Colour is decided once per stream: ``NO_COLOR`` set to anything non-empty
(https://no-color.org), ``TERM=dumb`` or a stream that is not a TTY turns it off, so piped
output is plain text a script can parse.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

_CODES = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "bold": "1", "dim": "2"}


def wants_color(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR", ""):
        return False
    if env.get("TERM", "") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass
class Console:
    """Where a subcommand writes: ``out`` for results, ``err`` for warnings and errors."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    environ: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        self.color_out = wants_color(self.out, self.environ)
        self.color_err = wants_color(self.err, self.environ)

    @staticmethod
    def _paint(text: str, style: str | None, enabled: bool) -> str:
        if not enabled or not style:
            return text
        codes = ";".join(_CODES[s] for s in style.split("+"))
        return f"\033[{codes}m{text}\033[0m"

    def style(self, text: str, style: str | None) -> str:
        """``text`` in ``style`` (e.g. ``red`` or ``bold+green``) when stdout takes colour."""
        return self._paint(text, style, self.color_out)

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def warn(self, text: str) -> None:
        self.err.write(self._paint("warning", "yellow", self.color_err) + ": " + text + "\n")

    def error(self, text: str) -> None:
        self.err.write(self._paint("error", "red", self.color_err) + ": " + text + "\n")

    def info(self, text: str) -> None:
        self.err.write(text + "\n")

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[str]],
        styles: Sequence[str | None] | None = None,
    ) -> None:
        """Columns aligned like ``kubectl get``; ``styles[i]`` colours row ``i``."""
        widths = [len(h) for h in headers]
        for row in rows:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))

        def line(cells: Sequence[str]) -> str:
            return "   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

        self.print(line([h.upper() for h in headers]))
        for i, row in enumerate(rows):
            self.print(self.style(line(row), styles[i] if styles else None))
