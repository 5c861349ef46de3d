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

A render (``skill-<name>-<hash8>``, ``agent-<name>-<hash8>``, ``ws-<name>-<hash8>``) is
content-addressed: the name follows from the content, so the operator can tell its own from
a ConfigMap someone created under that name first without recording anything:
:func:`render_mismatch` compares what it finds with what it rendered (data, binary data,
immutability), and :func:`foreign_config_map` turns any kind's render into the refusal.

The workload objects the operator creates or applies under a name it derives (a Run's Job
and NetworkPolicy, a served Topology's or a gateway's Deployment, Service, NetworkPolicy
and RBAC objects) cannot prove themselves by content or owner: whoever creates one writes
its ``ownerReferences`` too. So the operator records the uid of each one it creates in the
owner's ``status.createdUids``, and :func:`check_made` adopts an object found under such a
name only when its uid is recorded there, or is one this process created and has not
recorded yet, or (a predecessor stopped between the create and the record) it predates
this process's leadership and carries the owner's controller ownerReference. Anything else
is ``TamperedObject`` too: a Run fails, a served Topology or a gateway reports it in
``Serving`` (:mod:`swarmkit_operator.workload`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_NOT_RENDERED,
    REASON_PINNED_REVISION_MISSING,
    REASON_TAMPERED_OBJECT,
)

from ..hashing import hash_of, sha256_hex
from . import ObjectRef, Verdict, config_map_name, content_digest
from .run_verdict import parse_time
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


def render_mismatch(rendered: Mapping[str, Any], found: Mapping[str, Any]) -> str | None:
    """Why ``found`` (the ConfigMap bearing a render's name) is not ``rendered``, the
    manifest the operator renders under that name; None when it is exactly that.

    Immutability is part of it: a mutable ConfigMap holding the right bytes today could be
    edited in place tomorrow without its uid changing."""
    expected = data_digest(rendered.get("data") or {})
    got = data_digest(found.get("data") or {})
    if got != expected:
        return f"its data has sha256 {got[:12]}, the render {expected[:12]}"
    if data_digest(found.get("binaryData") or {}) != data_digest(rendered.get("binaryData") or {}):
        return "its binaryData differs from the render's"
    if found.get("immutable") is not True:
        return "it is not immutable"
    return None


def pinned_render_mismatch(
    owner: ObjectRef,
    name: str,
    data: Mapping[str, str],
    binary: Mapping[str, str],
    immutable: bool,
    digest: str | None,
) -> str | None:
    """Why ``data``/``binary`` (read under ``owner``'s render name ``name``, to be used by
    whoever pins that render: a Run, a served workload) is not the operator's render; None
    when it is: immutable, and its content digest is ``digest``, the full sha256 the
    operator recorded in ``owner``'s status when it rendered it. Without a record (a
    promoted version pins the name alone), the name is all there is: the content must
    hash to the 8 hex digits it ends in (32 bits: the limit is documented in
    docs/design/trust-and-adoption.md)."""
    if not immutable:
        return "it is not immutable"
    found = content_digest(data, binary)
    if digest:
        if found != digest:
            return f"its data has sha256 {found[:12]}, the render recorded {digest[:12]}"
    elif config_map_name(owner, found) != name:
        return f"its data has sha256 {found[:12]}, not the digest its name ends in"
    return None


def tampered_render(kind: str, owner: str, name: str, why: str) -> Refused:
    """The refusal of a ConfigMap bearing ``owner``'s render name that the operator did not
    write (:func:`render_mismatch` says ``why``)."""
    return Refused(
        REASON_TAMPERED_OBJECT,
        f"ConfigMap {name} bears the name of {kind} {owner}'s render but is not the one the "
        f"operator rendered ({why}): it is not used; delete it and the operator writes its own",
    )


class Render(Protocol):
    """What a kind's render (SkillRender, AgentRender, WorkspaceRender) has in common: its
    verdicts, the manifest it would adopt, and every other field defaulted when built from
    its verdicts alone (the shape of "nothing rendered")."""

    @property
    def verdicts(self) -> tuple[Verdict, ...]: ...

    @property
    def config_map_name(self) -> str | None: ...

    def __init__(self, verdicts: tuple[Verdict, ...]) -> None: ...


R = TypeVar("R", bound=Render)


def foreign_config_map(render: R, kind: str, owner: str, why: str) -> R:
    """``render`` of ``kind`` ``owner``, whose ConfigMap name is taken by one the operator
    did not write (``why``, from :func:`render_mismatch`), as the owner's status must show
    it: nothing rendered, so no ``renderedConfigMap``, version or hash an Agent, Topology
    or Run could pin (every field but the verdicts at its default); ``Ready=False
    TamperedObject`` names the ConfigMap (the status write posts it as an Event); the
    other conditions that describe the render (ScriptsApproved, SkillsResolved) are
    Unknown, ``Accepted`` stands (the spec is valid)."""
    name = str(render.config_map_name)
    refused = tampered_render(kind, owner, name, why)
    unknown = f"unknown while ConfigMap {name} is not the operator's render (see Ready)"

    def verdict(v: Verdict) -> Verdict:
        if v.type == READY:
            return Verdict(READY, "False", refused.reason, refused.message)
        if v.type == ACCEPTED:
            return v
        return Verdict(v.type, "Unknown", REASON_NOT_RENDERED, unknown)

    return type(render)(verdicts=tuple(verdict(v) for v in render.verdicts))


def owned_by(obj: Mapping[str, Any], target: Target) -> bool:
    """Whether ``obj``'s managing controller is ``target`` (an ownerReference with its uid
    and ``controller: true``), as on every object of a workload the operator writes."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(o.get("uid") == target.uid and o.get("controller") for o in owners)


@dataclass(frozen=True)
class Made:
    """What proves that an object under a name the operator derives for a target is one
    the operator created for it (:func:`check_made`).

    ``recorded`` is the target's ``status.createdUids`` ("<Kind>/<name>" → uid), written
    right after each create: only the operator's ServiceAccount may write a target's status,
    while anyone who may create the object may also copy the target's uid into its
    ownerReferences. ``created``: the uids this process created for the target and has not
    recorded yet (a status write that failed is retried). ``leading_since``: when this
    process started writing (None: unknown); ``not_before``: the earliest time the operator
    may create the target's objects (a Run's ``spec.startAfter``)."""

    recorded: Mapping[str, str] = field(default_factory=dict)
    created: Collection[str] = ()
    leading_since: datetime | None = None
    not_before: datetime | None = None


def made_key(kind: str, name: str) -> str:
    """The key of an object in ``status.createdUids``."""
    return f"{kind}/{name}"


def check_made(kind: str, obj: Mapping[str, Any] | None, target: Target, made: Made) -> str:
    """The uid of ``obj`` (found under a name the operator derives for ``target``) when it
    is the one the operator created for it ("" when there is none); else :class:`Refused`
    (``TamperedObject``), naming it.

    Proof, in this order: it is one this process created (newer than any record: the
    status it read may not show that create yet); its uid is the one recorded in the
    target's status; else it carries the target's controller ownerReference *and* was made
    before this process started writing (a predecessor that stopped between its create and
    its record), and not before ``not_before``. An unrecorded object made while this
    process writes is never its own: this process remembers what it creates until the
    record is written."""
    if obj is None:
        return ""
    meta = obj.get("metadata") or {}
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    if uid and uid in made.created:
        # Before the record: one it replaced (deleted by someone, made again) is still
        # recorded under the old uid until the status write that records the new one is
        # seen; a reconcile in between must neither refuse it nor write the old uid back.
        return uid
    recorded = made.recorded.get(made_key(kind, name))
    if recorded is not None:
        if uid == recorded:
            return uid
        raise _unproven(kind, name, target, f"its uid {uid} is not the {recorded} recorded")
    if not owned_by(obj, target):
        raise _unproven(kind, name, target, "no controller ownerReference to it")
    created = parse_time(meta.get("creationTimestamp"))
    # creationTimestamp is whole seconds, rounded down: the same second counts as "since".
    since = made.leading_since.replace(microsecond=0) if made.leading_since else None
    if created is None or since is None or created >= since:
        raise _unproven(
            kind,
            name,
            target,
            "its controller ownerReference was copied: the operator has no record of creating it",
        )
    if made.not_before is not None and created < made.not_before.replace(microsecond=0):
        raise _unproven(kind, name, target, "it was made before the operator could make it")
    return uid


def drift(found: Mapping[str, Any], manifest: Mapping[str, Any]) -> str | None:
    """The first field the operator sets in ``manifest`` that ``found`` (the object as it
    is now, its uid proven the operator's) no longer holds, as a path ("spec.ingress");
    None when every one is as written. What the apiserver adds (defaults, a clusterIP) is
    not drift; a list must keep its length (a rule appended to a NetworkPolicy is)."""
    for key, want in manifest.items():
        if key in ("apiVersion", "kind", "metadata", "status"):
            continue
        where = _drift(found.get(key), want, key)
        if where is not None:
            return where
    return None


def other_managers(obj: Mapping[str, Any], manager: str) -> list[str]:
    """The field managers of ``obj`` other than ``manager`` (whoever wrote a field of it
    besides the operator: ``kubectl-patch``, ``kubectl-edit``...)."""
    fields = (obj.get("metadata") or {}).get("managedFields") or ()
    return sorted({str(f.get("manager")) for f in fields if f.get("manager") != manager})


def _drift(found: Any, want: Any, path: str) -> str | None:
    if found is None and want in ({}, []):  # the apiserver drops an empty field
        return None
    if isinstance(want, Mapping):
        if not isinstance(found, Mapping):
            return path
        for key, value in want.items():
            where = _drift(found.get(key), value, f"{path}.{key}")
            if where is not None:
                return where
        return None
    if isinstance(want, list):
        if not isinstance(found, list) or len(found) != len(want):
            return path
        for i, (got, value) in enumerate(zip(found, want, strict=True)):
            where = _drift(got, value, f"{path}[{i}]")
            if where is not None:
                return where
        return None
    return None if found == want else path


def _unproven(kind: str, name: str, target: Target, why: str) -> Refused:
    return Refused(
        REASON_TAMPERED_OBJECT,
        f"{kind} {name} exists but was not created by the operator for {target.kind} "
        f"{target.name} ({why}): it is not used or changed",
    )


__all__ = [
    "Made",
    "Refused",
    "Render",
    "check",
    "check_made",
    "data_digest",
    "drift",
    "foreign_config_map",
    "made_key",
    "missing",
    "other_managers",
    "owned_by",
    "pinned_render_mismatch",
    "render_mismatch",
    "tampered",
    "tampered_render",
    "text_digest",
]
