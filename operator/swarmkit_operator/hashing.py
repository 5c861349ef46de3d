"""Content hashing: canonical JSON and sha256 helpers for content-addressed names, and the
one way a name or label derived from a user's name is kept within the API's limits (any
name the apiserver accepts, up to 253 characters, must work end to end: issue 47 item 5):
:func:`label_value` for a label value; :func:`dns_label` (from :mod:`swarmkit_api.names`,
the kubectl plugin's importer needs it too) for a name that must be a DNS label (a
Service, a Deployment whose pods carry it, a name used as a label); :func:`fitted` for a
DNS subdomain (most object names). Each keeps a name that already fits as it is and
otherwise cuts it and appends a hash of the whole, never a bare cut (two long names
sharing a prefix would collide)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from swarmkit_api.names import dns_label as dns_label  # re-exported: one helper


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


#: A label value's (and a DNS label's) length limit.
MAX_LABEL = 63
#: A DNS subdomain's (most object names') length limit.
MAX_SUBDOMAIN = 253
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_value(text: str) -> str:
    """``text`` as a valid label value: kept when it is one, else shortened with a hash."""
    if len(text) <= MAX_LABEL and _LABEL_VALUE.match(text):
        return text
    digest = sha256_hex(text)[:10]
    body = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[: MAX_LABEL - 11].strip("-_.")
    return f"{body}-{digest}" if body else digest


def fitted(name: str, limit: int) -> str:
    """``name`` kept when it has at most ``limit`` characters, else cut and ended with a
    hash of the whole (so two long names sharing a prefix stay distinct)."""
    if len(name) <= limit:
        return name
    return f"{name[: limit - 11].rstrip('-.')}-{sha256_hex(name)[:10]}"
