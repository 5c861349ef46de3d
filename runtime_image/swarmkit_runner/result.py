"""The run result: ``RunResult.to_termination_message()`` written to the termination log."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from swarmkit_api.bundle import TRUNCATION_MARKER, Outcome, ReviewItem, RunResult
from swarmkit_api.run import AgentSkillUsage, TokenUsage

from .audit import AuditLog
from .secrets import SecretStore

#: Exit codes: Succeeded (or AwaitingReview: the runner's part is done and the pod must not
#: be retried by the Job's backoffLimit), any other outcome, a bad bundle (or a tampered
#: mount: the Job's pod failure policy fails the Job at once on it, nothing is retried).
EXIT_OK, EXIT_FAILED, EXIT_BAD_BUNDLE = 0, 1, 2
MAX_MESSAGE_CHARS = 500


def cap_output(text: str, max_bytes: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes (marker included) and whether it was."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text, False
    room = max(0, max_bytes - len(TRUNCATION_MARKER.encode()))
    return data[:room].decode("utf-8", errors="ignore") + TRUNCATION_MARKER, True


def one_line(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= MAX_MESSAGE_CHARS else line[: MAX_MESSAGE_CHARS - 1] + "…"


def make_result(
    outcome: Outcome,
    message: str = "",
    output: str = "",
    max_output_bytes: int = 2048,
    input_tokens: int = 0,
    output_tokens: int = 0,
    steps: int = 0,
    tool_calls: int = 0,
    secrets: SecretStore | None = None,
    review_items: Sequence[ReviewItem] = (),
    skills: Sequence[AgentSkillUsage] = (),
) -> RunResult:
    """A RunResult with the output capped and secrets scrubbed from message and output."""
    scrub = secrets.scrub if secrets is not None else (lambda s: s)
    capped, truncated = cap_output(scrub(output), max_output_bytes)
    return RunResult(
        outcome=outcome,
        message=one_line(scrub(message)),
        output=capped,
        output_truncated=truncated,
        usage=TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens),
        steps=steps,
        tool_calls=tool_calls,
        review_items=[
            item.model_copy(update={"question": one_line(scrub(item.question))})
            for item in review_items
        ],
        skills=list(skills),
    )


def exit_code(outcome: Outcome) -> int:
    if outcome in ("Succeeded", "AwaitingReview"):
        return EXIT_OK
    if outcome in ("ValidationFailed", "TamperedObject"):
        return EXIT_BAD_BUNDLE
    return EXIT_FAILED


def write_termination_log(path: Path, result: RunResult, audit: AuditLog | None = None) -> None:
    """Write the result (≤ 4 KiB JSON) with ``audit``'s chain head (nothing is audited after
    it); failures are reported on stderr, never raised."""
    if audit is not None:
        result = result.model_copy(update={"audit": audit.head})
    try:
        path.write_text(result.to_termination_message(), encoding="utf-8")
    except OSError as exc:
        print(f"swarmkit-runner: cannot write termination log {path}: {exc}", file=sys.stderr)
