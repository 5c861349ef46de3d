"""Credentials planted where a Run could leak them, and the forms a scan looks for.

Shared by the scrubbing test (tests/integration/test_runs_scrubbing.py) and the chaos suite's
secret scan (tests/chaos/test_zz_secrets_scan.py), so both plant the same kind of value and
look for it the same way. The forms are written out here, independently of the runner's
scrubber (a scrubber checked against itself proves nothing): the value, its base64 (standard
and URL-safe, at each of the three alignments, as inside ``Basic`` auth) and its URL-encoding.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from urllib.parse import quote

NEVER_READ_PREFIX = "sk-never-read-"
READ_PREFIX = "sk-read-by-run-"


def never_read() -> str:
    """A fresh value for a credential the Run never reads (only its pod's env has it)."""
    return NEVER_READ_PREFIX + os.urandom(8).hex()


def read_by_run() -> str:
    """A fresh value for a credential the Run reads (a tool sends it)."""
    return READ_PREFIX + os.urandom(8).hex()


def forms(value: str) -> list[str]:
    """``value`` as a leak would most likely show it."""
    out = [value, quote(value, safe="")]
    for offset in range(3):
        encoded = base64.b64encode(b"x" * offset + value.encode()).decode()
        # the characters that hold only the value's bits (no padding, no neighbour)
        middle = encoded[-(-8 * offset // 6) : 8 * (offset + len(value)) // 6]
        out += [middle, middle.replace("+", "-").replace("/", "_")]
    return list(dict.fromkeys(out))


def hits(text: str, values: Iterable[str]) -> list[str]:
    """The forms of ``values`` found in ``text``."""
    return [f for v in values for f in forms(v) if f in text]
