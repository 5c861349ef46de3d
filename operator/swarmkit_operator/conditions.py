"""The one conditions helper: Kubernetes API-convention conditions on any kind's status.

``lastTransitionTime`` only moves when ``status`` changes; reason/message/observedGeneration
are always refreshed. Conditions are plain dicts (the wire form) so handlers can patch them
straight into ``status``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

Status = Literal["True", "False", "Unknown"]


def now_rfc3339() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def set_condition(
    conditions: Sequence[dict[str, Any]] | None,
    type_: str,
    status: Status,
    reason: str,
    message: str = "",
    generation: int = 0,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """Return a new conditions list with ``type_`` set; the order of others is kept."""
    result: list[dict[str, Any]] = []
    found = False
    for cond in conditions or ():
        if cond.get("type") != type_:
            result.append(dict(cond))
            continue
        found = True
        keep_time = cond.get("status") == status and cond.get("lastTransitionTime")
        result.append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": keep_time or now or now_rfc3339(),
                "observedGeneration": generation,
            }
        )
    if not found:
        result.append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now or now_rfc3339(),
                "observedGeneration": generation,
            }
        )
    return result


def get_condition(conditions: Sequence[dict[str, Any]] | None, type_: str) -> dict[str, Any] | None:
    for cond in conditions or ():
        if cond.get("type") == type_:
            return dict(cond)
    return None


def transitions(
    before: Sequence[dict[str, Any]] | None, after: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Conditions whose status or reason changed (each one deserves an Event)."""
    changed = []
    for cond in after:
        old = get_condition(before, cond["type"])
        if old is None or (old.get("status"), old.get("reason")) != (
            cond["status"],
            cond["reason"],
        ):
            changed.append(cond)
    return changed
