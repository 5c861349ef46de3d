"""The mailboxes page: each namespace's mailboxes and their items, from an in-memory index.

A Run's ``mailbox_send`` effects become MailboxMessages (``runs/effects.py``); people read
and acknowledge them with ``kubectl swarmkit inbox`` / ``ack``, and here. The index
:data:`MAILBOX_ITEMS` (registered by ``handlers.mailbox``, kept current by its watch) holds
per item only what the page shows, :func:`item_summary`:

* the message's first :data:`MESSAGE_CAP_BYTES` bytes (a message may be 64 KiB; the page is
  a list, and the index lives in the operator's memory), with its full size;
* who acknowledged it, their comment, and when: the time of the apiserver's
  ``managedFields`` entry owning ``spec.acknowledgement`` (the model has no time field; the
  apiserver stamps that entry on the acknowledging write, the way a Review's decision time
  is read);
* the webhook delivery's state, attempts and last error, never more of the status (the
  webhook URL is never on the item anyway: it stays in a Secret).

Kopf-free and API-free, like :mod:`.pages`; the template escapes every string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..indexes import IndexId
from .pages import Shown, Sources

#: The index of MailboxMessages: (namespace, mailbox) → item summaries.
MAILBOX_ITEMS = IndexId.WEBVIEW_MAILBOX_ITEMS
#: How much of a message the index keeps and the page shows.
MESSAGE_CAP_BYTES = 2048


def _capped(message: str) -> tuple[str, int, bool]:
    """(the first :data:`MESSAGE_CAP_BYTES` bytes, whole characters only; full size; cut?)"""
    raw = message.encode()
    if len(raw) <= MESSAGE_CAP_BYTES:
        return message, len(raw), False
    return raw[:MESSAGE_CAP_BYTES].decode("utf-8", "ignore"), len(raw), True


def acknowledged_at(meta: Mapping[str, Any]) -> str:
    """When ``spec.acknowledgement`` was written ('' when the apiserver did not say)."""
    for entry in meta.get("managedFields") or ():
        spec = ((entry or {}).get("fieldsV1") or {}).get("f:spec") or {}
        if "f:acknowledgement" in spec and entry.get("time"):
            return str(entry["time"])
    return ""


def item_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the page shows of one MailboxMessage (the index value)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    sender = spec.get("sender") or {}
    ack = spec.get("acknowledgement") or {}
    delivery = (body.get("status") or {}).get("delivery") or {}
    message, size, truncated = _capped(str(spec.get("message") or ""))
    return {
        "name": str(meta.get("name") or ""),
        "created": str(meta.get("creationTimestamp") or ""),
        "mailbox": str(spec.get("mailbox") or ""),
        "agent": str(sender.get("agent") or ""),
        "run": str(sender.get("run") or ""),
        "message": message,
        "message_bytes": size,
        "truncated": truncated,
        "acknowledged_by": str(ack.get("by") or ""),
        "comment": str(ack.get("comment") or ""),
        "acknowledged_at": acknowledged_at(meta) if ack else "",
        "delivery": {
            "state": str(delivery.get("state") or ""),
            "attempts": int(delivery.get("attempts") or 0),
            "last_error": str(delivery.get("lastError") or ""),
        }
        if delivery
        else None,
    }


def mailbox_namespaces(src: Sources) -> set[str]:
    return {ns for ns, _ in src.keys(MAILBOX_ITEMS)}


def mailboxes_list(
    src: Sources, namespace: str | None = None, shown: Shown = None, readable: Shown = None
) -> dict[str, Any]:
    """Per namespace (or only ``namespace``), each mailbox with its items, newest first:
    in the namespaces ``shown`` (None: all), the message text only where ``readable``
    (None: all; a person needs ``get`` on MailboxMessages there)."""
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for ns, mailbox in sorted(src.keys(MAILBOX_ITEMS)):
        if namespace is not None and ns != namespace:
            continue
        if shown is not None and ns not in shown:
            continue
        hidden = readable is not None and ns not in readable
        items = sorted(
            (_hidden(i) if hidden else i for i in src.indexes.values(MAILBOX_ITEMS, (ns, mailbox))),
            key=lambda i: (i["created"], i["name"]),
            reverse=True,
        )
        if not items:
            continue
        by_ns.setdefault(ns, []).append(
            {
                "name": mailbox,
                "entries": items,
                "unacknowledged": sum(1 for i in items if not i["acknowledged_by"]),
            }
        )
    return {
        "namespace": namespace,
        "namespaces": [{"name": ns, "mailboxes": boxes} for ns, boxes in by_ns.items()],
        "cap": MESSAGE_CAP_BYTES,
    }


def _hidden(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` without its message text (and the acknowledger's comment)."""
    return {**item, "message": "", "comment": "", "truncated": False, "hidden": True}


__all__ = [
    "MAILBOX_ITEMS",
    "MESSAGE_CAP_BYTES",
    "item_summary",
    "mailbox_namespaces",
    "mailboxes_list",
]
