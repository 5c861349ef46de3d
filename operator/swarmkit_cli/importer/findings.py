"""What an import reports: warnings (mapped with a loss, or not mapped) and errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["warning", "error"]


@dataclass(frozen=True)
class Finding:
    """One problem, located by file, line (1-based, when known) and source field path."""

    severity: Severity
    file: str
    line: int | None
    field: str
    message: str

    def location(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        where = self.location()
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class Report:
    """Collects findings in the order they are found."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        #: what was passed over on purpose (not a finding: nothing of the user's data is lost)
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def warn(self, file: str, line: int | None, field: str, message: str) -> None:
        self.findings.append(Finding("warning", file, line, field, message))

    def error(self, file: str, line: int | None, field: str, message: str) -> None:
        self.findings.append(Finding("error", file, line, field, message))

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]
