"""Agent Skills / VectorStep skill directories (``<name>/SKILL.md`` + bundled files) →
Skills, following the agentskills.io specification.

Front matter ``name`` (1-64 lowercase letters, digits and single hyphens, equal to the
directory name) → ``metadata.name``; ``description`` → ``spec.description``; ``license``,
``compatibility``, ``allowed-tools`` and every ``metadata`` entry → annotations under
``agentskills.io/`` (``allowed-tools`` grants nothing here: running a bundled script is
the operator's allow-list's decision); the Markdown body → ``spec.instructions``; every
other file → ``spec.files`` (UTF-8 text inline; binary files base64 in generated
ConfigMaps ``<skill>-files[-<n>]`` of at most 1 MiB each). Such skills have no category or
provenance: they import as ``capability``, authored by ``human``, version from
``metadata.version`` (or the VectorStep ``version`` field; default ``1.0.0``).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

from swarmkit_api.skill import SkillSpec

from .collected import Collected, Piece, source_annotation
from .description import fit_description
from .frontmatter import SkillMarkdown, parse_skill_md
from .mapping import Fields, Src, check
from .safefs import Refused, read_text
from .sizes import SPEC_INLINE_BUDGET, chunk
from .skilldir import SKILL_MD, BundledFile, bundled_files, symlinks
from .yamlsrc import Doc, YamlError

DEFAULT_VERSION = "1.0.0"
FRONT_FIELDS = (
    "name, description, license, compatibility, metadata, allowed-tools "
    "(agentskills.io); version, category, authored_by (VectorStep)"
)
#: agentskills.io: 1-64 characters, a-z 0-9 and hyphens, no leading, trailing or double hyphen
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ANNOTATION_PREFIX = "agentskills.io/"
_ANNOTATION_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _annotations(f: Fields) -> dict[str, str]:
    """The standard optional front matter fields, kept as annotations."""
    out: dict[str, str] = {}
    for key in ("license", "compatibility", "allowed-tools"):
        if key in f:
            value = f.take(key)
            if key == "compatibility" and isinstance(value, str) and len(value) > 500:
                f.warn(key, "longer than the 500 characters the specification allows")
            out[ANNOTATION_PREFIX + key] = value if isinstance(value, str) else str(value)
    if "metadata" in f:
        meta = f.sub("metadata")
        for key, value in meta.take_all().items():
            annotation = f"metadata.{key}"
            if not _ANNOTATION_NAME.match(annotation):
                meta.warn(key, f"annotation name {annotation!r} is not valid; not imported")
                continue
            out[ANNOTATION_PREFIX + annotation] = str(value)
    return out


def skill_name_of(skill_dir: Path) -> str:
    """The skill's name: front-matter ``name``, else the directory name."""
    try:
        md = parse_skill_md(read_text(skill_dir / SKILL_MD), str(skill_dir))
    except (YamlError, UnicodeDecodeError, Refused):
        return skill_dir.resolve().name
    if md.front is not None and isinstance(md.front.value, dict):
        name = md.front.value.get("name")
        if isinstance(name, str) and name:
            return name
    return skill_dir.resolve().name


def shown_rel(skill_dir: Path, shown: str, path: str) -> str:
    """``path`` (a file of the skill) named as findings name the skill's files."""
    return str(Path(shown).parent / Path(path).relative_to(skill_dir))


def _read_skill_md(col: Collected, skill_dir: Path, shown: str) -> SkillMarkdown | None:
    """SKILL.md with front matter, or None (reported)."""
    report = col.report
    try:
        md = parse_skill_md(read_text(skill_dir / SKILL_MD), shown)
    except Refused as exc:
        # A symlinked SKILL.md (or a special or oversized one): nothing of the skill is read.
        report.warn(shown, None, "", f"{exc.reason}; the skill is not imported")
        return None
    except UnicodeDecodeError:
        report.error(shown, None, "", "SKILL.md is not UTF-8 text")
        return None
    except YamlError as exc:
        report.error(exc.file, exc.line, "front matter", exc.message)
        return None
    if md.front is None:
        report.error(
            shown, 1, "front matter", "SKILL.md needs YAML front matter (--- name, description ---)"
        )
        return None
    return md


def _place_files(
    name: str, bundled: list[BundledFile], src: Src
) -> tuple[list[dict[str, Any]], list[Piece], int]:
    """``spec.files`` entries, the generated ``<name>-files[-<n>]`` ConfigMaps and the bytes
    they hold. Binary files go to the ConfigMaps (base64 under ``binaryData``); text stays
    inline unless the Skill object would grow past SPEC_INLINE_BUDGET (a Kubernetes object
    is at most ~1.5 MiB in etcd): then every file goes to them (text under ``data``)."""
    files: list[dict[str, Any]] = []
    binary: dict[str, bytes] = {}
    entries: dict[str, dict[str, Any]] = {}
    texts = [bf.text() for bf in bundled]
    inline = sum(len(t.encode()) for t in texts if t is not None) <= SPEC_INLINE_BUDGET
    text_keys: set[str] = set()
    for bf, content in zip(bundled, texts, strict=True):
        entry: dict[str, Any] = {"path": bf.path}
        if content is None or not inline:
            key = "f" + str(len(binary)) + "." + bf.path.rsplit("/", 1)[-1]
            key = "".join(c if c.isalnum() or c in "-._" else "-" for c in key)
            binary[key] = bf.data
            entries[key] = entry
            if content is not None:
                text_keys.add(key)
        else:
            entry["content"] = content
        if bf.executable and not bf.path.startswith("scripts/"):
            entry["executable"] = True
        files.append(entry)
    groups = chunk([(k, len(v)) for k, v in binary.items()]) if binary else []
    maps = []
    for i, keys in enumerate(groups):
        cm = f"{name}-files" if len(groups) == 1 else f"{name}-files-{i}"
        for key in keys:
            entries[key]["configMapRef"] = {"name": cm, "key": key}
        body: dict[str, Any] = {}
        text = {k: binary[k].decode() for k in keys if k in text_keys}
        data = {k: base64.b64encode(binary[k]).decode("ascii") for k in keys if k not in text}
        if text:
            body["data"] = text
        if data:
            body["binaryData"] = data
        maps.append(Piece(cm, body, src, source_annotation(src)))
    return files, maps, sum(len(v) for v in binary.values())


def read_skill_dir(col: Collected, skill_dir: Path, shown: str) -> None:
    """Map one SKILL.md directory; ``shown`` is how its SKILL.md is named in findings."""
    report = col.report
    dir_name = skill_dir.resolve().name
    md = _read_skill_md(col, skill_dir, shown)
    if md is None:
        return
    doc = md.front or Doc(shown, {}, start_line=1)
    for path, line in doc.duplicates:
        report.warn(shown, line, ".".join(map(str, path)), "duplicate key: the last one wins")
    f = Fields(report, Src(doc))
    name = f.take("name")
    description = f.take("description")
    annotations = _annotations(f)
    meta_version = (f.data.get("metadata") or {}).get("version") if "metadata" in f else None
    version = f.take("version", meta_version or DEFAULT_VERSION)
    category = f.take("category", "capability")
    authored_by = f.take("authored_by", "human")
    f.finish(FRONT_FIELDS)
    if name is None:
        f.error(None, "name is required")
        return
    if not isinstance(name, str) or len(name) > 64 or not NAME_RE.match(name):
        f.error(
            "name",
            f"{name!r}: 1-64 lowercase letters, digits and single hyphens, not "
            "starting or ending with a hyphen (agentskills.io)",
        )
        return
    if name != dir_name:
        f.error("name", f"must match the directory name {dir_name!r}, got {name!r}")
        return
    if description is None:
        f.error(None, "description is required (write it like a router: when to use it)")
        return
    instructions = md.body
    if isinstance(description, str):
        description, instructions = fit_description(
            f, "description", description.strip(), instructions
        )
    spec: dict[str, Any] = {
        "description": description,
        "category": category,
        "provenance": {"authoredBy": authored_by, "version": str(version)},
        "instructions": instructions,
    }
    for link in symlinks(skill_dir):
        report.warn(
            f"{Path(shown).parent / link}",
            None,
            "",
            "symlink inside a skill is not followed; not imported",
        )
    try:
        bundled = bundled_files(skill_dir)
    except Refused as exc:
        report.error(
            shown_rel(skill_dir, shown, exc.path),
            None,
            "",
            f"{exc.reason}; the skill is not imported",
        )
        return
    files, maps, external = _place_files(str(name), bundled, Src(doc))
    if files:
        spec["files"] = files
    src = Src(doc)
    if not check(report, SkillSpec, spec, src, f"Skill {name!r}"):
        return
    col.skills.append(
        Piece(
            str(name),
            spec,
            src,
            {**source_annotation(src), **annotations},
            extra={"external_bytes": external, "config_maps": [m.name for m in maps]},
        )
    )
    col.config_maps.extend(maps)
