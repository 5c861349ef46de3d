"""Entry point of ``kubectl-swarmkit``: builds the parser from the discovered subcommands.

kubectl's global flags (``-n/--namespace``, ``--context``, ``--kubeconfig``, ``--as``,
``--as-group``) are accepted anywhere on the command line, as kubectl accepts them:
``kubectl swarmkit -n team-a status`` and ``kubectl swarmkit review approve -n team-a X``
mean the same as with the flag at the end. They are taken out of the arguments before
argparse sees them (up to a ``--``), in the forms ``-n X``, ``-nX``, ``--flag X`` and
``--flag=X``.

:func:`main` is the one place where a failure becomes what the user sees: ONE line on
stderr and an exit code, never a traceback. A usage problem (argparse's, or a handler's
:class:`~.plugin.UsageError`) exits 2; a runtime problem (:class:`~.plugin.CommandError`,
an unreadable or unwritable file, a cluster that cannot be reached, anything unexpected)
exits 1. Handlers raise; they do not catch to print. ``SWARMKIT_CLI_TRACEBACK=1`` re-raises
an unexpected error with its traceback, for whoever debugs the plugin.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import commands
from .console import Console
from .plugin import EXIT_FINDINGS, EXIT_USAGE, CommandError, UsageError

PROG = "kubectl swarmkit"
#: global flag → attribute of the parsed arguments
GLOBAL_FLAGS = {
    "-n": "namespace",
    "--namespace": "namespace",
    "--context": "context",
    "--kubeconfig": "kubeconfig",
    "--as": "as_user",
    "--as-group": "as_group",
}
GLOBAL_HELP = {
    "namespace": "namespace (default: the context's namespace, else 'default'; for import: "
    "the namespace set on every object)",
    "context": "kubeconfig context to use (default: the current context)",
    "kubeconfig": "kubeconfig file (default: every file of $KUBECONFIG, merged as kubectl "
    "does, then ~/.kube/config)",
    "as_user": "user to impersonate",
    "as_group": "group to impersonate",
}


def split_globals(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The global flags found anywhere in ``argv`` (the last one wins), and the rest."""
    found: dict[str, str] = {}
    rest: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name, eq, value = arg.partition("=")
        if name in GLOBAL_FLAGS and (eq or i + 1 < len(args)):
            if not eq:
                i += 1
                value = args[i]
            found[GLOBAL_FLAGS[name]] = value
        elif arg.startswith("-n") and len(arg) > 2 and not arg.startswith("--"):
            found["namespace"] = arg[2:]
        else:
            rest.append(arg)
        i += 1
    return found, rest


def command_modules() -> list[str]:
    """Every module of :mod:`swarmkit_cli.commands` (one subcommand each), sorted."""
    return sorted(
        m.name
        for m in pkgutil.iter_modules(commands.__path__)
        if not m.ispkg and not m.name.startswith("_")
    )


class _Parser(argparse.ArgumentParser):
    """argparse that raises its usage errors (subparsers inherit the class), so that
    :func:`main` prints them the one way it prints every error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Daily chores for swarmkit.dev workspaces: import, pin, logs, status.",
        epilog="Exit codes: 0 ok, 1 findings or errors, 2 usage. The global flags "
        "-n/--namespace, --context, --kubeconfig, --as and --as-group go anywhere.",
    )
    for flag, dest in GLOBAL_FLAGS.items():
        if flag == "-n":
            continue
        names = ["-n", flag] if dest == "namespace" else [flag]
        parser.add_argument(*names, dest=dest, default=None, help=GLOBAL_HELP[dest])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in command_modules():
        module = importlib.import_module(f"{commands.__name__}.{name}")
        module.register(subparsers)
    return parser


def one_line(text: str) -> str:
    """``text`` with its line breaks folded: an error is one line."""
    return " ".join(text.split())


def _describe(exc: BaseException) -> str:
    """What went wrong, for an error no handler turned into a CommandError."""
    module = type(exc).__module__
    if module.startswith("urllib3"):  # the kubernetes client's transport (not imported here)
        return f"cannot reach the Kubernetes API server: {getattr(exc, 'reason', None) or exc}"
    if module.startswith("kubernetes") and hasattr(exc, "status"):
        return f"the Kubernetes API server answered {exc.status} {getattr(exc, 'reason', '')}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return f"{where}{exc.strerror}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def run(argv: Sequence[str], console: Console) -> int:
    """Parse ``argv`` and run its subcommand (errors propagate to :func:`main`)."""
    parser = build_parser()
    found, rest = split_globals(argv)
    args = parser.parse_args(rest)
    for dest in set(GLOBAL_FLAGS.values()):
        setattr(args, dest, found.get(dest))
    code: int = args.handler(args, console)
    return code


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    con = console or Console()
    try:
        return run(sys.argv[1:] if argv is None else argv, con)
    except UsageError as exc:
        con.error(one_line(str(exc)))
        return EXIT_USAGE
    except CommandError as exc:
        con.error(one_line(str(exc)))
        return EXIT_FINDINGS
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (| head): nothing left to tell it
        return EXIT_FINDINGS
    except Exception as exc:
        if os.environ.get("SWARMKIT_CLI_TRACEBACK") == "1":
            raise
        con.error(one_line(_describe(exc)))
        return EXIT_FINDINGS


if __name__ == "__main__":
    sys.exit(main())
