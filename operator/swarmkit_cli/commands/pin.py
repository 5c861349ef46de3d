"""``kubectl swarmkit pin SKILL_DIR|Skill...``: the Helm values that approve a skill's scripts.

Prints ``config.security.skills`` with ``allowScriptExecution: true`` and one
``allowed: {skill, path, sha256}`` entry per script, so approving a script is a reviewed
commit of a values file (``helm upgrade -f``). A directory argument is hashed on disk (the
same bytes ``import`` bundles); any other argument names a Skill in the cluster, whose
``status.scripts`` holds the hashes the operator computed. Helm replaces lists instead of
merging them, so pass every skill whose scripts should stay approved in one call.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from ..console import Console
from ..importer.skilldir import is_skill_dir, scripts
from ..importer.vectorstep import skill_name_of
from ..kube import check_name, connect
from ..plugin import EXIT_FINDINGS, EXIT_OK, CommandError, add_command, add_namespace_flag


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "pin",
        run,
        help="print the Helm values approving a skill's scripts (skill, path, sha256)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument(
        "skills",
        nargs="+",
        metavar="SKILL_DIR|Skill",
        help="a SKILL.md directory, or the name of a Skill (skill/NAME also works)",
    )
    add_namespace_flag(parser)
    parser.add_argument(
        "--with-namespace",
        action="store_true",
        help="restrict each entry to its namespace (default for Skills read from the cluster)",
    )


def run(args: argparse.Namespace, console: Console) -> int:
    entries: list[dict[str, Any]] = []
    kube = None
    try:
        for target in args.skills:
            path = Path(target)
            if path.is_dir():
                entries.extend(_from_dir(path, args.namespace if args.with_namespace else None))
                continue
            name = target.split("/", 1)[1] if target.lower().startswith("skill/") else target
            check_name("Skill", name)
            if kube is None:
                kube = connect(
                    args.kubeconfig,
                    args.namespace,
                    context=args.context,
                    as_user=args.as_user,
                    as_group=args.as_group,
                )
            entries.extend(_from_cluster(kube.get("Skill", name), console))
    finally:
        if kube is not None:
            kube.close()
    if not entries:
        console.error("no scripts to pin: the skills bundle no file under scripts/")
        return EXIT_FINDINGS
    console.write(render_values(entries))
    return EXIT_OK


def _from_dir(path: Path, namespace: str | None) -> list[dict[str, Any]]:
    if not is_skill_dir(path):
        raise CommandError(f"{path}: not a skill directory (no SKILL.md)")
    skill = skill_name_of(path)
    out: list[dict[str, Any]] = []
    for f in scripts(path):
        entry: dict[str, Any] = {"skill": skill, "path": f.path, "sha256": f.sha256}
        if namespace:
            entry = {"namespace": namespace, **entry}
        out.append(entry)
    return out


def _from_cluster(obj: dict[str, Any], console: Console) -> list[dict[str, Any]]:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    name = meta.get("name", "")
    if not status.get("contentHash"):
        raise CommandError(
            f"Skill {name!r} has not been rendered yet (no status.contentHash); "
            "is the operator running and the skill Accepted?"
        )
    if status.get("observedGeneration") != meta.get("generation"):
        console.warn(f"Skill {name!r}: status is older than the spec; hashes may be stale")
    return [
        {
            "namespace": meta.get("namespace", ""),
            "skill": name,
            "path": s["path"],
            "sha256": s["sha256"],
        }
        for s in status.get("scripts") or []
    ]


def render_values(entries: list[dict[str, Any]]) -> str:
    """The Helm values snippet (sorted, deduplicated) approving ``entries``."""
    unique = {(e.get("namespace", ""), e["skill"], e["path"]): e for e in entries}
    allowed = [unique[k] for k in sorted(unique)]
    values = {
        "config": {"security": {"skills": {"allowScriptExecution": True, "allowed": allowed}}}
    }
    header = (
        "# kubectl swarmkit pin: script approvals for the swarmkit-operator chart.\n"
        "# Helm replaces lists: keep every approved script in this one list.\n"
    )
    return header + yaml.safe_dump(values, sort_keys=False)
