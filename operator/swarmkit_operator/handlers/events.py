"""The watch events of the reconcile pipeline's resources, fanned out to the functions of
the handler modules that registered for them (:func:`on_event`).

Each resource has one dispatcher calling its functions with kopf's keyword arguments
(``type``, ``body``, ``namespace``, ``name``, ``uid``, ``labels``, ``spec``, ``memo``, ...),
in registration order (the import order of :mod:`swarmkit_operator.handlers`). A function
that raises is logged and the others still run: kopf never retries an event handler either.

The events do not come from kopf: kopf pays for every event a per-object worker, a cause,
an object logger and its handler bookkeeping (~40% of the event loop at 6,000 objects), and
it cannot watch metadata only. :mod:`swarmkit_operator.handlers.streams` starts one
:class:`~swarmkit_operator.watching.Reflector` per registered resource once every start-up
handler has run (as kopf started its watches). A resource whose every function is
registered ``metadata_only`` (and whose every index reads metadata only) is watched as
``PartialObjectMetadata``.

Handlers with a label filter stay plain ``kopf.on.event`` handlers (kopf filters
server-side: few events).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..indexes import INDEX_SPECS

log = logging.getLogger("swarmkit_operator.handlers")

EventFn = Callable[..., Awaitable[None]]
F = TypeVar("F", bound=EventFn)
#: As ``kopf.on.event`` takes it: (group, version, plural), or ("v1", plural) for the core group.
Resource = tuple[str, ...]

#: (group, version, plural) → the functions its events go to, in registration order.
_functions: dict[Resource, list[EventFn]] = {}
#: (group, version, plural) → the one dispatcher calling them.
_dispatchers: dict[Resource, EventFn] = {}
#: (group, version, plural) → whether some function reads more than the metadata.
_needs_body: dict[Resource, bool] = {}


def on_event(*resource: str, metadata_only: bool = False) -> Callable[[F], F]:
    """Register ``fn`` for every watch event of the resource (like ``kopf.on.event``).

    ``metadata_only``: ``fn`` reads names, labels and annotations only (its ``body`` may
    be a ``PartialObjectMetadata``).
    """
    key = tuple(resource)

    def register(fn: F) -> F:
        if key not in _functions:
            _functions[key] = []
            _install(key)
        _functions[key].append(fn)
        _needs_body[key] = _needs_body.get(key, False) or not metadata_only
        return fn

    return register


def resources() -> list[Resource]:
    """Every resource some function registered for, in registration order."""
    return list(_functions)


def metadata_only(*resource: str) -> bool:
    """Whether the resource can be watched as metadata only: every function registered so
    and every index over it reading metadata only."""
    key = tuple(resource)
    plural = key[-1]
    specs = [s for s in INDEX_SPECS if s.resource == plural]
    return not _needs_body.get(key, True) and all(s.metadata_only for s in specs)


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
