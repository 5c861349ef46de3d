"""Shared passes over many objects (quota refresh, schedules, retention, mailbox delivery):
an object that fails is that object's problem (issue 47 item 3).

:func:`each` runs one step per object and logs a failure naming the object, then goes on
to the next: one quota with a bad selector, one Topology whose Run cannot be created, one
message that cannot be delivered must not leave every other object of the cluster without
its refresh, schedule or delivery until it is deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

log = logging.getLogger("swarmkit_operator.passes")

T = TypeVar("T")


async def each(
    what: str,
    items: Iterable[T],
    step: Callable[[T], Awaitable[object]],
    name: Callable[[T], str],
) -> int:
    """``step`` every item in turn, a failure logged (naming ``what`` and the item) and
    skipped; how many failed."""
    failed = 0
    for item in items:
        try:
            await step(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failed += 1
            log.warning(
                "%s: %s failed (%s: %s); the pass goes on",
                what,
                name(item),
                type(exc).__name__,
                exc,
            )
    return failed
