"""Wiring of the mailbox webhook deliveries (:mod:`swarmkit_operator.delivery`).

Thin on purpose: one index keeps the MailboxMessages whose delivery is pending (whole:
the POST needs the message), and every watch event of a MailboxMessage kicks it, so the
controller works off events, never a periodic LIST.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmkit_api import GROUP, VERSION
from swarmkit_api.effects import DELIVERY_LABEL, DELIVERY_PENDING

from ..delivery import PENDING_DELIVERIES
from ..indexes import index
from .common import App
from .events import on_event


@index("mailboxmessages", id=PENDING_DELIVERIES, group=GROUP, version=VERSION)
def pending_deliveries(
    body: Mapping[str, Any], namespace: str | None, name: str, labels: Mapping[str, str], **_: Any
) -> dict[Any, Any]:
    """(namespace, name) → the item, while its delivery is pending (else nothing kept)."""
    if labels.get(DELIVERY_LABEL) != DELIVERY_PENDING:
        return {}
    return {
        (namespace, name): {
            "metadata": {
                k: (body.get("metadata") or {}).get(k) for k in ("name", "namespace", "uid")
            },
            "spec": dict(body.get("spec") or {}),
            "status": {"delivery": dict((body.get("status") or {}).get("delivery") or {})},
        }
    }


@on_event(GROUP, VERSION, "mailboxmessages")
async def delivery_on_item_event(
    type: str | None,
    namespace: str | None,
    name: str,
    labels: Mapping[str, str],
    app: App,
    **_: Any,
) -> None:
    if namespace and type != "DELETED" and labels.get(DELIVERY_LABEL) == DELIVERY_PENDING:
        app.delivery.kick(namespace, name)
