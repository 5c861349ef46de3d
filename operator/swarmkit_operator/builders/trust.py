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

The workload objects the operator creates or applies under a name it derives (a Run's Job,
a served Topology's or a gateway's Deployment, Service and NetworkPolicy, every bundle
ConfigMap) get one more check before they are adopted, :func:`check_owned`: an object
already there under that name is used (or applied over) only when the operator made it
for that owner: its controller ownerReference names the owner's uid (the content-addressed
bundle ConfigMaps are checked by their data digest instead, :func:`check`). Anything else
is ``TamperedObject`` too: a Run fails, a served Topology or a gateway reports it in
``Serving`` (:mod:`swarmkit_operator.workload`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmkit_api.conditions import REASON_PINNED_REVISION_MISSING, REASON_TAMPERED_OBJECT

from ..hashing import hash_of, sha256_hex
from .workload import Target


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


def owned_by(obj: Mapping[str, Any], target: Target) -> bool:
    """Whether ``obj``'s managing controller is ``target`` (an ownerReference with its uid
    and ``controller: true``), as on every object of a workload the operator writes."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(o.get("uid") == target.uid and o.get("controller") for o in owners)


def check_owned(kind: str, obj: Mapping[str, Any] | None, target: Target) -> None:
    """Raise :class:`Refused` (``TamperedObject``) when ``obj``, found under a name the
    operator derives for ``target``'s workload, is not one the operator made for it."""
    if obj is None or owned_by(obj, target):
        return
    name = (obj.get("metadata") or {}).get("name")
    raise Refused(
        REASON_TAMPERED_OBJECT,
        f"{kind} {name} exists but was not created by the operator for {target.kind} "
        f"{target.name} (no controller ownerReference to it): it is not used or changed",
    )


__all__ = [
    "Refused",
    "check",
    "check_owned",
    "data_digest",
    "missing",
    "owned_by",
    "tampered",
    "text_digest",
]
