"""Where the runner finds its inputs and writes its outputs.

Defaults are the mount points the operator uses (``swarmkit_api.bundle``). When the env var
``SWARMKIT_PATH_PREFIX`` is set (the local process node runs pods as processes: inside such
a pod the absolute container path P is the host path ``$SWARMKIT_PATH_PREFIX + P``), it is
prepended to every absolute path the runner uses: defaults, ``--bundle`` & co., and the
paths the bundle carries (skill directories, flow data). Like the process node's own
helper it is idempotent: a path already under the prefix is left alone. Unset (a real
cluster) it changes nothing.
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
    host_path,
)


def prefixed(path: str) -> Path:
    """``path`` as a host path (see :func:`swarmkit_api.bundle.host_path`)."""
    return Path(host_path(path))


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
        """Explicit arguments win over the defaults; all of them get the prefix."""
        return cls(
            bundle_dir=prefixed(bundle or BUNDLE_MOUNT),
            skills_root=prefixed(skills_dir) if skills_dir else None,
            scratch=prefixed(scratch or SCRATCH_MOUNT),
            termination_log=prefixed(termination_log or TERMINATION_LOG),
        )
