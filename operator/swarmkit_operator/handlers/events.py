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

A function may ask for the objects with some labels only (``labels=``: a value, or
:data:`~swarmkit_operator.indexes.PRESENT` for any value): its stream then carries a
server-side label selector (only the Runs' pods, not every pod of the cluster). Every
watch of the operator comes through here, in every mode (one replica or several): kopf
runs no watch of its own for our handlers. A stream that fails, a 403 from an authorizer
whose caches are still filling after an apiserver restart among the failures, is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from ..indexes import INDEX_SPECS, PRESENT

log = logging.getLogger("swarmkit_operator.handlers")

EventFn = Callable[..., Awaitable[None]]
F = TypeVar("F", bound=EventFn)
#: As ``kopf.on.event`` takes it: (group, version, plural), or ("v1", plural) for the core group.
Resource = tuple[str, ...]
#: A resource and the label selector of its stream ("" for every object).
Stream = tuple[Resource, str]

#: stream → the functions its events go to, in registration order.
_functions: dict[Stream, list[EventFn]] = {}
#: stream → the one dispatcher calling them.
_dispatchers: dict[Stream, EventFn] = {}
#: stream → whether some function reads more than the metadata.
_needs_body: dict[Stream, bool] = {}


def selector_of(labels: Mapping[str, Any] | None) -> str:
    """A label selector: ``key`` for :data:`PRESENT`, ``key=value`` otherwise."""
    return ",".join(k if v is PRESENT else f"{k}={v}" for k, v in (labels or {}).items())


def on_event(
    *resource: str, metadata_only: bool = False, labels: Mapping[str, Any] | None = None
) -> Callable[[F], F]:
    """Register ``fn`` for every watch event of the resource (like ``kopf.on.event``);
    with ``labels``, of the objects carrying them only (filtered server-side).

    ``metadata_only``: ``fn`` reads names, labels and annotations only (its ``body`` may
    be a ``PartialObjectMetadata``).
    """
    key: Stream = (tuple(resource), selector_of(labels))

    def register(fn: F) -> F:
        if key not in _functions:
            _functions[key] = []
            _install(key)
        _functions[key].append(fn)
        _needs_body[key] = _needs_body.get(key, False) or not metadata_only
        return fn

    return register


def streams() -> list[Stream]:
    """Every (resource, label selector) some function registered for, in order."""
    return list(_functions)


def resources() -> list[Resource]:
    """Every resource some function registered for (any selector), in order."""
    return list(dict.fromkeys(resource for resource, _ in _functions))


def metadata_only(*resource: str, selector: str = "") -> bool:
    """Whether the stream can carry metadata only: every function registered for it so
    and every index over the resource reading metadata only."""
    key: Stream = (tuple(resource), selector)
    plural = key[0][-1]
    specs = [s for s in INDEX_SPECS if s.resource == plural]
    return not _needs_body.get(key, True) and all(s.metadata_only for s in specs)


def registered(*resource: str, selector: str = "") -> list[EventFn]:
    """The functions registered for a stream, in the order they run."""
    return list(_functions.get((tuple(resource), selector), ()))


def dispatcher(*resource: str, selector: str = "") -> EventFn | None:
    """The dispatcher of a stream (what each of its events is handed to)."""
    return _dispatchers.get((tuple(resource), selector))


def _install(key: Stream) -> None:
    functions = _functions[key]
    plural = key[0][-1]

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
