"""Command line: ``python -m swarmkit_runner run|validate|gateway|serve --bundle DIR``.

``gateway`` serves the bundle's agent over MCP (:mod:`.gateway`) until SIGTERM; it exits 2
when the bundle is bad or a token Secret is missing, 0 after a clean shutdown.

``serve --bundle DIR [--port 8080] [--max-concurrent-tasks N] [--drain-seconds S]
[--input-timeout S]`` serves the bundle's topology over A2A (:mod:`.serve`) until SIGTERM.

``--checkpoint FILE --decision FILE`` resume a parked run (:mod:`.journal`).

Exit codes: 0 the run Succeeded (or parked AwaitingReview: nothing to retry), 1 any other
outcome, 2 the bundle is bad (outcome ValidationFailed with a one-line reason) or a mounted
skill file is not the one the operator wrote (TamperedObject, naming the skill and file). The
RunResult JSON goes to the termination log, audit events (JSON lines) to stdout,
diagnostics to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from swarmkit_api.bundle import CHECKPOINT_SHA256_ENV
from swarmkit_api.review import Checkpoint, ResumeDecision

from . import __version__, spans
from .audit import AuditLog, warn_short_secrets
from .bundle import load_mounted
from .errors import BundleError, StartupError
from .init import become_init
from .journal import Journal
from .paths import RunnerPaths
from .result import exit_code, make_result, write_termination_log
from .runner import execute
from .secrets import SecretStore, scrub_standard_streams, seal_process

if TYPE_CHECKING:
    from swarmkit_api.bundle import RunBundle


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swarmkit-runner", description="Run one SwarmKit Run bundle (the process in a Job)."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("run", "run the bundle and write the result to the termination log"),
        ("validate", "only load and check the bundle (exit 0 or 2)"),
    ):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument(
            "--bundle",
            metavar="DIR",
            help="directory holding bundle.json (default /etc/swarmkit/bundle)",
        )
        cmd.add_argument(
            "--skills-dir",
            metavar="DIR",
            help="root of the skills (<DIR>/<skill>/...); default: each skill's mounted "
            "directory from the bundle",
        )
        cmd.add_argument("--scratch", metavar="DIR", help="writable scratch dir (default /scratch)")
        cmd.add_argument(
            "--termination-log",
            metavar="PATH",
            help="where the result JSON goes (default /dev/termination-log)",
        )
        cmd.add_argument(
            "--checkpoint",
            metavar="FILE",
            help="resume a parked run from this checkpoint (the operator mounts it)",
        )
        cmd.add_argument(
            "--decision",
            metavar="FILE",
            help="with --checkpoint: the review decision to resume with (decision.json)",
        )
    gw = sub.add_parser("gateway", help="serve the bundle's agent over MCP (streamable HTTP)")
    gw.add_argument("--bundle", metavar="DIR", help="directory holding bundle.json")
    gw.add_argument("--skills-dir", metavar="DIR", help="root of the skills")
    gw.add_argument("--scratch", metavar="DIR", help="writable scratch dir (default /scratch)")
    gw.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    gw.add_argument("--port", type=int, help="port (default: the bundle's gateway.port)")
    gw.set_defaults(termination_log=None)
    serve = sub.add_parser("serve", help="serve the bundle's topology over A2A (a Deployment)")
    serve.add_argument("--bundle", metavar="DIR", help="directory holding bundle.json")
    serve.add_argument("--skills-dir", metavar="DIR", help="root of the skills")
    serve.add_argument("--scratch", metavar="DIR", help="writable scratch dir (default /scratch)")
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on (default all)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    serve.add_argument(
        "--max-concurrent-tasks",
        type=int,
        default=4,
        metavar="N",
        help="unfinished tasks this replica holds at once; past it: 429 (default 4)",
    )
    serve.add_argument(
        "--drain-seconds",
        type=float,
        default=60.0,
        metavar="S",
        help="on SIGTERM, how long running tasks may finish before they are cancelled",
    )
    serve.add_argument(
        "--input-timeout",
        type=float,
        default=3600.0,
        metavar="S",
        help="how long a task waits for the answer to its question (default 3600)",
    )
    return parser


def _run_id_hint(path: str) -> tuple[str, str]:
    """Best-effort run uid / correlation id from a bundle that failed validation."""
    try:
        with open(path, encoding="utf-8") as fh:
            run = json.load(fh).get("run", {})
        uid = str(run.get("uid", ""))
        return uid, str(run.get("correlationId") or uid)
    except (OSError, ValueError, AttributeError):
        return "", ""


async def _main_async(args: argparse.Namespace, paths: RunnerPaths, secrets: SecretStore) -> int:
    try:
        bundle = load_mounted(paths)  # the operator's bundle, its skill files checked
    except BundleError as exc:
        uid, correlation = _run_id_hint(str(paths.bundle_file))
        audit = AuditLog(uid, correlation, secrets)
        result = make_result(exc.outcome, str(exc), secrets=secrets)
        audit.emit("run.end", outcome=result.outcome, message=result.message)
        if args.command == "run":
            write_termination_log(paths.termination_log, result, audit)
        else:
            print(result.message, file=sys.stderr)
        return exit_code(result.outcome)
    if args.command == "validate":
        print(f"bundle OK: {bundle.target_kind} {bundle.target}", file=sys.stderr)
        return 0
    if args.command == "gateway":
        return await _gateway(args, bundle, paths, secrets)
    audit = AuditLog(bundle.run.uid, bundle.run.correlation_id or bundle.run.uid, secrets)
    warn_short_secrets(audit, secrets)
    # Tracing hook: on only when the Job sets an OTLP endpoint (the SDK is imported then).
    tracing = spans.enable_from_env(os.environ, secrets, "swarmkit-runner", _resource(bundle))
    try:
        return await _run(args, bundle, paths, audit, secrets)
    finally:
        tracing.shutdown()


def _resource(bundle: RunBundle) -> dict[str, str]:
    """The runner's OpenTelemetry resource: which Run it is."""
    return {
        "swarmkit.run.name": bundle.run.name,
        "swarmkit.run.uid": bundle.run.uid,
        "k8s.namespace.name": bundle.run.namespace,
    }


async def _run(
    args: argparse.Namespace,
    bundle: RunBundle,
    paths: RunnerPaths,
    audit: AuditLog,
    secrets: SecretStore,
) -> int:
    cancel = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, cancel.set)
    try:
        journal = load_journal(
            args.checkpoint, args.decision, bundle.run.uid, os.environ.get(CHECKPOINT_SHA256_ENV)
        )
    except ValueError as exc:
        result = make_result("ValidationFailed", str(exc), secrets=secrets)
        audit.emit("run.end", outcome=result.outcome, message=result.message)
        write_termination_log(paths.termination_log, result, audit)
        return exit_code(result.outcome)
    result = await execute(bundle, paths, audit, secrets, cancel, journal=journal)
    write_termination_log(paths.termination_log, result, audit)
    return exit_code(result.outcome)


async def _gateway(
    args: argparse.Namespace, bundle: RunBundle, paths: RunnerPaths, secrets: SecretStore
) -> int:
    audit = AuditLog(bundle.run.uid, bundle.run.correlation_id or bundle.run.uid, secrets)
    warn_short_secrets(audit, secrets)
    # Tracing hook: server spans in the harness's traces (when the Deployment sets OTLP env).
    tracing = spans.enable_from_env(
        os.environ, secrets, "swarmkit-gateway", {"swarmkit.agent": bundle.target}
    )
    try:
        return await _serve_gateway(args, bundle, paths, audit, secrets)
    finally:
        tracing.shutdown()


async def _serve_gateway(
    args: argparse.Namespace,
    bundle: RunBundle,
    paths: RunnerPaths,
    audit: AuditLog,
    secrets: SecretStore,
) -> int:
    from .gateway import Gateway
    from .gateway_app import serve

    try:
        gateway = Gateway(bundle, paths, audit, secrets)
        port = args.port or (bundle.gateway.port if bundle.gateway else 0)
        await serve(gateway, args.host, port)
    except (BundleError, StartupError) as exc:
        audit.emit("gateway.stop", outcome="ValidationFailed", message=str(exc))
        print(f"swarmkit-runner gateway: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"swarmkit-runner gateway: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


def load_journal(
    checkpoint: str | None, decision: str | None, run_uid: str, sha256: str | None = None
) -> Journal | None:
    """The journal of a resumed run (None for a fresh one); ValueError names what is wrong.
    With ``sha256`` (set by the operator in the Job), only the checkpoint this runner's
    earlier stage reported: a ConfigMap re-created under its name is refused."""
    if checkpoint is None:
        if decision is not None:
            raise ValueError("--decision needs --checkpoint")
        return None
    try:
        text = Path(checkpoint).read_text(encoding="utf-8").strip()
        found_sha = hashlib.sha256(text.encode()).hexdigest()
        if sha256 and found_sha != sha256:
            raise ValueError(
                f"the checkpoint {checkpoint} is not the one the run reported (sha256 "
                f"{found_sha[:12]}, the Job says {sha256[:12]}): it was replaced"
            )
        saved = Checkpoint.decode(text)
        found = (
            ResumeDecision.model_validate_json(Path(decision).read_bytes())
            if decision is not None
            else None
        )
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot resume: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    if saved.run_uid != run_uid:
        raise ValueError(f"cannot resume: the checkpoint belongs to run {saved.run_uid}")
    return Journal(saved, found)


def seal(command: str) -> SecretStore:
    """Before anything runs: every secret value of the pod registered with the scrubber (of
    stdout and stderr too), the process sealed from what it will start, and, as PID 1, the
    reaper forked. The store the run uses."""
    secrets = SecretStore()
    if command == "validate":
        return secrets
    scrub_standard_streams(secrets)
    seal_process()  # scripts, bash and MCP servers cannot read this process's secrets
    become_init()  # PID 1 (the image's entrypoint): reap and forward signals, sealed too
    return secrets


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    secrets = seal(args.command)
    if args.command == "serve":
        # Imported only here: a Run's cold start never loads the HTTP server.
        from .serve.server import serve

        paths = RunnerPaths.resolve(args.bundle, args.skills_dir, args.scratch)
        return asyncio.run(
            serve(
                paths,
                args.host,
                args.port,
                args.max_concurrent_tasks,
                args.drain_seconds,
                args.input_timeout,
            )
        )
    paths = RunnerPaths.resolve(args.bundle, args.skills_dir, args.scratch, args.termination_log)
    return asyncio.run(_main_async(args, paths, secrets))


if __name__ == "__main__":
    sys.exit(main())
