"""In-memory indexes over watched objects: LISTed at start-up, kept current by events.

An index function (marked with :func:`index`; the composition root collects the marks)
maps one object to ``{key: value}``;
:class:`Indexes` keeps, per index, key → {object uid: value}, so one object's entries can be
replaced or dropped when it changes or goes. Both the reconcile loop
(:mod:`swarmkit_operator.reconcile`) and the Runs controller read their inputs from here.

:func:`populate` fills every index with one paged LIST at start-up (and again at resync,
pruning what vanished); from then on the watch streams' functions feed each event through
:meth:`Indexes.update` / :meth:`Indexes.delete`. This module does not import kopf: for a
resource no declared kind nor shared module watches (:data:`CORE_MAINTAINED`), the
composition root adds a watch function keeping its indexes current.
"""

from __future__ import annotations

import asyncio
import bisect
import fnmatch
import heapq
import itertools
import logging
import sys
import time
from collections import deque
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from swarmkit_api import GROUP, VERSION
from swarmkit_api.resources import KINDS

from . import k8s
from .marks import mark

log = logging.getLogger("swarmkit_operator")

PRESENT = object()  # a label filter value: the label exists, whatever its value
#: Seconds of first-seen times :meth:`Indexes.arrived` can look back over.
ARRIVALS_KEPT = 10.0
#: The resources whose objects' settling is tracked (:meth:`Indexes.unsettled`): the
#: kinds the skill library records. Not every resource: a ConfigMap, Pod or Job shows no
#: ``observedGeneration`` and would be kept as unsettled for as long as it lives.
SETTLING_RESOURCES = frozenset({"skills", "agents"})


@dataclass(frozen=True)
class Resource:
    """A watched resource kind: how to LIST it."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return (
            f"{prefix}/namespaces/{namespace}/{self.plural}"
            if namespace
            else (f"{prefix}/{self.plural}")
        )


#: Where an index over one of our kinds' plurals LISTs (the API's table of kinds), and the
#: core resource the shared modules watch (read-only: an index over another resource
#: names its group and version, see :func:`index`). Never Secrets: the operator holds no
#: verb on them (issue 41).
RESOURCES: Mapping[str, Resource] = MappingProxyType(
    {
        **{k.plural: Resource(GROUP, VERSION, k.plural) for k in KINDS},
        "configmaps": Resource("", "v1", "configmaps"),
    }
)
#: The core resources whose indexes a shared module keeps current from its own events
#: (``handlers/common.py`` the ConfigMaps); a declared kind's are kept current by its
#: event function.
CORE_MAINTAINED = frozenset({"configmaps"})
IndexFn = Callable[..., Mapping[Any, Any]]


class IndexId(StrEnum):
    """Every index of the operator, by name. An index is read by its member
    (``ctl.lookup(IndexId.SKILL_VIEWS, key)``), never by a string: a misspelt name is an
    attribute error at import and a type error in ``mypy``, not a silent empty lookup, and
    :func:`index` refuses to declare a name that is not here. The composition root's
    wiring then refuses two functions declaring one name and a ``Watch`` through an
    index nothing declares (``handlers/root.py``). Members are strings: logs, metrics and
    the indexes' own keys read as before.

    Grouped by the module whose ``@index`` declares it; a kind's views index is
    ``<kind>_views`` (:func:`swarmkit_operator.reconcile.views.view_index`).
    """

    # The kinds' own (handlers/<kind>.py), their views first.
    WORKSPACE_VIEWS = "workspace_views"
    WORKSPACE_BY_CONFIG_MAP = "workspace_by_config_map"
    SKILL_VIEWS = "skill_views"
    SKILL_BY_CONFIG_MAP = "skill_by_config_map"
    SKILL_BY_COMPONENT = "skill_by_component"
    SKILL_BY_TARGET = "skill_by_target"
    AGENT_VIEWS = "agent_views"
    AGENT_BY_GRANT = "agent_by_grant"
    AGENT_BY_WORKSPACE = "agent_by_workspace"
    FUNNEL_VIEWS = "funnel_views"
    FUNNEL_BY_REVIEWER = "funnel_by_reviewer"
    FUNNEL_BY_JUDGE = "funnel_by_judge"
    TOPOLOGY_VIEWS = "topology_views"
    TOPOLOGY_BY_AGENT = "topology_by_agent"
    TOPOLOGY_BY_WORKSPACE = "topology_by_workspace"
    TOPOLOGY_BY_FUNNEL = "topology_by_funnel"
    EVALSET_VIEWS = "evalset_views"
    EVALSET_BY_JUDGE_SKILL = "evalset_by_judge_skill"
    EVALSET_BY_JUDGE_AGENT = "evalset_by_judge_agent"
    EVALSET_CALIBRATIONS = "evalset_calibrations"
    EVALRUN_VIEWS = "evalrun_views"
    EVALRUN_UIDS = "evalrun_uids"
    EVALRUN_BY_SET = "evalrun_by_set"
    EVAL_RESULTS = "eval_results"
    EVAL_CASE_RUNS = "eval_case_runs"
    FUNNEL_DECISIONS = "funnel_decisions"
    # Rendered ConfigMaps and Run bundles (reconcile/gc.py).
    RENDERED_CONFIG_MAPS = "rendered_config_maps"
    RENDERED_CONFIG_MAP_NAMES = "rendered_config_map_names"
    PINNED_CONFIG_MAPS = "pinned_config_maps"
    # The Runs controller's inputs (handlers/run.py) and the skill Reviews (handlers/review.py).
    RUNS_BY_UID = "runs_by_uid"
    RUNS_JOBS_BY_RUN = "runs_jobs_by_run"
    RUNS_PODS_BY_RUN = "runs_pods_by_run"
    RUNS_REVIEWS_BY_RUN = "runs_reviews_by_run"
    RUNS_TOPOLOGIES = "runs_topologies"
    RUNS_AGENTS = "runs_agents"
    RUNS_SKILLS = "runs_skills"
    RUNS_WORKSPACES = "runs_workspaces"
    SPEND_QUOTAS = "spend_quotas"
    SKILL_REVIEWS = "skill_reviews"
    # Served Topologies (serving.py), mailbox deliveries (handlers/delivery.py), the skill
    # library and the web view (handlers/library.py), promotions (handlers/promotion.py).
    SERVE_DEPLOYMENTS = "serve_deployments"
    SERVE_BUNDLES = "serve_bundles"
    PENDING_DELIVERIES = "pending_deliveries"
    LIBRARY_SKILL_SPECS = "library_skill_specs"
    WEBVIEW_MAILBOX_ITEMS = "webview_mailbox_items"
    PROMOTION_EVAL_RUNS = "promotion_eval_runs"
    PROMOTION_REVIEWS = "promotion_reviews"
    PROMOTION_TOPOLOGIES_BY_EVAL_SET = "promotion_topologies_by_eval_set"
    PROMOTION_AGENTS_BY_EVAL_SET = "promotion_agents_by_eval_set"


@dataclass(frozen=True)
class IndexSpec:
    id: IndexId
    resource: str
    fn: IndexFn
    labels: Mapping[str, Any] = field(default_factory=dict)
    #: The function reads only ``metadata`` (names, labels, annotations): the start-up
    #: LIST can ask for metadata only when every index of the resource does.
    metadata_only: bool = False
    #: How to LIST and watch the resource (its group and version).
    source: Resource | None = None

    def __post_init__(self) -> None:
        # A name that is no member is refused where it is declared (a plain string that
        # is one becomes the member: logs and keys read the same).
        object.__setattr__(self, "id", IndexId(self.id))

    @property
    def listed(self) -> Resource:
        return self.source or RESOURCES[self.resource]

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, want in self.labels.items():
            if key not in labels or (want is not PRESENT and labels[key] != want):
                return False
        return True

    @property
    def selector(self) -> str:
        return ",".join(k if v is PRESENT else f"{k}={v}" for k, v in self.labels.items())


def index(
    resource: str,
    *,
    id: IndexId,
    labels: Mapping[str, Any] | None = None,
    group: str | None = None,
    version: str | None = None,
    metadata_only: bool = False,
) -> Callable[[IndexFn], IndexFn]:
    """Mark an index function, like ``@kopf.index`` but without kopf's start-up cost.

    ``fn(body=, meta=, spec=, status=, namespace=, name=, uid=, labels=, annotations=,
    logger=)`` returns ``{key: value}`` for one object. ``id`` is its :class:`IndexId`
    (a name that is none is refused here, at import). Read it with
    ``Controller.lookup(id, key)`` / ``lookup_all`` or ``Controller.indexes.view(id)`` (a
    mapping key → values, like a kopf index). For a resource other than our kinds and the
    core one (:data:`RESOURCES`), pass ``group``/``version``: the composition
    root then watches it with a function keeping its indexes current, which runs before
    every other function of that watch.
    """
    if resource in RESOURCES:
        source = RESOURCES[resource]
    else:
        source = Resource(group or "", version or "v1", resource)
    spec_of = dict(labels or {})
    declared = IndexId(id)  # before any function: a wrong name fails at import

    def register(fn: IndexFn) -> IndexFn:
        return mark(fn, IndexSpec(declared, resource, fn, spec_of, metadata_only, source))

    return register


def _revision(meta: Mapping[str, Any]) -> int | None:
    """``resourceVersion`` as an integer, or None when it is not one (then never compared)."""
    try:
        return int(str(meta.get("resourceVersion", "")))
    except ValueError:
        return None


class UnknownIndex(KeyError):
    """An index read that these indexes were not built with (no wired module declares it)."""

    def __init__(self, index_id: IndexId) -> None:
        super().__init__(f"no index {index_id!s} is wired (no module declaring it was collected)")


class _Indexed(NamedTuple):
    """One indexed object: its resourceVersion (None: not an integer), when it was last
    indexed (a prune spares what an event refreshed), and the keys it owns: index id, key,
    index id, key... (one flat tuple: most objects own one key in each of several indexes)."""

    revision: int | None
    touched: float
    owned: tuple[Any, ...]


_intern = sys.intern


def compact(value: Any) -> Any:
    """``value`` with its strings interned, otherwise equal and of the same types.

    Every watch event is a fresh JSON decode: the same namespace, field names, reasons and
    timestamps are new string objects in every object's view. An index holds one view per
    object for as long as the object lives, so sharing them is most of a view's bytes
    (issue 43: 20,000 Skills within 400 MB)."""
    kind = type(value)
    if kind is str:
        return _intern(value)
    # A string, most of what a view holds, is interned where it is met: a call of this
    # function per string was a fifth of the indexing of a start-up's listing.
    if kind is dict:
        return {
            (_intern(k) if type(k) is str else compact(k)): (
                _intern(v) if type(v) is str else compact(v)
            )
            for k, v in value.items()
        }
    if kind is tuple:
        return tuple([_intern(v) if type(v) is str else compact(v) for v in value])
    if kind is list:
        return [_intern(v) if type(v) is str else compact(v) for v in value]
    return value  # numbers, None, frozen dataclasses, named tuples: kept as they are


class Indexes:
    """In-memory indexes over watched objects: index id → key → {object uid: value}.

    Like kopf's indexes, but filled by a paged LIST at start-up and then kept current by
    the ``on.event`` handlers. (kopf's own index pre-population wakes every waiting
    per-object worker whenever one object is indexed: quadratic in the number of objects,
    which measured 15-45 s before the first reconcile with ~2,600 objects.)
    """

    def __init__(self, specs: Iterable[IndexSpec]) -> None:
        self.specs: dict[str, list[IndexSpec]] = {}
        #: plural → how to LIST it.
        self.resources: dict[str, Resource] = {}
        for spec in specs:
            self.specs.setdefault(spec.resource, []).append(spec)
            self.resources.setdefault(spec.resource, spec.listed)
        self.data: dict[IndexId, dict[Any, dict[str, Any]]] = {
            spec.id: {} for specs in self.specs.values() for spec in specs
        }
        # resource → uid → what this process remembers of one indexed object (one small
        # record, not three dicts keyed by (resource, uid): per-object bookkeeping is paid
        # 20,000 times over).
        self._objects: dict[str, dict[str, _Indexed]] = {r: {} for r in self.specs}
        # (resource, namespace) → when its objects new to this process were indexed, the
        # last ARRIVALS_KEPT seconds of them: whether a bulk apply is still arriving.
        self._arrivals: dict[tuple[str, str], deque[float]] = {}
        # resource → uid → namespace of the objects whose status does not show their
        # generation reconciled (new, held, edited), and their number per (resource,
        # namespace): whether a namespace is still settling (:meth:`unsettled`).
        self._unsettled: dict[str, dict[str, str]] = {}
        self._unsettled_count: dict[tuple[str, str], int] = {}

    def update(self, resource: str, body: Mapping[str, Any], listed: bool = False) -> None:
        """Index ``body`` (``listed``: it comes from a LIST, not a watch event)."""
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        objects = self._objects.setdefault(resource, {})
        # A re-LIST (the prune after start-up, the resync) may carry an older version than
        # a watch event already indexed: keep the newer one, or a reconcile would compute
        # status from a stale spec and write an older observedGeneration (a regression).
        rv = _revision(meta)
        known = objects.get(uid)
        if rv is not None and known is not None and known.revision is not None:
            if rv < known.revision:
                return
            if listed and rv == known.revision:
                # A listing of the version already indexed (a resourceVersion names one
                # write): a restart's streams deliver the start-up LIST that filled these
                # indexes moments ago, a resync lists what did not change. Computing every
                # index and interning it again was a third of a restart's index work.
                objects[uid] = known._replace(touched=time.monotonic())
                return
        if rv is None and known is not None:
            rv = known.revision
        if known is None and not (body.get("status") or {}).get("observedGeneration"):
            # New to the operator *and* never reconciled: what a bulk apply creates. The
            # start-up LIST of a restart (objects with their status) is no apply arriving.
            self._arrived(resource, str(meta.get("namespace") or ""))
        if resource in SETTLING_RESOURCES:
            observed = (body.get("status") or {}).get("observedGeneration")
            self._settled(
                resource, uid, meta, observed is not None and observed == meta.get("generation")
            )
        self._drop(resource, uid)
        labels = meta.get("labels") or {}
        kwargs = {
            "body": body,
            "meta": meta,
            "spec": body.get("spec") or {},
            "status": body.get("status") or {},
            "logger": log,
            "namespace": meta.get("namespace"),
            "name": meta.get("name", ""),
            "uid": uid,
            "labels": labels,
            "annotations": meta.get("annotations") or {},
        }
        owned: list[Any] = []
        for spec in self.specs.get(resource, ()):
            if not spec.matches(labels):
                continue
            try:
                entries = spec.fn(**kwargs)
            except Exception as exc:  # one bad object must not break the others
                log.warning("index %s failed for %s/%s: %s", spec.id, resource, uid, exc)
                continue
            if not entries:
                continue
            store = self.data[spec.id]
            for key, value in entries.items():
                key = compact(key)
                store.setdefault(key, {})[uid] = compact(value)
                owned += (spec.id, key)
        objects[uid] = _Indexed(rv, time.monotonic(), tuple(owned))

    def _arrived(self, resource: str, namespace: str) -> None:
        now = time.monotonic()
        times = self._arrivals.setdefault((resource, sys.intern(namespace)), deque())
        times.append(now)
        while times[0] < now - ARRIVALS_KEPT:
            times.popleft()

    def arrived(self, resources: Iterable[str], namespace: str, within: float) -> int:
        """How many objects of ``resources`` in ``namespace`` without a status written yet
        were indexed for the first time in the last ``within`` seconds (at most
        :data:`ARRIVALS_KEPT`): a bulk apply still arriving, as opposed to one object
        created by hand or a restart listing what the operator already reconciled."""
        now = time.monotonic()
        since = now - within
        count = 0
        for resource in resources:
            times = self._arrivals.get((resource, namespace))
            while times and times[0] < now - ARRIVALS_KEPT:
                times.popleft()
            if times:
                count += len(times) - bisect.bisect_left(times, since)
        return count

    def burst_ends(
        self, resources: Iterable[str], namespace: str, within: float, objects: int
    ) -> float:
        """When (``time.monotonic()``) :meth:`arrived` would count fewer than ``objects``
        within ``within`` seconds if nothing more arrived: the moment a bulk apply is over,
        at the earliest (now when it is already)."""
        latest: list[float] = []
        for resource in resources:
            times = self._arrivals.get((resource, namespace)) or ()
            latest += itertools.islice(reversed(times), objects)  # kept oldest first
        if len(latest) < objects:
            return time.monotonic()
        return heapq.nlargest(objects, latest)[-1] + within

    def apply(self, resource: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """One watch event of ``resource``: DELETED drops the object's entries, any other
        event (or a listing's, ``None``) indexes it again. Every stream keeping indexes
        current goes through here (a kind's event function, the ConfigMaps' and
        ``handlers/common.index_event`` for the resources no kind watches)."""
        if event_type == "DELETED":
            self.delete(resource, str((body.get("metadata") or {}).get("uid", "")))
        else:
            self.update(resource, body, listed=event_type is None)

    def _settled(self, resource: str, uid: str, meta: Mapping[str, Any], settled: bool) -> None:
        pending = self._unsettled.setdefault(resource, {})
        if settled:
            namespace = pending.pop(uid, None)
            if namespace is not None:
                self._unsettled_count[(resource, namespace)] -= 1
        elif uid not in pending:
            namespace = sys.intern(str(meta.get("namespace") or ""))
            pending[uid] = namespace
            key = (resource, namespace)
            self._unsettled_count[key] = self._unsettled_count.get(key, 0) + 1

    def unsettled(self, resources: Iterable[str], namespace: str) -> int:
        """How many objects of ``resources`` in ``namespace`` the index shows without their
        generation reconciled (``status.observedGeneration`` short of it): objects just
        created, held, edited or failing. 0: the namespace has settled. Only
        :data:`SETTLING_RESOURCES` are tracked; asking about another is a ValueError."""
        resources = tuple(resources)
        untracked = set(resources) - SETTLING_RESOURCES
        if untracked:
            raise ValueError(f"settling is not tracked for {sorted(untracked)}")
        return sum(self._unsettled_count.get((r, namespace), 0) for r in resources)

    def delete(self, resource: str, uid: str) -> None:
        if resource in SETTLING_RESOURCES:
            self._settled(resource, uid, {}, True)
        self._drop(resource, uid)
        self._objects.get(resource, {}).pop(uid, None)

    def _drop(self, resource: str, uid: str) -> None:
        known = self._objects.get(resource, {}).get(uid)
        if known is None:
            return
        owned = known.owned
        for index_id, key in zip(owned[::2], owned[1::2], strict=True):
            store = self.data[index_id]
            values = store.get(key)
            if values is not None:
                values.pop(uid, None)
                if not values:
                    del store[key]

    def prune(self, resource: str, present: set[str], listed_at: float) -> int:
        """Drop objects a LIST (started at ``listed_at``) no longer returned, unless an
        event refreshed them since; returns how many."""
        objects = self._objects.get(resource, {})
        stale = [
            uid
            for uid, known in objects.items()
            if uid not in present and known.touched < listed_at
        ]
        for uid in stale:
            self.delete(resource, uid)
        return len(stale)

    def view(self, index_id: IndexId) -> Mapping[Any, list[Any]]:
        """A live read-only mapping key → values (the shape of a kopf index)."""
        return _IndexView(self._store(index_id))

    def first(self, index_id: IndexId, key: Any) -> Any:
        """The (first) value under ``key``, None if there is none."""
        values = self._store(index_id).get(key)
        return next(iter(values.values())) if values else None

    def values(self, index_id: IndexId, key: Any) -> list[Any]:
        return list(self._store(index_id).get(key, {}).values())

    def keys(self, index_id: IndexId) -> list[Any]:
        return list(self._store(index_id))

    def _store(self, index_id: IndexId) -> dict[Any, dict[str, Any]]:
        """The entries of an index these indexes were built with; one they were not (no
        module declaring it was wired) is an error naming it, never an empty answer."""
        store = self.data.get(index_id)
        if store is None:
            raise UnknownIndex(index_id)
        return store


class _IndexView(Mapping[Any, list[Any]]):
    def __init__(self, store: dict[Any, dict[str, Any]]) -> None:
        self._store = store

    def __getitem__(self, key: Any) -> list[Any]:
        values = self._store.get(key)
        if not values:
            raise KeyError(key)
        return list(values.values())

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._store))

    def __len__(self) -> int:
        return len(self._store)


@dataclass(frozen=True)
class Listing:
    """One paged LIST of a resource in one scope (``None``: every namespace), unfiltered by
    namespace patterns: what a watch stream can start from instead of listing again."""

    resource: str
    namespace: str | None
    metadata_only: bool
    resource_version: str
    items: list[dict[str, Any]]
    #: The LIST's label selector ("" for none): a stream starts only from its own.
    selector: str = ""


def without_managed_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` without ``metadata.managedFields`` (the rest shared, not copied): more
    than half of a decoded Skill's bytes (three field managers' ``fieldsV1`` trees), read by
    none of the functions a kind's stream runs (issue 43). What a start-up listing holds
    until its stream delivered it, and the body a kind keeps for its reconcile
    (``Kind.keep_body``): during a burst of thousands of new objects, thousands wait in the
    queue."""
    meta = body.get("metadata")
    if not isinstance(meta, Mapping) or "managedFields" not in meta:
        return dict(body)
    return {**body, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


async def list_pages(
    resource: Resource,
    namespaces: Sequence[str],
    selector: str = "",
    metadata_only: bool = False,
    listings: list[Listing] | None = None,
    slim: bool = False,
) -> AsyncIterator[list[dict[str, Any]]]:
    """A paged LIST, cluster-wide or per namespace, one page of items at a time (each
    page is handed on while the next is read, :func:`k8s.list_pages`); with
    ``listings``, each scope's :class:`Listing` is appended to it once it is whole (its
    items :func:`without_managed_fields` with ``slim``: the listing of a start-up lives
    until its stream delivered it, every object of the cluster at once)."""
    # Namespace patterns cannot be listed server-side: list cluster-wide and filter here.
    patterns = [n for n in namespaces if any(c in n for c in "*?[")]
    scopes: list[str | None] = [None] if patterns or not namespaces else list(namespaces)
    query = [("limit", "500"), *([("labelSelector", selector)] if selector else [])]
    accept = k8s.METADATA_ONLY if metadata_only else "application/json"
    for namespace in scopes:
        version = ""
        scope_items: list[dict[str, Any]] = []
        async for page in k8s.list_pages(resource.path(namespace), query, accept):
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            items = page.get("items") or []
            if listings is not None:
                scope_items.extend(map(without_managed_fields, items) if slim else items)
            yield [
                item
                for item in items
                if not patterns
                or any(
                    fnmatch.fnmatchcase((item.get("metadata") or {}).get("namespace") or "", p)
                    for p in namespaces
                )
            ]
        if listings is not None:
            listings.append(
                Listing(resource.plural, namespace, metadata_only, version, scope_items, selector)
            )


async def list_all(
    resource: Resource,
    namespaces: Sequence[str],
    selector: str = "",
    metadata_only: bool = False,
    listings: list[Listing] | None = None,
) -> list[dict[str, Any]]:
    """A paged LIST, cluster-wide or per namespace, whole (:func:`list_pages`)."""
    return [
        item
        async for page in list_pages(resource, namespaces, selector, metadata_only, listings)
        for item in page
    ]


async def populate(
    indexes: Indexes,
    namespaces: Sequence[str],
    prune: bool = False,
    listings: list[Listing] | None = None,
    slim: Collection[str] = (),
) -> dict[str, float]:
    """LIST every indexed resource into ``indexes`` (server-side label selectors when every
    index of a resource filters on labels, metadata only when none reads more); with
    ``prune``, drop what is gone; with ``listings``, keep each unfiltered LIST there (the
    start-up hands them to the watch streams, which then need not list again; those of the
    resources in ``slim`` without ``managedFields``). Returns the seconds each resource
    took.

    The resources are listed concurrently (each one's pages in order): the apiserver
    encodes one list while this process decodes another, which is most of a restart's
    time with thousands of objects."""
    took: dict[str, float] = {}

    async def one(resource: str, specs: Sequence[IndexSpec]) -> None:
        selectors = [s.selector for s in specs]
        if not all(selectors):
            selectors = [""]
        metadata_only = all(s.metadata_only for s in specs)
        listed_at = time.monotonic()
        present: set[str] = set()
        try:
            for selector in dict.fromkeys(selectors):
                # Indexed page by page: this process indexes one page while the apiserver
                # encodes the next.
                async for page in list_pages(
                    indexes.resources[resource],
                    namespaces,
                    selector,
                    metadata_only,
                    listings,
                    slim=resource in slim,
                ):
                    for item in page:
                        indexes.update(resource, item, listed=True)
                        present.add(str((item.get("metadata") or {}).get("uid", "")))
        except (k8s.ApiError, OSError) as exc:
            # Start (or resync) with what could be listed; the watch fills the rest in.
            log.warning("could not list %s to pre-populate the indexes: %s", resource, exc)
            return
        finally:
            took[resource] = round(time.monotonic() - listed_at, 2)
        if prune:
            dropped = indexes.prune(resource, present, listed_at)
            if dropped:
                log.info("dropped %d vanished %s from the indexes", dropped, resource)

    await asyncio.gather(*(one(r, specs) for r, specs in indexes.specs.items()))
    return took


#: An index as a reader sees it: key → the values of every object under that key.
IndexLike = Mapping[Any, Iterable[Any]]


def one(index: IndexLike, key: Any) -> dict[str, Any] | None:
    """The (first) entry under ``key``, as a copy, or None."""
    values = index.get(key)
    if not values:
        return None
    return dict(next(iter(values)))


@dataclass(frozen=True)
class ResolverIndexes:
    """The one set of indexes the runner-workload resolver reads
    (:class:`swarmkit_operator.workload.resolve.Resolver`): every field is required, so no
    workload can be resolved over fewer of them (a gateway's resolver once lacked the
    Funnels and waited forever on "Funnel not found")."""

    #: (namespace, name) → summaries of Topologies, Agents, Skills and Workspaces.
    topologies: IndexLike
    agents: IndexLike
    skills: IndexLike
    workspaces: IndexLike
    #: (namespace, name) → Funnel specs (Topology nodes' funnels, pinned like agents).
    funnels: IndexLike
    #: (namespace, skill) → Reviews of swarm-authored skills.
    skill_reviews: IndexLike
