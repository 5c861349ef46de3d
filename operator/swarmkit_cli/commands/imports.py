"""``kubectl swarmkit import PATH...``: SwarmKit workspaces, VectorStep skill directories
and Swarm bundles → swarmkit.dev/v1alpha1 manifests and a kustomization.

Every input field is mapped or reported: a field with no equivalent is a warning naming
file, line and field; an invalid document is an error naming file and field (validated by
the same models as admission). Errors (and, with ``--strict``, warnings) write nothing and
exit 1. The mapping rules are the README's tables.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from swarmkit_api.common import KEBAB

from ..console import Console
from ..importer.assemble import assemble
from ..importer.collected import Collected
from ..importer.emit import write_dir, write_stream
from ..importer.findings import Finding, Report
from ..importer.scan import scan
from ..plugin import EXIT_FINDINGS, EXIT_OK, UsageError, add_command


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "import",
        run,
        help="translate SwarmKit / VectorStep / Swarm sources into swarmkit.dev manifests",
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
        "--workspace",
        default="default",
        help="name of the Workspace the sources merge into (default: default)",
    )


def run(args: argparse.Namespace, console: Console) -> int:
    if not re.match(KEBAB, args.workspace):
        raise UsageError(f"--workspace {args.workspace!r}: must be lowercase-kebab")
    started = time.perf_counter()
    report = Report()
    col = Collected(report, workspace=args.workspace, secret=f"{args.workspace}-credentials")
    scan(col, [Path(p) for p in args.paths])
    output = assemble(col, args.namespace)
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
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        console.info(f"import failed: {len(errors)} error(s); nothing written")
        return EXIT_FINDINGS
    if args.output == "-":
        write_stream(console.out, output.manifests)
    else:
        write_dir(Path(args.output), output.manifests, output.secret_template, args.namespace)
    counts: dict[str, int] = {}
    for m in output.manifests:
        counts[m["kind"]] = counts.get(m["kind"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "nothing"
    elapsed = time.perf_counter() - started
    console.info(f"imported {summary} with {len(report.warnings)} warning(s) in {elapsed:.2f}s")
    if output.secret_template is not None:
        keys = ", ".join(output.secret_template["stringData"])
        target = (
            f"{args.output}/secret-{col.secret}.template.yaml"
            if args.output != "-"
            else f"a Secret {col.secret!r}"
        )
        console.info(f"fill in and apply once {target} (keys: {keys})")
    return EXIT_OK
