"""The last start-up step: open the watch streams of the reconcile pipeline's resources.

Every other start-up handler has run (this module is imported last): the indexes are
complete, the Runs and gateway controllers exist and the unsettled objects are queued, so
no event arrives before the function it is meant for can take it (kopf starts its own
watches at this same point). One :class:`~swarmkit_operator.watching.Reflector` per
resource registered with :func:`~swarmkit_operator.handlers.events.on_event` (and per
watched namespace); the controller's tasks, so its stop cancels them. A stream starts
from the start-up's own LIST of its resource where there is one (the indexes were filled
from it moments ago), so a restart lists each resource once.

The same in every mode: with several replicas every replica watches (a standby keeps its
indexes current) and only the leader writes; then the manager starts (elects, or leads
at once), which starts the writers (:mod:`swarmkit_operator.runtime.manager`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from ..indexes import Resource
from ..reconcile.controller import controller_of
from ..runtime import manager_of
from ..watching import reflectors
from . import events

log = logging.getLogger("swarmkit_operator")


def _resource(key: tuple[str, ...]) -> Resource:
    if len(key) == 2:  # ("v1", plural): the core group
        return Resource("", key[0], key[1])
    return Resource(key[0], key[1], key[2])


@kopf.on.startup()
async def start_streams(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    ctl = controller_of(memo)
    if ctl is None:
        raise RuntimeError("the shared start-up (handlers/common.py) must run first")
    opened = []
    for key, selector in events.streams():
        dispatch = events.dispatcher(*key, selector=selector)
        assert dispatch is not None

        async def deliver(
            type_: str | None, body: dict[str, Any], dispatch: events.EventFn = dispatch
        ) -> None:
            meta = body.get("metadata") or {}
            await dispatch(
                type=type_,
                body=body,
                meta=meta,
                spec=body.get("spec") or {},
                status=body.get("status") or {},
                namespace=meta.get("namespace"),
                name=meta.get("name", ""),
                uid=meta.get("uid", ""),
                labels=meta.get("labels") or {},
                annotations=meta.get("annotations") or {},
                memo=memo,
                logger=log,
            )

        metadata_only = events.metadata_only(*key, selector=selector)
        for reflector in reflectors(
            _resource(key),
            ctl.namespaces,
            deliver,
            metadata_only=metadata_only,
            label_selector=selector,
            server_timeout=int(settings.watching.server_timeout or 270),
            read_timeout=float(settings.watching.client_timeout or 300),
            backoff=float(settings.watching.reconnect_backoff or 1.0),
        ):
            # The shared start-up LISTed it moments ago (for the indexes): start from that.
            reflector.seed = next(
                (
                    listing
                    for listing in ctl.listings
                    if listing.resource == reflector.resource.plural
                    and listing.namespace == reflector.namespace
                    and listing.selector == selector
                ),
                None,
            )
            ctl.tasks.append(
                asyncio.create_task(reflector.run(), name=f"swarmkit-watch-{reflector.where}")
            )
            seeded = " from the start-up listing" if reflector.seed is not None else ""
            opened.append(reflector.where + (" (metadata)" if metadata_only else "") + seeded)
    ctl.listings.clear()
    log.info("watching %s", ", ".join(opened))
    manager = manager_of(memo)
    if manager is None:
        raise RuntimeError("the shared start-up (handlers/common.py) must run first")
    await manager.start()
