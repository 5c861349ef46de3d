"""Where the runner finds its inputs and writes its outputs.

Defaults are the mount points the operator uses (``swarmkit_api.bundle``). When the env var
``SWARMKIT_PATH_PREFIX`` is set (the local process node runs pods as processes and
materializes volumes under a temp dir), it is prepended to every *absolute default* path
and to the absolute paths the bundle carries (skill directories, flow data).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from swarmkit_api.bundle import (
    BUNDLE_FILE,
    BUNDLE_MOUNT,
    SCRATCH_MOUNT,
    SKILLS_MOUNT,
    TERMINATION_LOG,
)

PATH_PREFIX_ENV = "SWARMKIT_PATH_PREFIX"


def path_prefix() -> str:
    """The prefix from ``SWARMKIT_PATH_PREFIX`` ('' when unset)."""
    return os.environ.get(PATH_PREFIX_ENV, "").rstrip("/")


def prefixed(path: str) -> Path:
    """``path`` with the prefix prepended when it is absolute and a prefix is set."""
    prefix = path_prefix()
    if prefix and path.startswith("/"):
        return Path(prefix + path)
    return Path(path)


@dataclass(frozen=True)
class RunnerPaths:
    """Resolved paths of one runner process."""

    bundle_dir: Path
    #: Explicit ``--skills-dir``: skills live in ``<root>/<skill name>``. None = use
    #: each BundleSkill.directory (prefixed).
    skills_root: Path | None
    scratch: Path
    termination_log: Path

    @property
    def bundle_file(self) -> Path:
        return self.bundle_dir / BUNDLE_FILE

    def skill_dir(self, name: str, directory: str) -> Path:
        """The directory holding skill ``name``'s files."""
        if self.skills_root is not None:
            return self.skills_root / name
        if directory:
            return prefixed(directory)
        return prefixed(SKILLS_MOUNT) / name

    @classmethod
    def resolve(
        cls,
        bundle: str | None = None,
        skills_dir: str | None = None,
        scratch: str | None = None,
        termination_log: str | None = None,
    ) -> RunnerPaths:
        """Explicit arguments win (used as given); defaults get the prefix."""
        return cls(
            bundle_dir=Path(bundle) if bundle else prefixed(BUNDLE_MOUNT),
            skills_root=Path(skills_dir) if skills_dir else None,
            scratch=Path(scratch) if scratch else prefixed(SCRATCH_MOUNT),
            termination_log=Path(termination_log) if termination_log else prefixed(TERMINATION_LOG),
        )
