"""``kubectl swarmkit ack NAME``: acknowledge a mailbox item as yourself (see :mod:`.inbox`)."""

from __future__ import annotations

import argparse
from typing import Any

from swarmkit_api import GROUP, VERSION

from ..console import Console
from ..plugin import EXIT_OK, CommandError, add_command, add_namespace_flag, api_reason
from . import inbox
from .review import whoami


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "ack",
        run,
        help="acknowledge a mailbox item as yourself",
        description=inbox.__doc__.split("\n\n", 1)[1] if inbox.__doc__ else None,
    )
    parser.add_argument("name", help="the MailboxMessage")
    parser.add_argument("--comment", help="a note kept with the acknowledgement")
    add_namespace_flag(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    from kubernetes.client.exceptions import ApiException

    kube = inbox.connect(args)
    try:
        acknowledgement: dict[str, Any] = {"by": whoami(kube)}
        if args.comment:
            acknowledgement["comment"] = args.comment
        try:
            kube.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                kube.namespace,
                inbox.PLURAL,
                args.name,
                {"spec": {"acknowledgement": acknowledgement}},
            )
        except ApiException as exc:
            raise CommandError(f"mailbox item {args.name}: {api_reason(exc)}") from None
    finally:
        kube.close()
    console.print(f"mailbox item {args.name}: acknowledged by {acknowledgement['by']}")
    return EXIT_OK
