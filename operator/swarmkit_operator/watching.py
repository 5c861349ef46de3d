"""Watch streams for the resources the reconcile pipeline follows: LIST, then WATCH.

kopf runs every watch event through a per-object worker task, a cause, an object logger
and its handler bookkeeping before a handler sees it: ~40% of the operator's event loop
while 6,000 objects reconcile (py-spy under ``make bench``), for handlers that only update
the in-memory indexes and queue keys (:mod:`swarmkit_operator.handlers.events`). Those
resources are watched here instead, the way client-go's reflector does it:

* LIST (paged) and deliver every object as an event of type ``None``, as kopf's initial
  listing did; an object known from an earlier listing that is gone now gets ``DELETED``.
  The first listing can be the start-up's own (``seed``: the LIST that filled the
  indexes moments ago), so a restart lists each resource once, not twice.
* WATCH from the list's resourceVersion, with bookmarks, delivering ADDED / MODIFIED /
  DELETED in order; a stream the server ends (``timeoutSeconds``) resumes where it was.
* ``410 Gone`` (that version was compacted away) lists again; a failed connection (the
  apiserver restarting) retries the watch from the same version after a backoff. An
  event that is not JSON is skipped and the resource listed again (resuming from the same
  version would deliver it again, forever); one nested too deep for Python is decoded
  with that value cut and its object marked (:mod:`swarmkit_api.decoding`), so it flows on to be
  reported as that object's condition.

A resource's events are delivered one at a time, in order: the handlers do not block on
the API (they update indexes and queue work). A metadata-only reflector asks for
``PartialObjectMetadata``: no ``data`` crosses the wire (ConfigMaps: every handler and
index of theirs reads names and labels only, and a rendered ConfigMap carries a whole
skill).
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import k8s
from .indexes import Listing, Resource, compact, list_all

log = logging.getLogger("swarmkit_operator.watching")

#: ``deliver(event type or None for a listed object, body)``.
Deliver = Callable[[str | None, dict[str, Any]], Awaitable[None]]

METADATA_WATCH = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json"
YIELD_EVERY = 25


class Gone(Exception):
    """The resourceVersion to resume from is no longer available: list again."""


def _minimal(body: dict[str, Any]) -> dict[str, Any]:
    """What a synthesized DELETED needs of an object (names, uid, labels)."""
    meta = body.get("metadata") or {}
    keep = ("name", "namespace", "uid", "labels", "resourceVersion")
    # Kept per object for the stream's life: strings shared (issue 43, bytes per object).
    return {"metadata": compact({k: meta[k] for k in keep if k in meta})}


@dataclass
class Reflector:
    """One resource in one namespace (``None``: every namespace), kept flowing to ``deliver``."""

    resource: Resource
    namespace: str | None
    deliver: Deliver
    metadata_only: bool = False
    #: A server-side label selector ("" for none): e.g. only the pods of Runs.
    label_selector: str = ""
    #: Namespace patterns (globs) to keep from a cluster-wide stream; empty: keep all.
    patterns: Sequence[str] = ()
    server_timeout: int = 270
    read_timeout: float = 300.0
    backoff: float = 1.0
    #: uid → the minimal body of every object delivered and not deleted (to tell, after a
    #: new listing, which ones vanished while no stream was open).
    known: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: A LIST made moments ago (the start-up's, for the indexes): delivered instead of
    #: listing again, and watched from.
    seed: Listing | None = None
    listings: int = 0
    resumes: int = 0

    @property
    def where(self) -> str:
        labelled = f" labelled {self.label_selector}" if self.label_selector else ""
        return f"{self.resource.plural}{labelled} in {self.namespace or 'every namespace'}"

    def seed_from(self, listings: Sequence[Listing]) -> None:
        """Start from the LIST of its own resource, scope and label selector among
        ``listings`` (the start-up's, made moments ago for the indexes), if there is one."""
        self.seed = next(
            (
                listing
                for listing in listings
                if listing.resource == self.resource.plural
                and listing.namespace == self.namespace
                and listing.selector == self.label_selector
            ),
            None,
        )

    async def run(self) -> None:
        version: str | None = None
        failures = 0
        while True:
            try:
                if version is None:
                    version = await self.list()
                    self.seed = None
                version = await self.watch(version)
                failures = 0
            except Gone:
                log.info("watch of %s: resourceVersion expired, listing again", self.where)
                version = None
            except k8s.Undecodable as exc:
                # Skipped, never retried from the same version (it would come again).
                log.warning("watch of %s: %s; listing again", self.where, exc)
                version = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a connection lost, the apiserver restarting, a 5xx
                failures += 1
                if isinstance(exc, k8s.ApiError) and exc.status == 410:
                    version = None
                    continue
                delay = min(self.backoff * failures, 10.0)
                log.warning(
                    "watch of %s failed (%s: %s); retrying in %.0fs",
                    self.where,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)

    def _wanted(self, body: dict[str, Any]) -> bool:
        if not self.patterns:
            return True
        ns = (body.get("metadata") or {}).get("namespace") or ""
        return any(fnmatch.fnmatchcase(ns, p) for p in self.patterns)

    async def _send(self, type_: str | None, body: dict[str, Any]) -> None:
        uid = str((body.get("metadata") or {}).get("uid", ""))
        if type_ == "DELETED":
            self.known.pop(uid, None)
        else:
            self.known[uid] = _minimal(body)
        try:
            await self.deliver(type_, body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # One object's event that its handlers cannot take is that object's problem:
            # raising here would restart the stream at the same version, forever.
            meta = body.get("metadata") or {}
            log.warning(
                "watch of %s: the event %s of %s/%s failed (%s: %s); skipped",
                self.where,
                type_ or "LISTED",
                meta.get("namespace", ""),
                meta.get("name", ""),
                type(exc).__name__,
                exc,
                exc_info=True,
            )

    async def list(self) -> str:
        """Deliver every object (type ``None``) and a DELETED for each one gone; the
        listing's resourceVersion."""
        present: set[str] = set()
        seed = self.seed
        if (
            seed is not None
            and seed.metadata_only == self.metadata_only
            and seed.selector == self.label_selector
        ):
            await self._deliver_listed(seed.items, present)
            self.listings += 1
            return seed.resource_version
        # The same paged LIST the start-up makes (indexes.list_all), kept as one Listing.
        listed: list[Listing] = []
        scope = [self.namespace] if self.namespace else []
        await list_all(
            self.resource,
            scope,
            self.label_selector,
            metadata_only=self.metadata_only,
            listings=listed,
        )
        [listing] = listed
        await self._deliver_listed(listing.items, present)
        version = listing.resource_version
        for uid in [u for u in self.known if u not in present]:
            await self._send("DELETED", self.known[uid])
        self.listings += 1
        return version

    async def _deliver_listed(self, items: Sequence[dict[str, Any]], present: set[str]) -> None:
        for i, item in enumerate(items):
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                # A page is delivered without a real await in between: let the
                # reconciles, the probes and the other streams in now and then.
                await asyncio.sleep(0)
            if not self._wanted(item):
                continue
            present.add(str((item.get("metadata") or {}).get("uid", "")))
            await self._send(None, item)

    async def watch(self, version: str) -> str:
        """Deliver events after ``version`` until the server ends the stream; the last
        resourceVersion seen (bookmarks included)."""
        path = self.resource.path(self.namespace)
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", version),
            ("timeoutSeconds", str(self.server_timeout)),
        ]
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        accept = METADATA_WATCH if self.metadata_only else "application/json"
        self.resumes += 1
        async for event in k8s.stream(path, query, accept, self.read_timeout):
            type_ = event.get("type")
            body = event.get("object") or {}
            if type_ == "ERROR":
                if body.get("code") == 410:
                    raise Gone()
                raise k8s.ApiError("WATCH", path, int(body.get("code") or 0), str(body))
            version = str((body.get("metadata") or {}).get("resourceVersion") or version)
            if type_ in ("ADDED", "MODIFIED", "DELETED") and self._wanted(body):
                await self._send(type_, body)
        return version


def reflectors(
    resource: Resource,
    namespaces: Sequence[str],
    deliver: Deliver,
    **options: Any,
) -> list[Reflector]:
    """The reflectors covering ``namespaces`` (empty: all): one per namespace, or a single
    cluster-wide one when any is a pattern (a pattern cannot be watched server-side)."""
    patterns = [n for n in namespaces if any(c in n for c in "*?[")]
    if patterns or not namespaces:
        return [Reflector(resource, None, deliver, patterns=tuple(namespaces), **options)]
    return [Reflector(resource, ns, deliver, **options) for ns in dict.fromkeys(namespaces)]
