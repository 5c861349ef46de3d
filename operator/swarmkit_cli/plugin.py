"""The registration API every subcommand module uses, and the exit codes.

A subcommand is a module in :mod:`swarmkit_cli.commands` with a function
``register(subparsers)``. It adds its parser with :func:`add_command`, which binds the
handler ``(args, console) -> exit code``. Modules there are discovered by name, so adding a
subcommand is adding one file; no list to edit elsewhere.

Exit codes (kubectl plugin convention, the same for every subcommand):
0 ok, 1 findings or errors, 2 usage (argparse already exits 2 on a usage error).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from .console import Console

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace, Console], int]


class UsageError(Exception):
    """Raised by a handler for a usage problem argparse cannot see; exits 2 with the message."""


class CommandError(Exception):
    """Raised by a handler for an error worth one clear line; exits 1 with the message."""


def api_reason(exc: Any) -> str:
    """What the apiserver said when it refused a request (an ``ApiException``): its
    ``message`` (an admission policy's or RBAC's words, as is), else the status line."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except ValueError:
        message = None
    return str(message or f"{exc.status} {exc.reason}")


def add_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Handler,
    *,
    help: str,
    description: str | None = None,
    **kwargs: Any,
) -> argparse.ArgumentParser:
    """Add subcommand ``name`` whose parsed arguments go to ``handler``."""
    parser = subparsers.add_parser(
        name,
        help=help,
        description=description or help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )
    parser.set_defaults(handler=handler)
    return parser


def add_namespace_flag(parser: argparse.ArgumentParser) -> None:
    """``-n/--namespace``: omitted, the kubeconfig context's namespace (else ``default``)."""
    parser.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="namespace (default: the kubeconfig context's namespace, else 'default')",
    )
