"""The watch events of the reconcile pipeline's resources, fanned out to the functions of
the handler modules that asked for them (:func:`on_event`).

:func:`on_event` only marks a function; the composition root (:mod:`.root`) collects the
marks of the modules it names, in its written order, into one :class:`EventRegistry`.
Each (resource, label selector) stream has one dispatcher calling its functions with
kopf's keyword arguments (``type``, ``body``, ``namespace``, ``name``, ``uid``,
``labels``, ``spec``, and ``app``, the application context), in that order. A function
that raises is logged and the others still run: kopf never retries an event handler either.

The events do not come from kopf: kopf pays for every event a per-object worker, a cause,
an object logger and its handler bookkeeping (~40% of the event loop at 6,000 objects), and
it cannot watch metadata only. The root starts one
:class:`~swarmkit_operator.watching.Reflector` per stream once every component is built
(as kopf started its watches). A stream whose every function is marked ``metadata_only``
(and whose every index reads metadata only) is watched as ``PartialObjectMetadata``.

A function may ask for the objects with some labels only (``labels=``: a value, or
:data:`~swarmkit_operator.indexes.PRESENT` for any value): its stream then carries a
server-side label selector (only the Runs' pods, not every pod of the cluster). Every
watch of the operator comes through here, in every mode (one replica or several): kopf
runs no watch of its own for our handlers. A stream that fails, a 403 from an authorizer
whose caches are still filling after an apiserver restart among the failures, is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..indexes import PRESENT, IndexSpec
from ..indexes import Resource as ApiResource
from ..marks import mark

log = logging.getLogger("swarmkit_operator.handlers")

EventFn = Callable[..., Awaitable[None]]
F = TypeVar("F", bound=EventFn)
#: As ``kopf.on.event`` takes it: (group, version, plural), or ("v1", plural) for the core group.
Resource = tuple[str, ...]
#: A resource and the label selector of its stream ("" for every object).
Stream = tuple[Resource, str]


def stream_of(resource: ApiResource, selector: str) -> Stream:
    """The registry's key of a resource's stream (``("v1", plural)`` for the core group)."""
    if resource.group:
        return ((resource.group, resource.version, resource.plural), selector)
    return ((resource.version, resource.plural), selector)


def resource_of(key: Resource) -> ApiResource:
    """What a stream's reflector LISTs and watches: the inverse of :func:`stream_of`."""
    if len(key) == 2:  # ("v1", plural): the core group
        return ApiResource("", key[0], key[1])
    return ApiResource(key[0], key[1], key[2])


def selector_of(labels: Mapping[str, Any] | None) -> str:
    """A label selector: ``key`` for :data:`PRESENT`, ``key=value`` otherwise."""
    return ",".join(k if v is PRESENT else f"{k}={v}" for k, v in (labels or {}).items())


@dataclass(frozen=True)
class EventMark:
    """``fn`` takes every watch event of ``stream``."""

    stream: Stream
    metadata_only: bool


def on_event(
    *resource: str, metadata_only: bool = False, labels: Mapping[str, Any] | None = None
) -> Callable[[F], F]:
    """Mark ``fn`` for every watch event of the resource (like ``kopf.on.event``); with
    ``labels``, of the objects carrying them only (filtered server-side).

    ``metadata_only``: ``fn`` reads names, labels and annotations only (its ``body`` may
    be a ``PartialObjectMetadata``).
    """
    stream: Stream = (tuple(resource), selector_of(labels))

    def register(fn: F) -> F:
        return mark(fn, EventMark(stream, metadata_only))

    return register


@dataclass
class EventRegistry:
    """Every stream the operator watches, the functions of each in order, one dispatcher
    per stream (built by the composition root from the marks it collected)."""

    index_specs: Iterable[IndexSpec] = ()
    _functions: dict[Stream, list[EventFn]] = field(default_factory=dict)
    _dispatchers: dict[Stream, EventFn] = field(default_factory=dict)
    #: stream → whether some function reads more than the metadata.
    _needs_body: dict[Stream, bool] = field(default_factory=dict)

    def add(self, stream: Stream, fn: EventFn, metadata_only: bool = False) -> None:
        """``fn`` runs for every event of ``stream``, after the functions added before."""
        if stream not in self._functions:
            self._functions[stream] = []
            self._dispatchers[stream] = _dispatcher(stream, self._functions[stream])
        self._functions[stream].append(fn)
        self._needs_body[stream] = self._needs_body.get(stream, False) or not metadata_only

    def streams(self) -> list[Stream]:
        """Every (resource, label selector) some function is added to, in order."""
        return list(self._functions)

    def resources(self) -> list[Resource]:
        """Every resource some function is added to (any selector), in order."""
        return list(dict.fromkeys(resource for resource, _ in self._functions))

    def metadata_only(self, *resource: str, selector: str = "") -> bool:
        """Whether the stream can carry metadata only: every function added to it so
        and every index over the resource reading metadata only."""
        key: Stream = (tuple(resource), selector)
        plural = key[0][-1]
        specs = [s for s in self.index_specs if s.resource == plural]
        return not self._needs_body.get(key, True) and all(s.metadata_only for s in specs)

    def registered(self, *resource: str, selector: str = "") -> list[EventFn]:
        """The functions of a stream, in the order they run."""
        return list(self._functions.get((tuple(resource), selector), ()))

    def dispatcher(self, *resource: str, selector: str = "") -> EventFn | None:
        """The dispatcher of a stream (what each of its events is handed to)."""
        return self._dispatchers.get((tuple(resource), selector))


def _dispatcher(stream: Stream, functions: list[EventFn]) -> EventFn:
    plural = stream[0][-1]

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
    return dispatch


def deliverer(
    dispatch: EventFn, plural: str, **context: Any
) -> Callable[[str | None, dict[str, Any]], Awaitable[None]]:
    """A reflector's event, as the keyword arguments every event function takes: kopf's
    names, the stream's ``resource_plural``, and ``context`` (the composition root's
    ``app``, the one application context, and the ``logger``)."""

    async def deliver(type_: str | None, body: dict[str, Any]) -> None:
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
            resource_plural=plural,
            **context,
        )

    return deliver
