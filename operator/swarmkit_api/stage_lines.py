"""The stdout lines a runner stage prints for the operator, beside its capped result: the
outbox (:mod:`.effects`) and the recording (:mod:`.replay`).

The result (the termination message) is capped at 4 KiB; what does not fit goes on one
stdout line of its own, ``<prefix><text>``: the items as compact JSON, compressed and
base64-encoded. The result carries the sha256 of ``<text>``, and the operator takes a line
from the pod's log only when it hashes to that (:func:`from_log`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Sequence
from typing import Any


def line(prefix: str, items: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """The stdout line carrying ``items`` and the sha256 of its encoded text."""
    raw = json.dumps(list(items), separators=(",", ":"), sort_keys=True)
    text = base64.b64encode(zlib.compress(raw.encode(), 9)).decode()
    return prefix + text, hashlib.sha256(text.encode()).hexdigest()


def from_log(log: str, prefix: str, sha256: str) -> list[Any] | None:
    """The items on the line of ``log`` with ``prefix`` whose sha256 is ``sha256`` (None:
    absent; the newest such line counts)."""
    for found in reversed(log.splitlines()):
        if not found.startswith(prefix):
            continue
        text = found[len(prefix) :].strip()
        if hashlib.sha256(text.encode()).hexdigest() == sha256:
            items: list[Any] = json.loads(zlib.decompress(base64.b64decode(text)))
            return items
    return None


__all__ = ["from_log", "line"]
