"""The audit hash chain: how the runner links its audit lines and how a copy is checked.

Every audit line the runner writes starts with ``"prev"``: the sha256 (hex) of the audit
line before it, exactly as written (UTF-8, without the newline); the first line's ``prev``
is :func:`anchor` of the run id (a Run's uid), so a log cannot be passed off as another
Run's. The hash of the last line is the chain's head: the runner puts it, with the number
of lines, in its result, and the operator copies it into the Run's ``status.audit``
(:class:`swarmkit_api.run.AuditChainHead`). Holding the head, anyone can tell whether a
copy of the log is the one the run wrote (:func:`verify`): a changed, removed, added or
moved line breaks a link or the head.

A resumed Run has one chain per pod, each starting at the same anchor; the status keeps
every pod's head. A copy holding several pods' logs one after another is cut into its
chains where one starts (:func:`chains`), and each is verified against its head.

Only audit lines are chained: JSON objects with an ``event`` and a ``run_id`` (every line
the runner's audit log writes has both). Other lines on the pod's log are skipped: stderr,
the checkpoint and outbox lines (whose own sha256 the result carries), and JSON a library
or a stdio MCP server logs (structlog's lines have an ``event`` too, never a ``run_id``).
The chain shows that a copy is unchanged; it does not stop whoever controls the pod from
writing another log from the start (the head in the Run's status, written by the operator
from the pod's termination message, is what a copy is held against).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: The field every audit line starts with.
PREV_FIELD = "prev"
_ANCHOR_PREFIX = "swarmkit.dev/audit-chain/v1 run "


def anchor(run_id: str) -> str:
    """The ``prev`` of a stream's first line: bound to the run id (a Run's uid)."""
    return line_hash(_ANCHOR_PREFIX + run_id)


def line_hash(line: str) -> str:
    """sha256 (hex) of one line as written, without its newline."""
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def link(body: str, prev: str) -> str:
    """The audit line of ``body`` (a JSON object's text) with ``"prev"`` as its first field."""
    if not body.startswith("{"):
        raise ValueError("an audit line is a JSON object")
    rest = body[1:].lstrip()
    sep = "" if rest.startswith("}") else ","
    return f'{{"{PREV_FIELD}":"{prev}"{sep}{rest}'


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`verify`: ``ok``, and if not, the first bad line and why."""

    ok: bool
    lines: int
    message: str
    bad_line: int | None = None


def _audit_record(text: str) -> dict[str, object] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        record = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(record, dict) and "event" in record and "run_id" in record:
        return record
    return None


def audit_lines(lines: Iterable[str], first: int = 1) -> list[tuple[int, str, dict[str, object]]]:
    """(line number in the whole log, counting from ``first``, the line as written, its
    record) per audit line."""
    out = []
    for number, raw in enumerate(lines, start=first):
        text = raw.rstrip("\r\n")
        record = _audit_record(text)
        if record is not None:
            out.append((number, text, record))
    return out


def status_heads(audit: object) -> list[dict[str, Any]]:
    """The chain heads in a Run's ``status.audit``, oldest pod first: its list (one per
    pod), or the single object an operator before per-pod heads wrote (the latest pod's)."""
    listed = [audit] if isinstance(audit, dict) else audit if isinstance(audit, list) else []
    return [h for h in listed if isinstance(h, dict) and h.get("head")]


def chains(lines: Sequence[str], run_id: str) -> list[tuple[int, list[str]]]:
    """``lines`` cut before each audit line that starts a chain (its ``prev`` is the anchor
    of ``run_id``): (the number of its first line in ``lines``, from 1; its lines). The lines
    before the first start belong to the first chain; a log with no start is one chain."""
    start = anchor(run_id)
    cuts = [n - 1 for n, _, record in audit_lines(lines) if record.get(PREV_FIELD) == start]
    bounds = sorted({0, *cuts[1:]}) if cuts else [0]
    ends = [*bounds[1:], len(lines)]
    return [(b + 1, list(lines[b:e])) for b, e in zip(bounds, ends, strict=True)]


def verify(
    lines: Iterable[str], run_id: str, head: str, count: int, first: int = 1
) -> Verification:
    """Whether ``lines`` (a log: audit lines among others) are the ``count`` audit lines whose
    chain starts at :func:`anchor` of ``run_id`` and ends at ``head``; if not, the first line
    that is not what the run wrote (its number in the log, ``lines`` starting at ``first``)
    and why."""
    chained = audit_lines(lines, first)
    hashes = {line_hash(text): number for number, text, _ in chained}
    expected, before = anchor(run_id), None
    for number, text, record in chained:
        prev = record.get(PREV_FIELD)
        if not isinstance(prev, str):
            return _bad(len(chained), number, f"line {number} has no {PREV_FIELD!r} hash")
        if prev != expected:
            return _broken(len(chained), count, number, before, prev, hashes)
        expected, before = line_hash(text), number
    if before is None:
        return _bad(0, None, "the log holds no audit lines")
    if expected != head:
        if len(chained) < count:
            why = f"{count - len(chained)} line(s) after it were removed"
        else:
            why = "it was changed, or lines after it were removed"
        return _bad(
            len(chained),
            before,
            f"line {before} (the last audit line) does not end the chain in the Run's "
            f"status: {why}",
        )
    if len(chained) != count:
        return _bad(
            len(chained),
            before,
            f"{len(chained)} audit lines, the Run's status counts {count}",
        )
    return Verification(True, len(chained), f"{len(chained)} audit lines, chain intact")


def _broken(
    total: int, count: int, number: int, before: int | None, prev: str, hashes: dict[str, int]
) -> Verification:
    """The message for line ``number`` whose ``prev`` is not the hash of the line before it."""
    moved = hashes.get(prev)
    if moved is not None and moved != before:
        return _bad(
            total,
            number,
            f"line {number} is out of order: the run wrote it right after line {moved}",
        )
    if before is None:
        return _bad(
            total,
            number,
            f"line {number} is not the run's first audit line: lines before it were "
            "removed, or it is from another run",
        )
    if total < count:
        return _bad(
            total,
            number,
            f"line {number} does not follow line {before}: a line between them was removed",
        )
    return _bad(
        total,
        before,
        f"line {before} is not the line the run wrote (line {number} names another "
        "predecessor): it was changed",
    )


def _bad(total: int, line: int | None, message: str) -> Verification:
    return Verification(False, total, message, line)


__all__ = [
    "PREV_FIELD",
    "Verification",
    "anchor",
    "audit_lines",
    "chains",
    "line_hash",
    "link",
    "status_heads",
    "verify",
]
