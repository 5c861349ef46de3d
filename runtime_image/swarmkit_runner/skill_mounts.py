"""Every mounted skill (and flow data) file checked against the digest in the bundle.

The operator checks a skill revision ConfigMap (its content hash, its SKILL.md, the sha256
of each file) when it builds or resumes a Run's pod, but the kubelet mounts the ConfigMap
later; in between, anyone who may delete and create ConfigMaps in the namespace (built-in
``edit``) can put another ConfigMap under the revision's name, and the pod would mount hers.
So the bundle carries, per skill, the sha256 of each file the pod mounts
(``BundleSkill.files_sha256``: SKILL.md and every bundled file, by path), and the bundle
itself is the very file the operator wrote (its sha256 is in the Job's env, which only the
operator writes; :func:`.bundle.load_bundle`). :func:`check_skill_files` hashes every one of
those files before anything runs (no model call, no MCP server, no script) and refuses the
run on the first difference with :class:`~.errors.TamperedFile` (outcome ``TamperedObject``)
naming the skill, the file and the ConfigMap. Scripts are checked again before every run
(:mod:`.scripts`); a revision ConfigMap is immutable, so what a started pod mounted stays.

The flow data files mounted from the bundle ConfigMap beside ``bundle.json`` (``flow.<n>``
keys) are checked the same way (:func:`check_flow_files`, against
``RunBundle.flow_data_sha256``): the Job's sha256 covers ``bundle.json`` only, so a bundle
ConfigMap re-created with the same ``bundle.json`` and another flow file would pass that.

A bundle without digests (written before they existed, e.g. a Run parked across the
upgrade) is not checked here: the resolver checked its revisions when it built the pod.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from swarmkit_api.bundle import BundleSkill, RunBundle

from .errors import TamperedFile
from .paths import RunnerPaths


def _sha256(path: Path) -> str | None:
    """The sha256 of the file at ``path`` (None: not there, or not a readable file)."""
    try:
        with path.open("rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def check_skill(skill: BundleSkill, root: Path) -> int:
    """Check each file of ``skill`` mounted under ``root``; the number checked."""
    where = f"ConfigMap {skill.config_map}" if skill.config_map else "its ConfigMap"
    for path, expected in sorted(skill.files_sha256.items()):
        found = _sha256(root / path)
        if found is None:
            raise TamperedFile(
                f"skill {skill.name}: file {path} is not mounted from {where} as the operator "
                "rendered it (the file is missing): refusing to run"
            )
        if found != expected:
            raise TamperedFile(
                f"skill {skill.name}: file {path} is not the one the operator rendered "
                f"(sha256 {found[:12]}, the bundle records {expected[:12]}): {where} was "
                "replaced after the operator checked it; refusing to run"
            )
    return len(skill.files_sha256)


def check_skill_files(bundle: RunBundle, paths: RunnerPaths) -> int:
    """Check every mounted file of every skill of ``bundle`` against the digests it records
    (see the module docstring); the number of files checked. Raises
    :class:`~.errors.TamperedFile` naming the first file that differs or is missing."""
    checked = 0
    for name in sorted(bundle.skills):
        skill = bundle.skills[name]
        if skill.files_sha256:
            checked += check_skill(skill, paths.skill_dir(name, skill.directory))
    return checked


def check_flow_files(bundle: RunBundle) -> int:
    """Check each flow data file mounted under ``bundle.flow_data_dir`` against the digest
    the bundle records; the number checked. Raises :class:`~.errors.TamperedFile`."""
    if not bundle.flow_data_dir:
        return 0
    root = Path(bundle.flow_data_dir)
    for path, expected in sorted(bundle.flow_data_sha256.items()):
        found = _sha256(root / path)
        if found != expected:
            what = "missing" if found is None else f"sha256 {found[:12]}"
            raise TamperedFile(
                f"flow data file {path} is not the one the operator copied into the run's "
                f"bundle ConfigMap ({what}, the bundle records {expected[:12]}): the "
                "ConfigMap was replaced after the operator checked it; refusing to run"
            )
    return len(bundle.flow_data_sha256)


__all__ = ["check_flow_files", "check_skill", "check_skill_files"]
