"""``kubectl swarmkit inbox [MAILBOX]`` (and ``ack NAME``, :mod:`.ack`): agents' mailboxes.

``inbox`` lists the MailboxMessages of the namespace (only those of ``MAILBOX`` when given;
``--unacknowledged`` hides the acknowledged ones), oldest first, with the sending agent and
Run, who acknowledged and the message's first line. ``ack NAME`` writes
``spec.acknowledgement`` exactly as the documented ``kubectl patch`` does, with ``by`` set
to the user the apiserver authenticates you as (a SelfSubjectReview, like ``kubectl auth
whoami``): RBAC decides whether you may (the ``swarmkit-mailbox-acknowledger`` role), the
admission policy refuses any other name, and the CRD refuses a second acknowledgement; the
apiserver's error is printed as is. ``--as USER`` impersonates, like kubectl's flag.
"""

from __future__ import annotations

import argparse
from typing import Any

from swarmkit_api import GROUP, VERSION
from swarmkit_api.effects import MAILBOX_LABEL

from ..console import Console
from ..plugin import EXIT_OK, CommandError, add_command, add_namespace_flag, api_reason

PLURAL = "mailboxmessages"
#: Longest message preview in the inbox table.
PREVIEW_CHARS = 60


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doc = __doc__.split("\n\n", 1)[1] if __doc__ else None
    inbox = add_command(
        subparsers,
        "inbox",
        run_inbox,
        help="list the items agents posted to mailboxes (mailbox_send)",
        description=doc,
    )
    inbox.add_argument("mailbox", nargs="?", help="only this mailbox")
    inbox.add_argument("--unacknowledged", action="store_true", help="hide the acknowledged items")
    add_namespace_flag(inbox)


def connect(args: argparse.Namespace) -> Any:
    from ..kube import connect

    return connect(
        args.kubeconfig,
        args.namespace,
        context=args.context,
        as_user=args.as_user,
        as_group=args.as_group,
    )


def run_inbox(args: argparse.Namespace, console: Console) -> int:
    from kubernetes.client.exceptions import ApiException

    kube = connect(args)
    try:
        selector = f"{MAILBOX_LABEL}={args.mailbox}" if args.mailbox else None
        try:
            out = kube.custom.list_namespaced_custom_object(
                GROUP, VERSION, kube.namespace, PLURAL, label_selector=selector or ""
            )
        except ApiException as exc:
            raise CommandError(f"listing mailbox items: {api_reason(exc)}") from None
    finally:
        kube.close()
    items = sorted(out.get("items", []), key=lambda m: m["metadata"].get("creationTimestamp", ""))
    rows = []
    for item in items:
        spec = item.get("spec") or {}
        acked = (spec.get("acknowledgement") or {}).get("by") or ""
        if args.unacknowledged and acked:
            continue
        sender = spec.get("sender") or {}
        lines = str(spec.get("message") or "").splitlines() or [""]
        preview = lines[0] if len(lines[0]) <= PREVIEW_CHARS else lines[0][: PREVIEW_CHARS - 1]
        if preview != str(spec.get("message") or ""):
            preview += "…"
        rows.append(
            [
                item["metadata"]["name"],
                spec.get("mailbox", ""),
                sender.get("agent", ""),
                sender.get("run", ""),
                acked,
                preview,
            ]
        )
    console.table(["NAME", "MAILBOX", "AGENT", "RUN", "ACKNOWLEDGED", "MESSAGE"], rows)
    return EXIT_OK
