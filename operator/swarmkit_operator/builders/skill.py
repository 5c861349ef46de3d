"""Skill → an immutable, content-addressed ConfigMap ``skill-<name>-<hash8>``.

Key scheme of the rendered ConfigMap (ConfigMap keys cannot contain ``/``):

``skill.yaml``
    The normalized spec (every default filled in, camelCase) **without** ``instructions``
    (they are the body of ``SKILL.md``) and without ``files`` (described by ``files.json``).
    :func:`load_rendered_skill` turns the ConfigMap back into a :class:`SkillSpec`.
``SKILL.md``
    YAML front-matter ``name`` (the Skill's metadata.name) and ``description``, then the
    ``instructions`` as the Markdown body.
``files.json``
    A JSON list, sorted by path, one entry per bundled file:
    ``{"key": "file.<i>", "path": "scripts/x.py", "sha256": "<hex>", "size": <bytes>,
    "isScript": true, "binary": false}``. ``<i>`` is the file's position in that list.
``file.<i>``
    The content of bundled file ``i`` under ``data`` (UTF-8 text) or, when it came from a
    ConfigMap's ``binaryData``, under ``binaryData`` (base64, as in the source).

To mount a skill at its real layout, a volume lists ``items``: ``{key: SKILL.md, path:
SKILL.md}`` plus ``{key: file.<i>, path: <path>}`` for every entry of ``files.json``.

``status.contentHash`` is the sha256 of the canonical JSON of ``{"format": RENDER_FORMAT,
"spec": <normalized spec incl. instructions, without files>, "files": [{path, sha256,
isScript}]}``: it changes with the body, any file and any script, and with nothing else.
The ConfigMap is named from it, so a given content always has the same name and a Run that
pinned a name always sees the same bytes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from swarmkit_api import ManifestError, validate_spec
from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_APPROVED,
    REASON_CONFIG_MAP_NOT_FOUND,
    REASON_DENIED_BY_WORKSPACE,
    REASON_EXECUTION_DISABLED,
    REASON_NAME_COLLISION,
    REASON_NO_SCRIPTS,
    REASON_NOT_ALLOW_LISTED,
    REASON_NOT_RENDERED,
    REASON_PIN_MISMATCH,
    REASON_RENDERED,
    REASON_TOO_LARGE,
    REASON_VALID,
    SCRIPTS_APPROVED,
)
from swarmkit_api.skill import MAX_SKILL_BYTES, SkillSpec
from swarmkit_api.workspace import Governance

from ..config import OperatorConfig
from ..hashing import canonical_json, sha256_hex
from . import (
    RENDER_FORMAT,
    ObjectRef,
    Verdict,
    config_map_size,
    dump_json,
    dump_yaml,
    invalid_verdict,
    rendered_config_map,
)

#: Skill names starting with this are synthesized by ``pack:workspace`` (one per Topology).
SYNTHESIZED_TOPOLOGY_PREFIX = "topology-"
SKILL_YAML = "skill.yaml"
SKILL_MD = "SKILL.md"
FILES_JSON = "files.json"
FILE_KEY_PREFIX = "file."


@dataclass(frozen=True)
class SourceConfigMap:
    """A user ConfigMap a skill file points at (``None`` where the map does not exist)."""

    data: Mapping[str, str] = field(default_factory=dict)
    binary_data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FileEntry:
    """One bundled file as rendered."""

    key: str
    path: str
    sha256: str
    size: int
    is_script: bool
    binary: bool = False

    def wire(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
            "isScript": self.is_script,
            "binary": self.binary,
        }


@dataclass(frozen=True)
class ScriptVerdict:
    """A bundled script and the operator's verdict on it (``status.scripts[]``)."""

    path: str
    sha256: str
    approved: bool
    reason: str
    message: str = ""

    def wire(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "approved": self.approved,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class SkillRender:
    """Everything a Skill reconcile decided."""

    verdicts: tuple[Verdict, ...]
    content_hash: str | None = None
    config_map: dict[str, Any] | None = None
    scripts: tuple[ScriptVerdict, ...] = ()
    files: tuple[FileEntry, ...] = ()
    size: int = 0

    @property
    def version(self) -> str | None:
        return self.content_hash[:12] if self.content_hash else None

    @property
    def config_map_name(self) -> str | None:
        return str(self.config_map["metadata"]["name"]) if self.config_map else None

    @property
    def ready(self) -> bool:
        return any(v.type == READY and v.status == "True" for v in self.verdicts)

    def status_fields(self) -> dict[str, Any]:
        """The Skill's status fields other than conditions (None clears a field)."""
        return {
            "contentHash": self.content_hash,
            "version": self.version,
            "renderedConfigMap": self.config_map_name,
            "scripts": [s.wire() for s in self.scripts],
        }


def referenced_config_maps(spec: Mapping[str, Any]) -> set[str]:
    """Names of the ConfigMaps the (possibly invalid) spec takes file content from."""
    names: set[str] = set()
    for item in spec.get("files") or ():
        if isinstance(item, Mapping):
            ref = item.get("configMapRef")
            if isinstance(ref, Mapping) and isinstance(ref.get("name"), str):
                names.add(ref["name"])
    return names


def skill_md(name: str, description: str, instructions: str) -> str:
    """SKILL.md: front-matter name/description, then the instructions."""
    front = dump_yaml({"name": name, "description": description}, sort_keys=False)
    return f"---\n{front}---\n\n{instructions}"


def script_verdict(
    config: OperatorConfig, namespace: str, skill: str, path: str, sha256: str
) -> ScriptVerdict:
    """The operator's verdict on one script: only its own configuration can approve it."""
    pin = config.pin_for(namespace, skill, path)
    if pin is not None and pin.sha256 != sha256:
        return ScriptVerdict(
            path,
            sha256,
            False,
            REASON_PIN_MISMATCH,
            f"{path}: sha256 {sha256[:12]}… does not match the pinned {pin.sha256[:12]}…",
        )
    if not config.allow_script_execution:
        return ScriptVerdict(
            path, sha256, False, REASON_EXECUTION_DISABLED, f"{path}: script execution is disabled"
        )
    if pin is None:
        return ScriptVerdict(
            path,
            sha256,
            False,
            REASON_NOT_ALLOW_LISTED,
            f"{path}: not in the operator's allow-list",
        )
    return ScriptVerdict(path, sha256, True, REASON_APPROVED, f"{path}: approved")


def workspace_script_verdict(
    verdict: ScriptVerdict, skill: str, governance: Governance | None
) -> ScriptVerdict:
    """Apply a Workspace's narrowing (deny) to an operator verdict; it never widens."""
    if not verdict.approved or governance is None:
        return verdict
    if not governance.allow_script_execution:
        return ScriptVerdict(
            verdict.path,
            verdict.sha256,
            False,
            REASON_DENIED_BY_WORKSPACE,
            f"{verdict.path}: the workspace disallows script execution",
        )
    for deny in governance.denied_scripts:
        if deny.skill == skill and (deny.path is None or deny.path == verdict.path):
            return ScriptVerdict(
                verdict.path,
                verdict.sha256,
                False,
                REASON_DENIED_BY_WORKSPACE,
                f"{verdict.path}: denied by the workspace",
            )
    return verdict


def scripts_verdict(scripts: Sequence[ScriptVerdict]) -> Verdict:
    """The ScriptsApproved condition: PinMismatch first, then any other refusal."""
    if not scripts:
        return Verdict(SCRIPTS_APPROVED, "True", REASON_NO_SCRIPTS, "the skill bundles no scripts")
    for reason in (REASON_PIN_MISMATCH, REASON_EXECUTION_DISABLED, REASON_NOT_ALLOW_LISTED):
        refused = [s for s in scripts if s.reason == reason]
        if refused:
            return Verdict(
                SCRIPTS_APPROVED,
                "False",
                reason,
                "; ".join(s.message for s in refused),
            )
    return Verdict(
        SCRIPTS_APPROVED,
        "True",
        REASON_APPROVED,
        f"{len(scripts)} script(s) approved: " + ", ".join(s.path for s in scripts),
    )


def _rejected(accepted: Verdict) -> SkillRender:
    """Not accepted: nothing rendered, Ready mirrors the reason."""
    return SkillRender(
        verdicts=(
            accepted,
            _NOT_RENDERED,
            Verdict(READY, "False", accepted.reason, accepted.message),
        )
    )


_NOT_RENDERED = Verdict(
    SCRIPTS_APPROVED, "Unknown", REASON_NOT_RENDERED, "scripts are checked once the skill renders"
)


def normalized_spec(spec: SkillSpec) -> dict[str, Any]:
    """The spec with defaults filled in, without files (their content is hashed apart)."""
    wire = spec.wire()
    wire.pop("files", None)
    return wire


def content_hash(normalized: Mapping[str, Any], files: Sequence[FileEntry]) -> str:
    return sha256_hex(
        canonical_json(
            {
                "format": RENDER_FORMAT,
                "spec": dict(normalized),
                "files": [
                    {"path": f.path, "sha256": f.sha256, "isScript": f.is_script} for f in files
                ],
            }
        )
    )


def render_skill(
    owner: ObjectRef,
    raw_spec: Mapping[str, Any],
    config_maps: Mapping[str, SourceConfigMap | None],
    config: OperatorConfig,
) -> SkillRender:
    """Validate, gather files, hash, approve scripts and render the ConfigMap."""
    if owner.name.startswith(SYNTHESIZED_TOPOLOGY_PREFIX):
        verdict = Verdict(
            ACCEPTED,
            "False",
            REASON_NAME_COLLISION,
            f"skill names starting with {SYNTHESIZED_TOPOLOGY_PREFIX!r} are reserved for the "
            "skills pack:workspace synthesizes for Topologies; rename the skill",
        )
        return _rejected(verdict)
    try:
        model = validate_spec("Skill", dict(raw_spec))
    except ManifestError as exc:
        return _rejected(invalid_verdict(exc))
    assert isinstance(model, SkillSpec)

    # Gather every file's bytes (inline or from a ConfigMap key).
    missing: list[str] = []
    contents: list[tuple[str, bool, bytes, bool]] = []  # path, script, bytes, binary
    for index, item in enumerate(model.files):
        if item.content is not None:
            contents.append((item.path, item.is_script, item.content.encode(), False))
            continue
        ref = item.config_map_ref
        assert ref is not None
        source = config_maps.get(ref.name)
        where = f"spec.files[{index}].configMapRef"
        if source is None:
            missing.append(f"{where}: ConfigMap {ref.name!r} not found")
        elif ref.key in source.data:
            contents.append((item.path, item.is_script, source.data[ref.key].encode(), False))
        elif ref.key in source.binary_data:
            raw = base64.b64decode(source.binary_data[ref.key])
            contents.append((item.path, item.is_script, raw, True))
        else:
            missing.append(f"{where}: ConfigMap {ref.name!r} has no key {ref.key!r}")
    if missing:
        message = "; ".join(missing)
        return SkillRender(
            verdicts=(
                Verdict(ACCEPTED, "True", REASON_VALID, "the spec is valid"),
                _NOT_RENDERED,
                Verdict(READY, "False", REASON_CONFIG_MAP_NOT_FOUND, message),
            )
        )

    contents.sort(key=lambda c: c[0])
    files: list[FileEntry] = []
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    for i, (path, is_script, raw, is_binary) in enumerate(contents):
        key = f"{FILE_KEY_PREFIX}{i}"
        files.append(FileEntry(key, path, sha256_hex(raw), len(raw), is_script, is_binary))
        if is_binary:
            binary[key] = base64.b64encode(raw).decode()
        else:
            data[key] = raw.decode()

    normalized = normalized_spec(model)
    digest = content_hash(normalized, files)
    on_disk = {k: v for k, v in normalized.items() if k != "instructions"}
    data[SKILL_YAML] = dump_yaml(on_disk)
    data[SKILL_MD] = skill_md(owner.name, model.description, model.instructions)
    data[FILES_JSON] = dump_json([f.wire() for f in files])

    size = config_map_size(data, binary)
    if size > MAX_SKILL_BYTES:
        verdict = Verdict(
            ACCEPTED,
            "False",
            REASON_TOO_LARGE,
            f"the rendered skill is {size} bytes ({sum(f.size for f in files)} in "
            f"{len(files)} file(s)), over the {MAX_SKILL_BYTES}-byte limit; nothing rendered",
        )
        return _rejected(verdict)

    scripts = tuple(
        script_verdict(config, owner.namespace, owner.name, f.path, f.sha256)
        for f in files
        if f.is_script
    )
    manifest = rendered_config_map(owner, digest, data, binary)
    return SkillRender(
        verdicts=(
            Verdict(ACCEPTED, "True", REASON_VALID, "the spec is valid"),
            scripts_verdict(scripts),
            Verdict(
                READY,
                "True",
                REASON_RENDERED,
                f"rendered into ConfigMap {manifest['metadata']['name']} "
                f"({len(files)} file(s), {size} bytes)",
            ),
        ),
        content_hash=digest,
        config_map=manifest,
        scripts=scripts,
        files=tuple(files),
        size=size,
    )


@dataclass(frozen=True)
class RenderedSkill:
    """A rendered skill ConfigMap read back: the spec and its files."""

    name: str
    spec: SkillSpec
    files: tuple[FileEntry, ...]


def load_rendered_skill(data: Mapping[str, str]) -> RenderedSkill:
    """Parse a ``skill-<name>-<hash8>`` ConfigMap's data back into a spec and file list.

    The returned spec has no ``files`` (their content stays in the ConfigMap; ``files``
    says where) and its ``instructions`` are the body of ``SKILL.md``.
    """
    spec = yaml.safe_load(data[SKILL_YAML]) or {}
    text = data[SKILL_MD]
    end = text.index("\n---\n", 3)
    meta = yaml.safe_load(text[4 : end + 1]) or {}
    spec["instructions"] = text[end + len("\n---\n\n") :]
    files = tuple(
        FileEntry(
            key=e["key"],
            path=e["path"],
            sha256=e["sha256"],
            size=e["size"],
            is_script=e["isScript"],
            binary=e.get("binary", False),
        )
        for e in json.loads(data.get(FILES_JSON, "[]"))
    )
    model = SkillSpec.model_validate(spec)
    return RenderedSkill(name=str(meta.get("name", "")), spec=model, files=files)
