"""Content hashing: canonical JSON and sha256 helpers for content-addressed names."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def hash_of(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))


def short(digest: str, length: int = 8) -> str:
    return digest[:length]
