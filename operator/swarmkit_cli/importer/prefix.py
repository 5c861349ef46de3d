"""``--prefix PATH=PREFIX``: name collisions across collections.

Two collections that each define a skill ``pdf`` cannot both be imported as they are;
``--prefix vendor-a=a --prefix vendor-b=b`` imports them as ``a-pdf`` and ``b-pdf``. Every
Skill, Agent, Topology and generated ConfigMap read under PATH is renamed, and references
between objects read under the same PATH (grants, archetypes, topology nodes, composed
skills, child topologies, file ConfigMaps) follow; references to names defined elsewhere
are left alone. The original name is kept in the ``swarmkit.dev/source-name`` annotation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .collected import Collected, Piece

SOURCE_NAME_ANNOTATION = "swarmkit.dev/source-name"


def _under(piece: Piece, root: Path) -> bool:
    path = Path(piece.src.file).resolve()
    return path == root or root in path.parents


def apply_prefixes(col: Collected, prefixes: tuple[tuple[Path, str], ...]) -> None:
    for raw_root, prefix in prefixes:
        root = raw_root.resolve()
        groups = (col.skills, col.agents, col.topologies, col.config_maps)
        mine = [[p for p in group if _under(p, root)] for group in groups]
        renames = [{p.name: f"{prefix}-{p.name}" for p in group} for group in mine]
        skills, agents, topologies, maps = renames
        for group, names in zip(mine, renames, strict=True):
            for p in group:
                p.annotations = {**p.annotations, SOURCE_NAME_ANNOTATION: p.name}
                p.name = names[p.name]
        for p in mine[0]:
            impl = p.body.get("implementation") or {}
            if isinstance(impl.get("composes"), list):
                impl["composes"] = [skills.get(s, s) for s in impl["composes"]]
            if isinstance(impl.get("topology"), str):
                impl["topology"] = topologies.get(impl["topology"], impl["topology"])
            for f in p.body.get("files") or []:
                ref = f.get("configMapRef")
                if ref is not None:
                    ref["name"] = maps.get(ref["name"], ref["name"])
            p.extra["config_maps"] = [maps.get(m, m) for m in p.extra.get("config_maps", [])]
        for p in mine[1]:
            _rename_grants(p.body, skills)
            parts: dict[str, Any] = p.extra.get("parts") or {}
            _rename_grants(parts, skills)
            base = p.extra.get("base")
            if isinstance(base, str):
                p.extra["base"] = agents.get(base, base)
        for p in mine[2]:
            for node in p.body.get("agents", []):
                ref = node["agentRef"]["name"]
                node["agentRef"]["name"] = agents.get(ref, ref)


def _rename_grants(body: dict[str, Any], skills: dict[str, str]) -> None:
    for key in ("skills", "skills_additional"):
        if isinstance(body.get(key), list):
            body[key] = [skills.get(s, s) if isinstance(s, str) else s for s in body[key]]
