"""Resume a parked runner process with a decision (the checkpoint and decision files the
operator mounts), for the harness node tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarmkit_api.review import CHECKPOINT_LINE_PREFIX, Checkpoint, ResumeDecision
from tests.support.runner import RunOutput


def resume_args(parked: RunOutput, tmp: Path, decision: dict[str, Any]) -> list[str]:
    """The runner's CLI arguments that resume ``parked`` with ``decision``."""
    [line] = [ln for ln in parked.stdout.splitlines() if ln.startswith(CHECKPOINT_LINE_PREFIX)]
    encoded = line[len(CHECKPOINT_LINE_PREFIX) :]
    saved = Checkpoint.decode(encoded)
    (tmp / "checkpoint").write_text(encoded)
    full = {"review": "ship-1", "key": saved.parked_key, "kind": saved.item["kind"], **decision}
    (tmp / "decision.json").write_text(ResumeDecision.model_validate(full).model_dump_json())
    assert parked.layout is not None
    return [
        *parked.layout.cli_args(),
        "--checkpoint",
        str(tmp / "checkpoint"),
        "--decision",
        str(tmp / "decision.json"),
    ]
