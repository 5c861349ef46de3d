"""What the operator trusts of what it reads back (pure): digests and the refusal.

A namespace editor (Kubernetes' built-in ``edit``) creates, deletes and re-creates
ConfigMaps, so a ConfigMap bearing a name the operator derives proves nothing: neither its
content, nor its labels, nor its ``ownerReferences`` (anyone may copy a Run's uid). What
only the operator writes is the Run's status subresource and the Jobs it creates. So the
operator records the digest of every object a run depends on there when it writes it
(``status.bundleSha256``, ``status.checkpointSha256``), and checks the object against it
before it mounts it or shows it to a reviewer: :func:`check` raises :class:`Refused` with
``TamperedObject`` when the digest differs, ``PinnedRevisionMissing`` when it is gone. The
reconcile turns :class:`Refused` into the run's final condition and an Event
(:func:`swarmkit_operator.runs.observe.reconcile`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmkit_api.conditions import REASON_PINNED_REVISION_MISSING, REASON_TAMPERED_OBJECT

from ..hashing import hash_of, sha256_hex


class Refused(Exception):
    """The run cannot go on with an object it depends on; ``reason`` is a condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def data_digest(data: Mapping[str, Any]) -> str:
    """sha256 of a ConfigMap's ``data`` (canonical JSON: key order does not matter)."""
    return hash_of(dict(data))


def text_digest(text: str) -> str:
    """sha256 of one text (the runner's checkpoint sha256 is of the encoded line)."""
    return sha256_hex(text)


def tampered(what: str, name: str, expected: str, found: str) -> Refused:
    return Refused(
        REASON_TAMPERED_OBJECT,
        f"{what} ConfigMap {name} is not the one the operator wrote (sha256 {found[:12]}, "
        f"recorded {expected[:12]}): it was replaced, and is not used",
    )


def foreign(kind: str, name: str, creator: str) -> Refused:
    """A ``kind`` bearing the name the operator expects, created by ``creator``."""
    return Refused(
        REASON_TAMPERED_OBJECT,
        f"the {kind} {name} bears the name the operator expected but was not created by the "
        f"operator (created by {creator}): it was not used",
    )


def missing(what: str, name: str) -> Refused:
    return Refused(
        REASON_PINNED_REVISION_MISSING,
        f"{what} ConfigMap {name}, pinned by the run, is gone: the run cannot go on",
    )


def check(
    what: str, name: str, config_map: Mapping[str, Any] | None, expected: str
) -> Mapping[str, Any]:
    """``config_map`` when its data's digest is ``expected``; else :class:`Refused`."""
    if config_map is None:
        raise missing(what, name)
    found = data_digest(config_map.get("data") or {})
    if found != expected:
        raise tampered(what, name, expected, found)
    return config_map


__all__ = ["Refused", "check", "data_digest", "missing", "tampered", "text_digest"]
