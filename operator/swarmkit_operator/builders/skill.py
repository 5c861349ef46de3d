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
from dataclasses import dataclass, field, replace
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
    config_map_name,
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
#: What the apiserver lets one ConfigMap hold (keys and decoded values).
PART_BUDGET = 1024 * 1024
#: On a part ConfigMap: the revision's ConfigMap it belongs to (GC keeps it while that is kept).
PART_OF = "swarmkit.dev/part-of"


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
    #: The part ConfigMap holding the content; "" = the revision's own ConfigMap.
    config_map: str = ""

    def wire(self) -> dict[str, Any]:
        out = {
            "key": self.key,
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
            "isScript": self.is_script,
            "binary": self.binary,
        }
        if self.config_map:
            out["configMap"] = self.config_map
        return out


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
    #: A large skill's part ConfigMaps (written before ``config_map``, which lists them).
    parts: tuple[dict[str, Any], ...] = ()
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


def _put(entry: FileEntry, raw: bytes, data: dict[str, str], binary: dict[str, str]) -> None:
    if entry.binary:
        binary[entry.key] = base64.b64encode(raw).decode()
    else:
        data[entry.key] = raw.decode()


def part_name(owner: ObjectRef, digest: str, index: int) -> str:
    """``skill-<name>-<hash8>-<n>``: the revision's part ``n`` (named from the revision's
    content hash, so a part is never shared between revisions and leaves with its own)."""
    return config_map_name(owner, digest, part=index)


def lay_out(
    owner: ObjectRef,
    digest: str,
    meta: Mapping[str, str],
    files: Sequence[FileEntry],
    contents: Sequence[bytes],
) -> tuple[list[FileEntry], dict[str, str], dict[str, str], list[dict[str, Any]], int] | str:
    """Where each file's bytes go: all in the revision's ConfigMap when they fit in one;
    else in part ConfigMaps of at most :data:`PART_BUDGET` bytes each (in path order), the
    revision's ConfigMap keeping the spec, SKILL.md and files.json (which names each
    file's part). Returns ``(files, data, binaryData, parts, size)``, or why it is refused."""
    data: dict[str, str] = dict(meta)
    binary: dict[str, str] = {}
    for entry, raw in zip(files, contents, strict=True):
        _put(entry, raw, data, binary)
    data[FILES_JSON] = dump_json([f.wire() for f in files])
    size = config_map_size(data, binary)
    if size <= PART_BUDGET:
        return list(files), data, binary, [], size
    total = sum(f.size for f in files)
    too_big = [f for f in files if f.size + len(f.key) > PART_BUDGET]
    if size > MAX_SKILL_BYTES or too_big:
        what = f"file {too_big[0].path} is {too_big[0].size} bytes" if too_big else ""
        return (
            f"the rendered skill is {size} bytes ({total} in {len(files)} file(s)), over the "
            f"{MAX_SKILL_BYTES}-byte limit; nothing rendered"
            if not too_big
            else f"{what}, over the {PART_BUDGET} bytes one ConfigMap holds; nothing rendered"
        )
    groups: list[list[int]] = [[]]
    used = 0
    for i, f in enumerate(files):
        if groups[-1] and used + f.size + len(f.key) > PART_BUDGET:
            groups.append([])
            used = 0
        groups[-1].append(i)
        used += f.size + len(f.key)
    placed = list(files)
    parts: list[dict[str, Any]] = []
    for n, group in enumerate(groups):
        name = part_name(owner, digest, n)
        part_data: dict[str, str] = {}
        part_binary: dict[str, str] = {}
        for i in group:
            placed[i] = replace(files[i], config_map=name)
            _put(files[i], contents[i], part_data, part_binary)
        part = rendered_config_map(owner, digest, part_data, part_binary, {PART_OF: ""})
        part["metadata"]["name"] = name
        parts.append(part)
    data = {**meta, FILES_JSON: dump_json([f.wire() for f in placed])}
    head = config_map_size(data)
    if head > PART_BUDGET:
        return (
            f"the skill's spec, SKILL.md and file list are {head} bytes, over the "
            f"{PART_BUDGET} bytes one ConfigMap holds; nothing rendered"
        )
    for part in parts:
        part["metadata"]["annotations"][PART_OF] = config_map_name(owner, digest)
    size = head + sum(config_map_size(p["data"], p.get("binaryData")) for p in parts)
    return placed, data, {}, parts, size


def skill_projection(
    head: str, items: Sequence[Mapping[str, Any]], parts: Mapping[str, str]
) -> dict[str, Any]:
    """The projected volume source of a large skill revision: its own ConfigMap (SKILL.md
    and any file kept there) and each part ConfigMap, with the volume items (``key``,
    ``path``, ``mode``) each holds; ``parts`` maps a file key to its part's name."""
    by_map: dict[str, list[Mapping[str, Any]]] = {head: []}
    for item in items:
        by_map.setdefault(parts.get(str(item["key"]), head), []).append(item)
    sources = [
        {"configMap": {"name": name, "items": [dict(i) for i in held]}}
        for name, held in by_map.items()
        if held
    ]
    return {"defaultMode": 0o444, "sources": sources}


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
    gathered = _gather_files(model, config_maps)
    if isinstance(gathered, str):
        return SkillRender(
            verdicts=(
                Verdict(ACCEPTED, "True", REASON_VALID, "the spec is valid"),
                _NOT_RENDERED,
                Verdict(READY, "False", REASON_CONFIG_MAP_NOT_FOUND, gathered),
            )
        )
    return _render(owner, model, gathered, config)


@dataclass(frozen=True)
class _FileContent:
    """One file of the skill with its bytes, gathered from the spec or a ConfigMap key."""

    path: str
    is_script: bool
    raw: bytes
    binary: bool


def _gather_files(
    model: SkillSpec, config_maps: Mapping[str, SourceConfigMap | None]
) -> list[_FileContent] | str:
    """Every file's bytes (inline or from a ConfigMap key) in path order, or which
    ConfigMaps or keys are missing (naming each file's field)."""
    missing: list[str] = []
    contents: list[_FileContent] = []
    for index, item in enumerate(model.files):
        if item.content is not None:
            contents.append(_FileContent(item.path, item.is_script, item.content.encode(), False))
            continue
        ref = item.config_map_ref
        assert ref is not None
        source = config_maps.get(ref.name)
        where = f"spec.files[{index}].configMapRef"
        if source is None:
            missing.append(f"{where}: ConfigMap {ref.name!r} not found")
        elif ref.key in source.data:
            raw = source.data[ref.key].encode()
            contents.append(_FileContent(item.path, item.is_script, raw, False))
        elif ref.key in source.binary_data:
            raw = base64.b64decode(source.binary_data[ref.key])
            contents.append(_FileContent(item.path, item.is_script, raw, True))
        else:
            missing.append(f"{where}: ConfigMap {ref.name!r} has no key {ref.key!r}")
    if missing:
        return "; ".join(missing)
    return sorted(contents, key=lambda c: c.path)


def _render(
    owner: ObjectRef, model: SkillSpec, contents: Sequence[_FileContent], config: OperatorConfig
) -> SkillRender:
    """The accepted skill hashed, laid out over its ConfigMap(s) and its scripts checked."""
    files = [
        FileEntry(
            f"{FILE_KEY_PREFIX}{i}", c.path, sha256_hex(c.raw), len(c.raw), c.is_script, c.binary
        )
        for i, c in enumerate(contents)
    ]
    normalized = normalized_spec(model)
    digest = content_hash(normalized, files)
    on_disk = {k: v for k, v in normalized.items() if k != "instructions"}
    meta = {
        SKILL_YAML: dump_yaml(on_disk),
        SKILL_MD: skill_md(owner.name, model.description, model.instructions),
    }
    layout = lay_out(owner, digest, meta, files, [c.raw for c in contents])
    if isinstance(layout, str):
        return _rejected(Verdict(ACCEPTED, "False", REASON_TOO_LARGE, layout))
    files, data, binary, parts, size = layout

    scripts = tuple(
        script_verdict(config, owner.namespace, owner.name, f.path, f.sha256)
        for f in files
        if f.is_script
    )
    manifest = rendered_config_map(owner, digest, data, binary)
    where = f"ConfigMap {manifest['metadata']['name']}" + (
        f" and {len(parts)} part ConfigMap(s)" if parts else ""
    )
    return SkillRender(
        verdicts=(
            Verdict(ACCEPTED, "True", REASON_VALID, "the spec is valid"),
            scripts_verdict(scripts),
            Verdict(
                READY,
                "True",
                REASON_RENDERED,
                f"rendered into {where} ({len(files)} file(s), {size} bytes)",
            ),
        ),
        content_hash=digest,
        config_map=manifest,
        parts=tuple(parts),
        scripts=scripts,
        files=tuple(files),
        size=size,
    )


def revision_mismatch(
    data: Mapping[str, str],
    immutable: bool,
    digest: str,
    binary: Mapping[str, str] | None = None,
    skill: str | None = None,
) -> str | None:
    """Why ``data`` and ``binary`` (a skill revision ConfigMap's) are not the operator's
    render of content ``digest`` (of Skill ``skill``, when given); None when they are:
    immutable, its spec and file list hash to ``digest``, its SKILL.md is the one they
    render, and every file it holds itself (text or binary) has the sha256 its
    list records. A large skill's parts are checked apart (:func:`part_mismatch`, by the
    same resolver). A Skill's reconcile adopts a render only when it is exactly that
    (:func:`~.trust.render_mismatch`); this is the check of whoever mounts it later."""
    if not immutable:
        return "it is not immutable"
    try:
        rendered = load_rendered_skill(data)
    except (KeyError, ValueError, TypeError, yaml.YAMLError) as exc:
        return f"it is not a skill render ({type(exc).__name__})"
    found = content_hash(normalized_spec(rendered.spec), rendered.files)
    if found != digest:
        return f"its content hashes to {found[:12]}, the pinned contentHash is {digest[:12]}"
    spec = rendered.spec
    if data.get(SKILL_MD) != skill_md(skill or rendered.name, spec.description, spec.instructions):
        return f"its {SKILL_MD} is not the one its spec renders"
    return files_mismatch(rendered.files, "", data, binary or {})


def part_mismatch(
    files: Sequence[FileEntry],
    name: str,
    data: Mapping[str, str],
    binary: Mapping[str, str],
    immutable: bool,
) -> str | None:
    """Why part ConfigMap ``name`` of a revision whose (checked) file list is ``files`` is
    not the operator's; None when it is immutable and holds each file the list places in
    it with the sha256 recorded there."""
    if not immutable:
        return "it is not immutable"
    return files_mismatch(files, name, data, binary)


def files_mismatch(
    files: Sequence[FileEntry], holder: str, data: Mapping[str, str], binary: Mapping[str, str]
) -> str | None:
    """The first file ``files`` places in ``holder`` ("" the revision's own ConfigMap, else
    a part's name) that ``data`` (text) or ``binary`` (base64) does not hold with the
    recorded sha256; None when every one is there."""
    for f in files:
        if f.config_map != holder:
            continue
        held = _held(f, data, binary)
        if held is None or sha256_hex(held) != f.sha256:
            return f"its file {f.path} does not have the sha256 its file list records"
    return None


def _held(f: FileEntry, data: Mapping[str, str], binary: Mapping[str, str]) -> bytes | None:
    """The bytes of ``f`` as a ConfigMap holds them (None: not there, or not base64)."""
    if not f.binary:
        return data[f.key].encode() if f.key in data else None
    try:
        return base64.b64decode(binary[f.key], validate=True)
    except (KeyError, ValueError):  # binascii.Error is a ValueError
        return None


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
            config_map=e.get("configMap", ""),
        )
        for e in json.loads(data.get(FILES_JSON, "[]"))
    )
    model = SkillSpec.model_validate(spec)
    return RenderedSkill(name=str(meta.get("name", "")), spec=model, files=files)
