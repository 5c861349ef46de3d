"""Entry point of ``kubectl-swarmkit``: builds the parser from the discovered subcommands."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from . import commands
from .console import Console
from .plugin import EXIT_FINDINGS, EXIT_USAGE, CommandError, UsageError

PROG = "kubectl swarmkit"


def command_modules() -> list[str]:
    """Every module of :mod:`swarmkit_cli.commands` (one subcommand each), sorted."""
    return sorted(
        m.name
        for m in pkgutil.iter_modules(commands.__path__)
        if not m.ispkg and not m.name.startswith("_")
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Daily chores for swarmkit.dev workspaces: import, pin, logs, status.",
        epilog="Exit codes: 0 ok, 1 findings or errors, 2 usage.",
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in command_modules():
        module = importlib.import_module(f"{commands.__name__}.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    con = console or Console()
    try:
        code: int = args.handler(args, con)
    except UsageError as exc:
        parser.print_usage(con.err)
        con.error(str(exc))
        return EXIT_USAGE
    except CommandError as exc:
        con.error(str(exc))
        return EXIT_FINDINGS
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
