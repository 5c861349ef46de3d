"""``kubectl swarmkit import PATH...``: SwarmKit workspaces, Swarm bundles and Agent Skills
(SKILL.md) collections → swarmkit.dev/v1alpha1 manifests and a kustomization.

Every input field is mapped or reported: a field with no equivalent is a warning naming
file, line and field; an invalid document is an error naming file and field (validated by
the same models as admission). Errors (and, with --strict, warnings) write nothing and
exit 1, unless --skip-invalid: then everything else is written, with a report of what
was left out and why. Importing nothing exits 1 with the reason. The mapping rules are the
tables of the docs' how-to "Import a workspace". Apply the result with server-side apply
(no 256 KiB last-applied annotation limit): kubectl apply --server-side -k DIR.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

import yaml

from swarmkit_api.common import KEBAB

from ..console import Console
from ..importer.emit import write_dir, write_stream
from ..importer.findings import Finding
from ..importer.pipeline import Options
from ..importer.pipeline import run as run_import
from ..plugin import EXIT_FINDINGS, EXIT_OK, CommandError, UsageError, add_command

SKIPPED_REPORT = "import-skipped.yaml"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "import",
        run,
        help="translate SwarmKit / Swarm / Agent Skills sources into swarmkit.dev manifests",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to read")
    parser.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="namespace set on every object and in kustomization.yaml",
    )
    parser.add_argument(
        "-o",
        "--output",
        default="-",
        metavar="DIR|-",
        help="directory to write (one file per object + kustomization.yaml), "
        "or - for one YAML stream on stdout (default)",
    )
    parser.add_argument("--strict", action="store_true", help="treat every warning as an error")
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help=f"leave out what has errors, write the rest and {SKIPPED_REPORT} (why)",
    )
    parser.add_argument(
        "--prefix",
        action="append",
        default=[],
        metavar="PATH=PREFIX",
        help="name every Skill/Agent/Topology read under PATH PREFIX-<name> (repeatable; "
        "for name collisions across collections)",
    )
    parser.add_argument(
        "--model-alias",
        action="append",
        default=[],
        metavar="ALIAS=PROVIDER/MODEL",
        help="resolve a Swarm model alias (e.g. regular=openai/gpt-4.1); repeatable",
    )
    parser.add_argument(
        "--workspace",
        default=None,
        help="name of the Workspace the sources merge into (default: workspace.yaml's "
        "metadata.id, else default)",
    )


def _pairs(values: list[str], flag: str, check: str) -> list[tuple[str, str]]:
    out = []
    for value in values:
        key, eq, target = value.partition("=")
        if not eq or not key or not re.match(check, target):
            raise UsageError(f"{flag} {value!r}: expected {flag[2:].upper()}=VALUE")
        out.append((key, target))
    return out


def _checked_arguments(args: argparse.Namespace) -> str:
    """The Workspace name, once the arguments a user can get wrong are checked."""
    workspace: str = args.workspace or "default"
    if not re.match(KEBAB, workspace):
        raise UsageError(f"--workspace {workspace!r}: must be lowercase-kebab")
    for path in args.paths:
        if not os.path.lexists(path):
            raise CommandError(f"{path}: no such file or directory")
    return workspace


def run(args: argparse.Namespace, console: Console) -> int:
    workspace = _checked_arguments(args)
    prefixes = tuple((Path(p), prefix) for p, prefix in _pairs(args.prefix, "--prefix", KEBAB))
    aliases = dict(_pairs(args.model_alias, "--model-alias", r"^[a-z0-9-]+/\S+$"))
    started = time.perf_counter()
    options = Options(
        workspace=workspace,
        workspace_fixed=args.workspace is not None,
        namespace=args.namespace,
        model_aliases=aliases,
        prefixes=prefixes,
        skip_invalid=args.skip_invalid,
    )
    result = run_import([Path(p) for p in args.paths], options)
    report, output, col = result.report, result.output, result.collected
    findings = report.findings
    if args.strict:
        findings = [
            Finding("error", f.file, f.line, f.field, f.message + " (--strict)")
            if f.severity == "warning"
            else f
            for f in findings
        ]
    for f in findings:
        (console.error if f.severity == "error" else console.warn)(str(f))
    for f in result.skipped:
        console.error(f"{f} (skipped)")
    for note in report.notes:
        console.info(note)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        console.info(f"import failed: {len(errors)} error(s); nothing written")
        return EXIT_FINDINGS
    if not output.manifests:
        console.error(
            "imported nothing: no SwarmKit document, Swarm file or SKILL.md directory under "
            f"{', '.join(args.paths)} (hidden directories are searched, except tooling "
            "state such as .git and .venv)"
        )
        return EXIT_FINDINGS
    if args.output == "-":
        write_stream(console.out, output.manifests)
    else:
        out_dir = Path(args.output)
        write_dir(
            out_dir,
            output.manifests,
            output.secret_template,
            args.namespace,
            output.secret_hints,
        )
        if result.skipped:
            rows = [
                {"file": f.file, "line": f.line, "field": f.field, "reason": f.message}
                for f in result.skipped
            ]
            (out_dir / SKIPPED_REPORT).write_text(
                yaml.safe_dump({"skipped": rows}, sort_keys=False, allow_unicode=True)
            )
    counts: dict[str, int] = {}
    for m in output.manifests:
        counts[m["kind"]] = counts.get(m["kind"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    elapsed = time.perf_counter() - started
    console.info(f"imported {summary} with {len(report.warnings)} warning(s) in {elapsed:.2f}s")
    if result.skipped:
        where = f" (listed in {args.output}/{SKIPPED_REPORT})" if args.output != "-" else ""
        console.info(f"left out what {len(result.skipped)} error(s) belong to{where}")
    if output.secret_template is not None:
        keys = ", ".join(output.secret_template["stringData"])
        target = (
            f"{args.output}/secret-{col.secret}.template.yaml"
            if args.output != "-"
            else f"a Secret {col.secret!r}"
        )
        console.info(f"fill in and apply once {target} (keys: {keys})")
    if args.output != "-":
        console.info(f"apply with: kubectl apply --server-side -k {args.output}")
    return EXIT_OK
