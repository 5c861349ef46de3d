"""One kopf handler per watched resource, fanning each watch event out to the functions of
the handler modules that registered for it (:func:`on_event`).

kopf pays for every handler on every event (a cause, its keyword arguments, the outcome
bookkeeping, a log record); with one handler per interested module, a Skill event ran five
and an Agent event four, about a tenth of the operator's event loop at 6,000 objects. Here
kopf runs one and this module calls the functions with the same keyword arguments, in
registration order (the import order of :mod:`swarmkit_operator.handlers`). A function that
raises is logged and the others still run: kopf never retries an event handler either.

Handlers with a label filter stay plain ``kopf.on.event`` handlers (kopf filters before it
builds anything).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import kopf

log = logging.getLogger("swarmkit_operator.handlers")

EventFn = Callable[..., Awaitable[None]]
F = TypeVar("F", bound=EventFn)
#: As ``kopf.on.event`` takes it: (group, version, plural), or ("v1", plural) for the core group.
Resource = tuple[str, ...]

#: (group, version, plural) → the functions its events go to, in registration order.
_functions: dict[Resource, list[EventFn]] = {}
#: (group, version, plural) → the one kopf handler calling them.
_dispatchers: dict[Resource, EventFn] = {}


def on_event(*resource: str) -> Callable[[F], F]:
    """Register ``fn`` for every watch event of the resource (like ``kopf.on.event``)."""
    key = tuple(resource)

    def register(fn: F) -> F:
        if key not in _functions:
            _functions[key] = []
            _install(key)
        _functions[key].append(fn)
        return fn

    return register


def registered(*resource: str) -> list[EventFn]:
    """The functions registered for a resource, in the order they run."""
    return list(_functions.get(tuple(resource), ()))


def dispatcher(*resource: str) -> EventFn | None:
    """The kopf handler of a resource (what kopf calls with each event's arguments)."""
    return _dispatchers.get(tuple(resource))


def _install(key: Resource) -> None:
    functions = _functions[key]
    plural = key[-1]

    async def dispatch(**kwargs: Any) -> None:
        for fn in functions:
            try:
                await fn(**kwargs)
            except Exception:
                log.exception(
                    "%s on %s %s/%s failed",
                    fn.__qualname__,
                    plural,
                    kwargs.get("namespace"),
                    kwargs.get("name"),
                )

    dispatch.__qualname__ = dispatch.__name__ = f"{plural}_events"
    _dispatchers[key] = dispatch
    kopf.on.event(*key, id=f"{plural}-events")(dispatch)
