"""Helpers for the plugin's unit tests: run a subcommand and capture what it printed."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from swarmkit_cli.console import Console
from swarmkit_cli.main import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "import_tree"
INCIDENT_TRIAGE = FIXTURES / "vectorstep" / "skills" / "incident-triage"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run_cli(*argv: str, tty: bool = False, environ: dict[str, str] | None = None) -> Result:
    out: io.StringIO = FakeTTY() if tty else io.StringIO()
    err: io.StringIO = FakeTTY() if tty else io.StringIO()
    console = Console(out=out, err=err, environ=environ if environ is not None else {})
    try:
        code = main(list(argv), console=console)
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    return Result(code, out.getvalue(), err.getvalue())
