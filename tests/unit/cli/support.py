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


@dataclass(frozen=True)
class Imported:
    """The outcome of importing a tree: manifests by (kind, name) and the findings."""

    objects: dict[tuple[str, str], dict[str, object]]
    findings: list[object]
    secret: dict[str, object] | None
    notes: list[str]

    def spec(self, kind: str, name: str) -> dict[str, object]:
        spec = self.objects[(kind, name)]["spec"]
        assert isinstance(spec, dict)
        return spec

    @property
    def warnings(self) -> list[str]:
        return [str(f) for f in self.findings if getattr(f, "severity", "") == "warning"]

    @property
    def errors(self) -> list[str]:
        return [str(f) for f in self.findings if getattr(f, "severity", "") == "error"]

    def workspace(self, name: str = "default") -> dict[str, object]:
        return self.spec("Workspace", name)


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def import_tree(
    root: Path, files: dict[str, str | bytes] | None = None, **options: object
) -> Imported:
    """Import ``files`` written under ``root`` (paths in findings are relative to root);
    ``options`` are :class:`swarmkit_cli.importer.pipeline.Options` fields."""
    import os

    from swarmkit_cli.importer.pipeline import Options, run

    if files:
        write_tree(root, files)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        result = run([Path(".")], Options(**options))  # type: ignore[arg-type]
    finally:
        os.chdir(cwd)
    out = result.output
    objects = {(m["kind"], m["metadata"]["name"]): m for m in out.manifests}
    return Imported(
        objects,
        list(result.report.findings) + list(result.skipped),
        out.secret_template,
        list(result.report.notes),
    )
