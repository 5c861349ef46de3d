"""Pure builders: spec (plus what the operator observed) → manifests, versions and verdicts.

Nothing here imports kopf or talks to the Kubernetes API; every function is a plain
function of its arguments, so the whole rendering and resolution logic is unit-tested
without a cluster (``tests/unit/operator``). The controllers gather the inputs from the
operator's own indexes and the API, call these functions and write what they return.

Shared here: the labels and names of the rendered ConfigMaps, owner references, and
:class:`Verdict`, the kind-independent description of a condition the handlers turn into a
Kubernetes condition with :func:`swarmkit_operator.conditions.set_condition`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from swarmkit_api import API_VERSION, FieldError, ManifestError
from swarmkit_api.common import INVALID_SCHEMA_ERROR
from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_INVALID,
    REASON_INVALID_SCHEMA,
    REASON_RENDERED,
)

from ..conditions import Status
from ..hashing import MAX_SUBDOMAIN, canonical_json, fitted, label_value, sha256_hex

#: Labels every object the operator creates carries.
MANAGED_BY = {"app.kubernetes.io/managed-by": "swarmkit-operator"}
#: Which kind of rendered ConfigMap this is: ``skill``, ``agent``, ``workspace``, ``topology``.
COMPONENT_LABEL = "swarmkit.dev/component"
#: Per kind: the label naming the owning resource.
OWNER_LABELS = {
    "Skill": "swarmkit.dev/skill",
    "Agent": "swarmkit.dev/agent",
    "Workspace": "swarmkit.dev/workspace",
    "Topology": "swarmkit.dev/topology",
}
COMPONENTS = {"Skill": "skill", "Agent": "agent", "Workspace": "workspace", "Topology": "topology"}
#: Name prefixes of the rendered ConfigMaps (a Topology is rendered with spec.promotion only).
PREFIXES = {"Skill": "skill", "Agent": "agent", "Workspace": "ws", "Topology": "topology"}
#: Set on a Run's bundle ConfigMap by the Runs handlers (see builders/bundle.py).
RUN_LABEL = "swarmkit.dev/run"
PINNED_ANNOTATION = "swarmkit.dev/pinned-configmaps"
RUN_FINISHED_LABEL = "swarmkit.dev/run-finished"
#: Largest data a ConfigMap may hold (the apiserver rejects more).
MAX_CONFIGMAP_BYTES = 1024 * 1024
#: Bumped when the rendered layout changes, so old and new renders never share a name.
RENDER_FORMAT = 1


@dataclass(frozen=True)
class Verdict:
    """One condition as a builder decided it (type, status, reason, message)."""

    type: str
    status: Status
    reason: str
    message: str = ""


@dataclass(frozen=True)
class ObjectRef:
    """The identity of the resource a ConfigMap is rendered for (its owner)."""

    kind: str
    name: str
    namespace: str
    uid: str


def owner_reference(owner: ObjectRef) -> dict[str, Any]:
    """The controller ownerReference of a rendered ConfigMap (deletion cascades)."""
    return {
        "apiVersion": API_VERSION,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def rendered_labels(owner: ObjectRef) -> dict[str, str]:
    labels = dict(MANAGED_BY)
    labels[COMPONENT_LABEL] = COMPONENTS[owner.kind]
    labels[OWNER_LABELS[owner.kind]] = label_value(owner.name)  # a name can be 253 long
    return labels


def content_digest(data: Mapping[str, str], binary_data: Mapping[str, str] | None = None) -> str:
    """sha256 over a ConfigMap's data (and binaryData), independent of key order."""
    return sha256_hex(canonical_json({"data": dict(data), "binaryData": dict(binary_data or {})}))


def config_map_name(owner: ObjectRef, digest: str, part: int | None = None) -> str:
    """``<prefix>-<name>-<digest[:8]>``: content-addressed, so it never needs updating (the
    name part is cut and hashed when the whole would pass the 253 characters of a name).
    With ``part``, ``...-<digest[:8]>-<part>``: one part ConfigMap of a large render."""
    suffix = f"-{digest[:8]}" if part is None else f"-{digest[:8]}-{part}"
    return fitted(f"{PREFIXES[owner.kind]}-{owner.name}", MAX_SUBDOMAIN - len(suffix)) + suffix


def rendered_config_map(
    owner: ObjectRef,
    digest: str,
    data: Mapping[str, str],
    binary_data: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An immutable, content-addressed ConfigMap rendered from ``owner`` (its labels name
    it). No ownerReference: a Run pins a render for as long as it lives, whatever happens
    to its source, so deleting the Skill (Agent, Workspace) must not have Kubernetes
    collect it; the operator's pin-aware GC (:mod:`..reconcile.gc`) deletes renders
    nothing refers to and no unfinished Run pins."""
    meta: dict[str, Any] = {
        "name": config_map_name(owner, digest),
        "namespace": owner.namespace,
        "labels": rendered_labels(owner),
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "immutable": True,
        "data": dict(data),
    }
    if binary_data:
        manifest["binaryData"] = dict(binary_data)
    return manifest


def config_map_size(data: Mapping[str, str], binary_data: Mapping[str, str] | None = None) -> int:
    """Bytes the apiserver counts against the ConfigMap size limit (keys + values)."""
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    # binaryData values are base64 on the wire; the limit counts the decoded bytes.
    size += sum(len(k) + (len(v) * 3) // 4 for k, v in (binary_data or {}).items())
    return size


def errors_message(errors: list[FieldError], limit: int = 5) -> str:
    """A human message for field errors: the first few, with a count of the rest."""
    shown = "; ".join(str(e) for e in errors[:limit])
    if len(errors) > limit:
        shown += f"; and {len(errors) - limit} more"
    return shown


def invalid_verdict(exc: ManifestError) -> Verdict:
    """``Accepted=False`` listing the field errors; the reason is the first error's
    (``InvalidSchema`` for an embedded JSON Schema the metaschema refuses, else ``Invalid``)."""
    first = exc.errors[0] if exc.errors else None
    schema = first is not None and first.code == INVALID_SCHEMA_ERROR
    reason = REASON_INVALID_SCHEMA if schema else REASON_INVALID
    return Verdict(ACCEPTED, "False", reason, errors_message(exc.errors))


def rendered_verdict(manifest: Mapping[str, Any]) -> Verdict:
    """``Ready=True``: rendered into the ConfigMap ``manifest`` (an Agent's, a Workspace's)."""
    return Verdict(
        READY, "True", REASON_RENDERED, f"rendered into ConfigMap {manifest['metadata']['name']}"
    )


def dump_json(value: Any) -> str:
    """Stable, readable JSON for ConfigMap values."""
    return json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


_YAML_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml when present


def dump_yaml(value: Any, sort_keys: bool = True) -> str:
    """Stable YAML (libyaml's emitter writes the same bytes as PyYAML's, only faster)."""
    text = yaml.dump(value, Dumper=_YAML_DUMPER, sort_keys=sort_keys, allow_unicode=True, width=100)
    return str(text)


def short_hash(value: Any, length: int = 12) -> str:
    return sha256_hex(canonical_json(value))[:length]


__all__ = [
    "COMPONENT_LABEL",
    "MANAGED_BY",
    "MAX_CONFIGMAP_BYTES",
    "OWNER_LABELS",
    "PINNED_ANNOTATION",
    "RENDER_FORMAT",
    "RUN_FINISHED_LABEL",
    "RUN_LABEL",
    "ObjectRef",
    "Verdict",
    "config_map_name",
    "config_map_size",
    "content_digest",
    "dump_json",
    "dump_yaml",
    "errors_message",
    "invalid_verdict",
    "owner_reference",
    "rendered_config_map",
    "rendered_labels",
    "rendered_verdict",
    "short_hash",
]
