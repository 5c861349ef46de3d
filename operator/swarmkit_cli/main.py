"""Entry point of ``kubectl-swarmkit``: builds the parser from the discovered subcommands.

kubectl's global flags (``-n/--namespace``, ``--context``, ``--kubeconfig``, ``--as``,
``--as-group``) are accepted anywhere on the command line, as kubectl accepts them:
``kubectl swarmkit -n team-a status`` and ``kubectl swarmkit review approve -n team-a X``
mean the same as with the flag at the end. They are taken out of the arguments before
argparse sees them (up to a ``--``), in the forms ``-n X``, ``-nX``, ``--flag X`` and
``--flag=X``.
"""

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    parser = build_parser()
    found, rest = split_globals(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(rest)
    for dest in set(GLOBAL_FLAGS.values()):
        setattr(args, dest, found.get(dest))
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
