"""The apiserver's and the operator's size limits, known at import time.

A ConfigMap holds at most 1 MiB (keys and decoded values): a skill's binary files (and all
its files, once its text would make the Skill object large) are spread over as many
``<skill>-files-<n>`` ConfigMaps as they need. The operator renders a Skill (spec,
SKILL.md, every file) into one ConfigMap, or a revision's parts past 1 MiB, and refuses
one over ``MAX_SKILL_BYTES`` (``TooLarge``); :func:`rendered_skill_bytes` estimates that
size from above, so a skill the operator would refuse is reported by ``import`` instead.
"""

from __future__ import annotations

import json
from typing import Any

from swarmkit_api.skill import MAX_SKILL_BYTES

#: The apiserver's limit on a ConfigMap's data.
CONFIG_MAP_LIMIT = 1024 * 1024
#: What one generated files ConfigMap may carry (room for metadata and keys).
CHUNK_BUDGET = CONFIG_MAP_LIMIT - 16 * 1024
#: Text files a Skill object carries inline at most; past it every file goes to ConfigMaps
#: (etcd stores an object of at most ~1.5 MiB, the Skill's status and metadata included).
SPEC_INLINE_BUDGET = 512 * 1024
#: Per-file overhead of the rendered skill (its key, its files.json entry).
_PER_FILE = 256

__all__ = [
    "CHUNK_BUDGET",
    "CONFIG_MAP_LIMIT",
    "MAX_SKILL_BYTES",
    "SPEC_INLINE_BUDGET",
    "chunk",
    "rendered_skill_bytes",
]


def rendered_skill_bytes(spec: dict[str, Any], external: int) -> int:
    """An upper estimate of the operator's rendered ConfigMap for ``spec``.

    ``external`` is the decoded size of the files the spec takes from ConfigMaps.
    """
    files = spec.get("files") or []
    inline = sum(len(str(f.get("content", "")).encode()) for f in files)
    rest = {k: v for k, v in spec.items() if k not in ("files", "instructions")}
    meta = len(json.dumps(rest).encode()) + len(str(spec.get("description", "")).encode())
    return (
        inline
        + external
        + len(str(spec.get("instructions", "")).encode())
        + meta
        + _PER_FILE * (len(files) + 3)
    )


def chunk(sizes: list[tuple[str, int]]) -> list[list[str]]:
    """Keys grouped so each group's decoded bytes (plus keys) fit one ConfigMap."""
    groups: list[list[str]] = [[]]
    used = 0
    for key, size in sizes:
        need = size + len(key)
        if groups[-1] and used + need > CHUNK_BUDGET:
            groups.append([])
            used = 0
        groups[-1].append(key)
        used += need
    return groups
