"""An in-memory Kubernetes API for unit tests, in the spirit of controller-runtime's fake client.

The operator talks to the API through one seam: :func:`swarmkit_operator.k8s.request`
(verb, path, body, content type, query → HTTP status and JSON) and :func:`k8s.stream`
(a watch). :class:`FakeApi` answers both from an object store kept in memory, with the
semantics a controller depends on, so every helper of :mod:`swarmkit_operator.k8s.objects`
(its 404/409 handling included), the index LISTs and the reflectors run unchanged:

* objects get a ``uid``, a ``creationTimestamp`` and a ``resourceVersion`` from one
  counter that every write advances; a custom resource (and anything with a ``spec``) a
  ``generation`` that moves when something other than ``metadata``/``status`` changes;
* ``POST`` (``generateName`` too) answers 409 ``AlreadyExists``; ``GET``/``PUT``/``PATCH``/
  ``DELETE`` of a missing object 404 ``NotFound``; a write carrying a stale
  ``metadata.resourceVersion`` (or a ``DELETE`` whose ``preconditions`` do not hold) 409
  ``Conflict``; changing the data of an ``immutable`` ConfigMap or Secret 422;
* the ``status`` subresource: the kinds that have one (every swarmkit.dev CRD, read from
  ``crds/``, Deployments, Jobs, Pods) ignore ``status`` in a create or an update of the
  object, and a write to ``/status`` changes nothing else;
* ``PATCH`` as JSON merge patch (RFC 7386), strategic merge patch (as a merge patch, plus
  ``$deleteFromPrimitiveList/<field>``) and server-side apply. Apply is simplified: each
  field manager owns the fields it applied (lists are atomic, except ``conditions``, a map
  keyed by ``type`` as the CRDs declare), a field a manager applied before and leaves out
  now is removed unless another manager applied it too, and ``force`` is assumed;
* ``DELETE`` with finalizers sets ``deletionTimestamp``; without, the object goes and its
  dependents (``ownerReferences``) are collected like the garbage collector would;
* ``LIST`` with label selectors (``=``, ``!=``, ``in``, ``notin``, exists, ``!``), field
  selectors (any dotted path, ``=``/``!=``) and metadata only (``PartialObjectMetadataList``);
* watches from a ``resourceVersion`` (``ADDED``/``MODIFIED``/``DELETED``; an ``ERROR`` 410
  from before :meth:`FakeApi.compact`), metadata only when asked;
* the leader election's write gate (``k8s.set_write_gate``) fences writes as the real
  client does.

Every request is recorded (:attr:`FakeApi.requests`) and a test can make the next matching
requests fail (:meth:`FakeApi.refuse`). What it does not do: admission (CRD schemas, CEL,
webhooks, Pod Security), pagination (``limit`` answers everything at once) and field
ownership from anything but apply. Those are the integration tests' (a real apiserver).

Use :func:`fake_api` (a pytest fixture body) or ``FakeApi().install(monkeypatch)``.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import functools
import itertools
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Kind:
    """A resource the fake serves."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


BUILTIN: tuple[Kind, ...] = (
    Kind("", "v1", "configmaps", "ConfigMap"),
    Kind("", "v1", "secrets", "Secret"),
    Kind("", "v1", "events", "Event"),
    Kind("", "v1", "pods", "Pod", status_subresource=True),
    Kind("", "v1", "services", "Service", status_subresource=True),
    Kind("", "v1", "serviceaccounts", "ServiceAccount"),
    Kind("", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=True),
    Kind("apps", "v1", "deployments", "Deployment", status_subresource=True),
    Kind("batch", "v1", "jobs", "Job", status_subresource=True),
    Kind("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"),
    Kind("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    Kind("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    Kind("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False),
    Kind("coordination.k8s.io", "v1", "leases", "Lease"),
)


@functools.cache
def custom_kinds(crd_dir: Path = REPO / "crds") -> tuple[Kind, ...]:
    """The project's CRDs, as the kinds they install (read once per process)."""
    kinds = []
    for path in sorted(crd_dir.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        spec = crd["spec"]
        for version in spec["versions"]:
            kinds.append(
                Kind(
                    spec["group"],
                    version["name"],
                    spec["names"]["plural"],
                    spec["names"]["kind"],
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    status_subresource="status" in (version.get("subresources") or {}),
                )
            )
    return tuple(kinds)


class ApiStatus(Exception):
    """An answer other than 2xx, as the apiserver's ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason

    def body(self) -> str:
        return json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": str(self),
                "reason": self.reason,
                "code": self.code,
            }
        )


@dataclass(frozen=True)
class Target:
    """What a path names: a kind, a namespace (None: every one), a name, a subresource."""

    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None


@dataclass
class Refusal:
    """Answer ``status`` to the next ``times`` requests matching ``verb`` and ``path``."""

    verb: str
    path: re.Pattern[str]
    status: int
    times: int
    message: str


@dataclass
class WatchEvent:
    revision: int
    kind: Kind
    type: str
    object: dict[str, Any]


@dataclass
class FakeApi:
    """The in-memory API server (module docstring)."""

    kinds: tuple[Kind, ...] = field(default_factory=lambda: BUILTIN + custom_kinds())
    #: (verb, path) of every request, in order (watches as ``WATCH``).
    requests: list[tuple[str, str]] = field(default_factory=list)
    #: pod log text by (namespace, pod, container).
    pod_logs: dict[tuple[str, str, str], str] = field(default_factory=dict)
    _objects: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    _owned: dict[tuple[str, str, str, str], dict[tuple[str, str], set[tuple[Any, ...]]]] = field(
        default_factory=dict
    )
    _events: list[WatchEvent] = field(default_factory=list)
    _compacted: int = 0
    _revision: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _last: int = 0
    _refusals: list[Refusal] = field(default_factory=list)
    _tick: asyncio.Event | None = None
    _write_gate: Callable[[], str | None] = lambda: None

    # --- installing ---

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeApi:
        """Route the operator's API client to this fake for the rest of the test."""
        from swarmkit_operator import k8s
        from swarmkit_operator.k8s import client, objects, streams
        from swarmkit_operator.k8s.events import EventCorrelator

        self._write_gate = client.write_refusal
        for module in (k8s, client, objects):
            monkeypatch.setattr(module, "request", self.request)
            monkeypatch.setattr(module, "request_start", self.request_start)
        monkeypatch.setattr(client, "request_page", self.request_page)
        monkeypatch.setattr(objects, "request_text", self.request_text)
        for module in (k8s, streams):
            monkeypatch.setattr(module, "stream", self.stream)
        monkeypatch.setattr(k8s, "configure", lambda *a, **k: None)
        # The Events posted before are another API's: nothing to add a count to here.
        monkeypatch.setattr(objects, "_correlator", EventCorrelator())
        return self

    # --- the test's side: seeding, reading, faults ---

    def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``manifest`` as a user would (``kubectl create``); the object as stored."""
        kind = self._kind_of(manifest)
        meta = manifest.get("metadata") or {}
        namespace = meta.get("namespace") if kind.namespaced else None
        path = self._collection_path(kind, namespace)
        return dict(self._handle("POST", path, dict(manifest), "application/json", {}))

    def apply_spec(
        self, kind: str, namespace: str, name: str, spec: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Create the object or replace its ``spec`` (``kubectl apply`` of a manifest)."""
        found = self._by_kind(kind)
        current = self.get(kind, namespace, name)
        manifest = {
            "apiVersion": found.api_version,
            "kind": found.kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": copy.deepcopy(dict(spec)),
        }
        if current is None:
            return self.create(manifest)
        current["spec"] = manifest["spec"]
        path = self._object_path(found, namespace, name)
        return dict(self._handle("PUT", path, current, "application/json", {}))

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace an object (``kubectl replace``; a stale resourceVersion is a 409)."""
        kind = self._kind_of(obj)
        meta = obj["metadata"]
        path = self._object_path(kind, meta.get("namespace"), meta["name"])
        return dict(self._handle("PUT", path, copy.deepcopy(dict(obj)), "application/json", {}))

    def set_status(
        self, kind: str, namespace: str | None, name: str, status: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Write ``status`` as another controller would (a Deployment's ready replicas, a
        Job's completion, a Pod's phase): a merge patch of the status subresource."""
        found = self._by_kind(kind)
        path = self._object_path(found, namespace, name) + "/status"
        patch = {"status": copy.deepcopy(dict(status))}
        return dict(self._handle("PATCH", path, patch, "application/merge-patch+json", {}))

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A copy of the stored object, or None."""
        found = self._by_kind(kind)
        stored = self._objects.get(self._key(found, namespace if found.namespaced else "", name))
        return copy.deepcopy(stored) if stored is not None else None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Copies of every stored object of ``kind`` (in ``namespace`` if given)."""
        found = self._by_kind(kind)
        return [copy.deepcopy(o) for o in self._scan(found, namespace)]

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        found = self._by_kind(kind)
        self._handle("DELETE", self._object_path(found, namespace, name), None, "", {})

    def condition(self, kind: str, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
        """The condition ``type_`` of the object's status, or None."""
        stored = self.get(kind, namespace, name) or {}
        for cond in (stored.get("status") or {}).get("conditions") or ():
            if cond.get("type") == type_:
                return dict(cond)
        return None

    def writes(self) -> list[tuple[str, str]]:
        """The write requests so far (verb, path)."""
        return [(v, p) for v, p in self.requests if v in WRITE_VERBS]

    def refuse(
        self, verb: str, path: str, status: int = 500, times: int = 1, message: str = ""
    ) -> None:
        """Answer ``status`` to the next ``times`` requests of ``verb`` whose path matches the
        regular expression ``path`` (an injected fault: a 409, a 500, a 429...). The fake
        stands in for the client's transport and its retries: a refusal is what the caller
        gets after them."""
        self._refusals.append(
            Refusal(verb, re.compile(path), status, times, message or f"refused ({status})")
        )

    def compact(self) -> None:
        """Forget the watch history: a watch from an older resourceVersion gets 410 Gone."""
        self._compacted = self._last
        self._events.clear()

    @property
    def revision(self) -> int:
        """The store's current resourceVersion."""
        return self._last

    # --- the operator's side: k8s.request, request_start, request_text, stream ---

    async def request(
        self,
        verb: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        accept: str = "application/json",
        *,
        fenced: bool = True,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> tuple[int, Any]:
        """:func:`swarmkit_operator.k8s.request`: (HTTP status, JSON or the error's text)."""
        result = self.request_sync(verb, path, body, content_type, query, False, accept, fenced)
        await asyncio.sleep(0)  # a real request yields to the loop
        return result

    async def request_start(
        self, verb: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None
    ) -> tuple[int, Any]:
        return await self.request(verb, path, body, query=query)

    async def request_page(
        self, path: str, query: list[tuple[str, str]], accept: str = "application/json"
    ) -> tuple[int, bytes | str]:
        """:func:`swarmkit_operator.k8s.client.request_page`: a LIST's page undecoded, as
        the apiserver sends it (compact JSON)."""
        status, payload = await self.request("GET", path, query=query, accept=accept)
        if status >= 300:
            return status, str(payload)
        return status, json.dumps(payload, separators=(",", ":")).encode()

    async def request_text(
        self, verb: str, path: str, query: list[tuple[str, str]]
    ) -> tuple[int, str]:
        """:func:`swarmkit_operator.k8s.client.request_text`: an answer read as text."""
        status, payload = self.request_sync(verb, path, query=query, raw=True)
        await asyncio.sleep(0)
        return status, str(payload)

    def request_sync(
        self,
        verb: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        raw: bool = False,
        accept: str = "application/json",
        fenced: bool = True,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> tuple[int, Any]:
        from swarmkit_operator.k8s import client

        if verb in WRITE_VERBS and fenced:
            refusal = self._write_gate()
            if refusal is not None:  # refused before it is sent, as the real client does
                raise client.NotLeader(verb, path, refusal)
        self.requests.append((verb, path))
        params = dict(query or ())
        try:
            self._refused(verb, path)
            payload = self._handle(verb, path, body, content_type, params, accept)
        except ApiStatus as status:
            return status.code, status.body()
        if raw:
            return 200, payload
        return 200 if verb != "POST" else 201, copy.deepcopy(payload)

    async def stream(
        self,
        path: str,
        query: list[tuple[str, str]],
        accept: str = "application/json",
        read_timeout: float = 300.0,
    ) -> AsyncIterator[dict[str, Any]]:
        """:func:`swarmkit_operator.k8s.stream` of a watch: every event after the query's
        ``resourceVersion``, then each new one as it happens (until cancelled)."""
        self.requests.append(("WATCH", path))
        params = dict(query)
        target = self._target(path)
        since = int(params.get("resourceVersion") or self._last)
        selector = _label_selector(params.get("labelSelector", ""))
        metadata_only = "PartialObjectMetadata" in accept
        if since < self._compacted:
            gone = ApiStatus(410, "Expired", f"too old resource version: {since}")
            yield {"type": "ERROR", "object": json.loads(gone.body())}
            return
        while True:
            tick = self._ticker()
            for event in [e for e in self._events if e.revision > since]:
                since = event.revision
                obj = event.object
                if event.kind != target.kind or not self._in_scope(obj, target.namespace):
                    continue
                if not selector((obj.get("metadata") or {}).get("labels") or {}):
                    continue
                shown = _metadata_only(obj, "PartialObjectMetadata") if metadata_only else obj
                yield {"type": event.type, "object": copy.deepcopy(shown)}
            await tick.wait()

    # --- requests ---

    def _handle(
        self,
        verb: str,
        path: str,
        body: Any,
        content_type: str,
        params: Mapping[str, str],
        accept: str = "application/json",
    ) -> Any:
        if isinstance(body, str | bytes):  # a body sent as text (apply: UTF-8 JSON), parsed
            body = json.loads(body)  # as the apiserver does
        if path.endswith("/log") and verb == "GET":
            return self._pod_log(path, params)
        if verb == "GET" and (discovery := self._discovery(path)) is not None:
            return discovery
        target = self._target(path)
        if target.name is None:
            if verb == "GET":
                return self._list(target, params, accept)
            if verb == "POST":
                return self._create(target, body)
            raise ApiStatus(405, "MethodNotAllowed", f"{verb} on a collection")
        if verb == "GET":
            return copy.deepcopy(self._existing(target))
        if verb == "PUT":
            return self._update(target, body)
        if verb == "PATCH":
            return self._patch(target, body, content_type, params)
        if verb == "DELETE":
            return self._delete(target, body or {})
        raise ApiStatus(405, "MethodNotAllowed", verb)

    def _refused(self, verb: str, path: str) -> None:
        for refusal in self._refusals:
            if refusal.times > 0 and refusal.verb == verb and refusal.path.search(path):
                refusal.times -= 1
                raise ApiStatus(refusal.status, "Refused", refusal.message)

    def _target(self, path: str) -> Target:
        parts = [p for p in path.split("?")[0].split("/") if p]
        if parts[:1] == ["api"]:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiStatus(404, "NotFound", f"the server could not find {path}")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise ApiStatus(404, "NotFound", f"the server could not find {path}")
        for kind in self.kinds:
            if (kind.group, kind.version, kind.plural) == (group, version, rest[0]):
                name = rest[1] if len(rest) > 1 else None
                sub = rest[2] if len(rest) > 2 else None
                return Target(kind, namespace, name, sub)
        raise ApiStatus(404, "NotFound", f"the server could not find the resource {path}")

    def _discovery(self, path: str) -> dict[str, Any] | None:
        """An API group version's discovery document (``/apis/<group>/<version>``)."""
        parts = [p for p in path.split("?")[0].split("/") if p]
        if parts[:1] == ["apis"] and len(parts) == 3:
            group, version = parts[1], parts[2]
        elif parts == ["api", "v1"]:
            group, version = "", "v1"
        else:
            return None
        served = [k for k in self.kinds if (k.group, k.version) == (group, version)]
        if not served:
            raise ApiStatus(404, "NotFound", f"the server could not find {path}")
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": served[0].api_version,
            "resources": [
                {"name": k.plural, "kind": k.kind, "namespaced": k.namespaced} for k in served
            ],
        }

    def _existing(self, target: Target) -> dict[str, Any]:
        assert target.name is not None
        stored = self._objects.get(self._key(target.kind, target.namespace, target.name))
        if stored is None:
            raise ApiStatus(404, "NotFound", f'{target.kind.plural} "{target.name}" not found')
        return stored

    def _list(self, target: Target, params: Mapping[str, str], accept: str) -> dict[str, Any]:
        labels = _label_selector(params.get("labelSelector", ""))
        fields = _field_selector(params.get("fieldSelector", ""))
        metadata_only = "PartialObjectMetadataList" in accept
        items = []
        for obj in self._scan(target.kind, target.namespace):
            if labels((obj.get("metadata") or {}).get("labels") or {}) and fields(obj):
                items.append(_metadata_only(obj, "PartialObjectMetadata") if metadata_only else obj)
        return {
            "apiVersion": "meta.k8s.io/v1" if metadata_only else target.kind.api_version,
            "kind": "PartialObjectMetadataList" if metadata_only else f"{target.kind.kind}List",
            "metadata": {"resourceVersion": str(self._last)},
            "items": copy.deepcopy(items),
        }

    def _create(self, target: Target, body: Any) -> dict[str, Any]:
        obj = copy.deepcopy(dict(body or {}))
        kind = target.kind
        meta = obj.setdefault("metadata", {})
        if kind.namespaced:
            namespace = target.namespace or meta.get("namespace")
            if meta.get("namespace") not in (None, namespace):
                raise ApiStatus(400, "BadRequest", "the namespace of the object does not match")
            meta["namespace"] = namespace
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiStatus(422, "Invalid", "metadata.name: Required value")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        key = self._key(kind, meta.get("namespace"), meta["name"])
        if key in self._objects:
            raise ApiStatus(409, "AlreadyExists", f'{kind.plural} "{meta["name"]}" already exists')
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        if kind.status_subresource:
            obj.pop("status", None)
        _string_data(obj)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        for transient in ("resourceVersion", "deletionTimestamp", "generation"):
            meta.pop(transient, None)
        if self._has_generation(kind, obj):
            meta["generation"] = 1
        self._store(kind, key, obj, "ADDED")
        return obj

    def _update(self, target: Target, body: Any) -> dict[str, Any]:
        current = self._existing(target)
        new = copy.deepcopy(dict(body or {}))
        self._check_version(target, current, new)
        return self._replace(target, current, new)

    def _patch(
        self, target: Target, body: Any, content_type: str, params: Mapping[str, str]
    ) -> dict[str, Any]:
        patch = copy.deepcopy(body or {})
        if "apply-patch" in content_type:
            return self._apply(target, patch, params.get("fieldManager", ""))
        current = self._existing(target)
        self._check_version(target, current, patch)
        new = copy.deepcopy(current)
        if "strategic-merge-patch" in content_type:
            patch = _strategic_directives(new, patch)
        elif "json-patch" in content_type:
            raise ApiStatus(415, "UnsupportedMediaType", "JSON patch is not faked")
        return self._replace(target, current, _merge_patch(new, patch))

    def _apply(self, target: Target, applied: dict[str, Any], manager: str) -> dict[str, Any]:
        if not manager:
            raise ApiStatus(422, "Invalid", "fieldManager is required for apply")
        for required in ("apiVersion", "kind"):
            if not applied.get(required):
                raise ApiStatus(400, "BadRequest", f"{required} must be set for apply")
        kind = target.kind
        assert target.name is not None
        key = self._key(kind, target.namespace, target.name)
        part = "status" if target.subresource == "status" else "object"
        applied.setdefault("metadata", {}).update(name=target.name)
        if kind.namespaced:
            applied["metadata"]["namespace"] = target.namespace
        if key not in self._objects:
            if part == "status":
                raise ApiStatus(404, "NotFound", f'{kind.plural} "{target.name}" not found')
            created = self._create(Target(kind, target.namespace, None, None), applied)
            self._owned.setdefault(key, {})[(manager, part)] = _paths(_owned_part(applied, part))
            return created
        current = self._existing(target)
        self._check_version(target, current, applied)
        new = copy.deepcopy(current)
        owners = self._owned.setdefault(key, {})
        mine = _paths(_owned_part(applied, part))
        others = set().union(*(p for (m, s), p in owners.items() if (m, s) != (manager, part)))
        for gone in sorted(owners.get((manager, part), set()) - mine - others, reverse=True):
            _remove_path(new, gone)
        owners[(manager, part)] = mine
        return self._replace(target, current, _apply_merge(new, applied))

    def _delete(self, target: Target, options: Mapping[str, Any]) -> dict[str, Any]:
        current = self._existing(target)
        meta = current["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") not in (None, meta.get("uid")):
            raise ApiStatus(409, "Conflict", "Precondition failed: UID in precondition")
        if pre.get("resourceVersion") not in (None, meta.get("resourceVersion")):
            raise ApiStatus(409, "Conflict", "Precondition failed: ResourceVersion")
        key = self._key(target.kind, target.namespace, meta["name"])
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                new = copy.deepcopy(current)
                new["metadata"]["deletionTimestamp"] = _now()
                self._store(target.kind, key, new, "MODIFIED")
                return new
            return copy.deepcopy(current)
        self._remove(target.kind, key)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def _replace(
        self, target: Target, current: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        kind = target.kind
        meta = current["metadata"]
        if target.subresource == "status":
            kept = copy.deepcopy(current)
            kept["status"] = new.get("status") or {}
            new = kept
        elif kind.status_subresource:
            new["status"] = copy.deepcopy(current.get("status"))
            if new["status"] is None:
                new.pop("status")
        new_meta = new.setdefault("metadata", {})
        for fixed in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
            if fixed in meta:
                new_meta[fixed] = meta[fixed]
            else:
                new_meta.pop(fixed, None)
        new["apiVersion"], new["kind"] = kind.api_version, kind.kind
        _string_data(new)
        if current.get("immutable") and any(
            new.get(f) != current.get(f) for f in ("data", "binaryData", "stringData")
        ):
            raise ApiStatus(422, "Invalid", "field is immutable when `immutable` is set")
        if "generation" in meta:
            changed = _spec_of(new) != _spec_of(current)
            new_meta["generation"] = meta["generation"] + (1 if changed else 0)
        key = self._key(kind, meta.get("namespace"), meta["name"])
        if _same_except_version(new, current):
            return copy.deepcopy(current)  # a no-op write: the apiserver keeps the version
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            self._remove(kind, key)
            return new
        self._store(kind, key, new, "MODIFIED")
        return new

    def _check_version(
        self, target: Target, current: Mapping[str, Any], body: Mapping[str, Any]
    ) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
            raise ApiStatus(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {target.kind.plural} "{target.name}": '
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )

    def _pod_log(self, path: str, params: Mapping[str, str]) -> str:
        target = self._target(path.removesuffix("/log"))
        assert target.name is not None and target.namespace is not None
        self._existing(target)
        key = (target.namespace, target.name, params.get("container", ""))
        if key not in self.pod_logs:
            raise ApiStatus(400, "BadRequest", "container is waiting to start")
        return self.pod_logs[key]

    # --- the store ---

    def _store(
        self, kind: Kind, key: tuple[str, str, str, str], obj: dict[str, Any], type_: str
    ) -> None:
        self._last = next(self._revision)
        obj["metadata"]["resourceVersion"] = str(self._last)
        self._objects[key] = obj
        self._emit(kind, type_, obj)

    def _remove(self, kind: Kind, key: tuple[str, str, str, str]) -> None:
        gone = self._objects.pop(key)
        self._owned.pop(key, None)
        self._last = next(self._revision)
        gone = copy.deepcopy(gone)
        gone["metadata"]["resourceVersion"] = str(self._last)
        self._emit(kind, "DELETED", gone)
        self._collect_dependents(str(gone["metadata"]["uid"]))

    def _collect_dependents(self, owner_uid: str) -> None:
        """The garbage collector: a dependent whose owners are all gone goes too."""
        alive = {str(o["metadata"].get("uid")) for o in self._objects.values()}
        for key, obj in list(self._objects.items()):
            refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
            uids = {str(r.get("uid")) for r in refs}
            if owner_uid in uids and not uids & alive and key in self._objects:
                kind = next(k for k in self.kinds if (k.group, k.plural) == key[:2])
                self._delete(Target(kind, key[2] or None, key[3], None), {})

    def _emit(self, kind: Kind, type_: str, obj: dict[str, Any]) -> None:
        self._events.append(WatchEvent(self._last, kind, type_, copy.deepcopy(obj)))
        if self._tick is not None:
            self._tick.set()
            self._tick = None

    def _ticker(self) -> asyncio.Event:
        if self._tick is None:
            self._tick = asyncio.Event()
        return self._tick

    def _scan(self, kind: Kind, namespace: str | None) -> Iterator[dict[str, Any]]:
        for key, obj in sorted(self._objects.items()):
            if key[:2] == (kind.group, kind.plural) and (namespace is None or key[2] == namespace):
                yield obj

    @staticmethod
    def _in_scope(obj: Mapping[str, Any], namespace: str | None) -> bool:
        return namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace

    @staticmethod
    def _key(kind: Kind, namespace: str | None, name: str) -> tuple[str, str, str, str]:
        return (kind.group, kind.plural, namespace or "" if kind.namespaced else "", name)

    @staticmethod
    def _has_generation(kind: Kind, obj: Mapping[str, Any]) -> bool:
        return "." in kind.group or "spec" in obj

    def _kind_of(self, manifest: Mapping[str, Any]) -> Kind:
        api_version, name = manifest.get("apiVersion", ""), manifest.get("kind", "")
        for kind in self.kinds:
            if kind.api_version == api_version and kind.kind == name:
                return kind
        raise KeyError(f"{api_version} {name} is not served by the fake")

    def _by_kind(self, name: str) -> Kind:
        for kind in self.kinds:
            if name in (kind.kind, kind.plural):
                return kind
        raise KeyError(f"{name} is not served by the fake")

    @staticmethod
    def _collection_path(kind: Kind, namespace: str | None) -> str:
        prefix = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
        return (
            f"{prefix}/namespaces/{namespace}/{kind.plural}"
            if namespace
            else (f"{prefix}/{kind.plural}")
        )

    def _object_path(self, kind: Kind, namespace: str | None, name: str) -> str:
        return f"{self._collection_path(kind, namespace if kind.namespaced else None)}/{name}"


def fake_api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    """A new fake installed for this test (the body of a fixture)."""
    return FakeApi().install(monkeypatch)


# --- merging ---


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


def _strategic_directives(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply ``$deleteFromPrimitiveList/<field>`` directives to ``obj``; the rest of the patch."""
    rest: dict[str, Any] = {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            obj[name] = [v for v in obj.get(name) or [] if v not in value]
        elif isinstance(value, dict):
            inner = obj.setdefault(key, {}) if isinstance(obj.get(key, {}), dict) else {}
            rest[key] = _strategic_directives(inner, value)
        else:
            rest[key] = value
    return rest


#: Lists merged by a key under server-side apply (``x-kubernetes-list-type: map``).
MAP_LISTS = {"conditions": "type"}


def _owned_part(obj: Mapping[str, Any], part: str) -> dict[str, Any]:
    if part == "status":
        return {"status": obj.get("status") or {}}
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> set[tuple[Any, ...]]:
    """The leaf field paths of an applied object (a map-list item is keyed by its key)."""
    if isinstance(value, dict) and value:
        out: set[tuple[Any, ...]] = set()
        for key, inner in value.items():
            if key in ("name", "namespace") and prefix == ("metadata",):
                continue
            list_key = MAP_LISTS.get(key)
            if list_key and isinstance(inner, list):
                for item in inner:
                    out |= _paths(item, (*prefix, key, ("key", item.get(list_key))))
            else:
                out |= _paths(inner, (*prefix, key))
        return out
    return {prefix} if prefix else set()


def _remove_path(obj: Any, path: tuple[Any, ...]) -> None:
    """Remove the field at ``path`` (and the map-list item, for a map-list key)."""
    *parents, last = path
    node = obj
    for step in parents:
        node = _step(node, step)
        if node is None:
            return
    if isinstance(last, tuple) and isinstance(node, list):
        node[:] = [i for i in node if _key_of(i) != last[1]]
    elif isinstance(node, dict):
        node.pop(last, None)


def _step(node: Any, step: Any) -> Any:
    if isinstance(step, tuple) and isinstance(node, list):
        return next((i for i in node if _key_of(i) == step[1]), None)
    return node.get(step) if isinstance(node, dict) else None


def _key_of(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else None


def _apply_merge(target: Any, applied: Any, name: str = "") -> Any:
    """Server-side apply's merge: maps merge, map-lists merge by key, other lists replace."""
    list_key = MAP_LISTS.get(name)
    if list_key and isinstance(applied, list) and isinstance(target, list):
        out = list(target)
        for item in applied:
            found = [i for i, old in enumerate(out) if old.get(list_key) == item.get(list_key)]
            if found:
                out[found[0]] = _apply_merge(out[found[0]], item)
            else:
                out.append(copy.deepcopy(item))
        return out
    if isinstance(applied, dict) and isinstance(target, dict):
        out_map = dict(target)
        for key, value in applied.items():
            out_map[key] = _apply_merge(target.get(key), value, key)
        return out_map
    return copy.deepcopy(applied)


def _string_data(obj: dict[str, Any]) -> None:
    """A Secret's ``stringData`` is written into ``data``, base64-encoded, and not kept."""
    if obj.get("kind") == "Secret" and "stringData" in obj:
        data = obj.setdefault("data", {})
        for key, value in (obj.pop("stringData") or {}).items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _spec_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _same_except_version(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    def strip(o: Mapping[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(dict(o))
        out.get("metadata", {}).pop("resourceVersion", None)
        return out

    return strip(a) == strip(b)


def _metadata_only(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return {"apiVersion": "meta.k8s.io/v1", "kind": kind, "metadata": obj.get("metadata") or {}}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- selectors ---

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    out, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        out.append(current)
    return out


def _label_selector(selector: str) -> Callable[[Mapping[str, str]], bool]:
    tests: list[Callable[[Mapping[str, str]], bool]] = []
    for term in _split(selector):
        term = term.strip()
        if not term:
            continue
        if found := _SET.match(term):
            key, op, values = found.group(1), found.group(2), found.group(3)
            wanted = {v.strip() for v in values.split(",")}
            if op == "in":
                tests.append(lambda labels, k=key, w=wanted: labels.get(k) in w)
            else:
                tests.append(lambda labels, k=key, w=wanted: labels.get(k) not in w)
        elif "!=" in term:
            key, value = (p.strip() for p in term.split("!=", 1))
            tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = (p.strip() for p in term.split("==" if "==" in term else "=", 1))
            tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            absent = term[1:].strip()
            tests.append(lambda labels, k=absent: k not in labels)
        else:
            tests.append(lambda labels, k=term: k in labels)
    return lambda labels: all(test(labels) for test in tests)


def _field_selector(selector: str) -> Callable[[Mapping[str, Any]], bool]:
    tests: list[Callable[[Mapping[str, Any]], bool]] = []
    for term in _split(selector):
        negate = "!=" in term
        path, value = (p.strip() for p in term.split("!=" if negate else "=", 1))
        value = value.lstrip("=")

        def test(obj: Mapping[str, Any], p: str = path, v: str = value, n: bool = negate) -> bool:
            node: Any = obj
            for step in p.split("."):
                node = node.get(step) if isinstance(node, Mapping) else None
            return (
                (str(node) if node is not None else "") != v
                if n
                else ((str(node) if node is not None else "") == v)
            )

        tests.append(test)
    return lambda obj: all(test(obj) for test in tests)
