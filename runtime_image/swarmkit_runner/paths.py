"""Where the runner finds its inputs and writes its outputs.

Defaults are the mount points the operator uses (``swarmkit_api.bundle``); explicit
arguments (``--bundle`` & co.) override them. Paths are used as they are: the runner sees its
pod's filesystem, on a real node and on the local process node alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from swarmkit_api.bundle import (
    BUNDLE_FILE,
    BUNDLE_MOUNT,
    SCRATCH_MOUNT,
    SKILLS_MOUNT,
    TERMINATION_LOG,
)


@dataclass(frozen=True)
class RunnerPaths:
    """Resolved paths of one runner process."""

    bundle_dir: Path
    #: Explicit ``--skills-dir``: skills live in ``<root>/<skill name>``. None = use
    #: each BundleSkill.directory.
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
            return Path(directory)
        return Path(SKILLS_MOUNT) / name

    @classmethod
    def resolve(
        cls,
        bundle: str | None = None,
        skills_dir: str | None = None,
        scratch: str | None = None,
        termination_log: str | None = None,
    ) -> RunnerPaths:
        """Explicit arguments win over the defaults."""
        return cls(
            bundle_dir=Path(bundle or BUNDLE_MOUNT),
            skills_root=Path(skills_dir) if skills_dir else None,
            scratch=Path(scratch or SCRATCH_MOUNT),
            termination_log=Path(termination_log or TERMINATION_LOG),
        )
