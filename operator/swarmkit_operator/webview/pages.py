"""What each page shows, assembled from the operator's in-memory indexes and skill library.

Nothing here calls the API: the indexes (filled by one LIST at start-up, then kept current
by watch events) already hold each object's spec and status, and the skill library holds
usage and version history. Each function returns plain dicts for the templates; the
templates escape every string (Jinja2 autoescape), so user text is shown, never run.

A list page builds each object's row on its own (:func:`rows`): an object whose view has a
shape the page does not expect (an older operator's status, a value cut when decoded) is
left out, logged, and counted on the page, and every other object of every namespace is
still shown (issue 47 item 1: a fault stays with its object).

A list page takes the namespaces its reader may see (``shown``; None: every one, the
single-user view); :mod:`.server` asks :mod:`.access` which those are, per person.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from swarmkit_api.audit_chain import status_heads
from swarmkit_api.conditions import READY, SUCCEEDED

from ..indexes import Indexes, IndexId
from ..library import SkillLibrary
from ..library.records import SkillRecord

#: The index of the Skill fields the pages show (registered by ``handlers.library``).
SKILL_SPECS = IndexId.LIBRARY_SKILL_SPECS

log = logging.getLogger("swarmkit_operator.webview")
T = TypeVar("T")


def rows(
    what: str, items: Iterable[T], build: Callable[[T], dict[str, Any]], name: Callable[[T], str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """``build`` each item's row; an item that fails is logged and named in the second list
    (shown as "could not be shown") instead of failing the whole page."""
    built: list[dict[str, Any]] = []
    failed: list[str] = []
    for item in items:
        try:
            built.append(build(item))
        except Exception as exc:  # the object's fault, not the page's
            failed.append(name(item))
            log.warning(
                "web view: %s %s not shown (%s: %s)", what, name(item), type(exc).__name__, exc
            )
    return built, failed


@dataclass(frozen=True)
class Sources:
    """Where the pages read from."""

    indexes: Indexes
    library: SkillLibrary | None = None

    def one(self, index: IndexId, key: Any) -> Any:
        if index not in self.indexes.data:
            return None
        values = self.indexes.values(index, key)
        return values[0] if values else None

    def keys(self, index: IndexId) -> list[Any]:
        return self.indexes.keys(index) if index in self.indexes.data else []

    def record(self, namespace: str, skill: str) -> SkillRecord | None:
        return self.library.record(namespace, skill) if self.library is not None else None


def condition(status: Mapping[str, Any], type_: str) -> dict[str, Any]:
    for cond in status.get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return {"type": type_, "status": "Unknown", "reason": "", "message": ""}


def _rate(usage: Mapping[str, Any]) -> str:
    rate = usage.get("loadRate")
    return "-" if rate is None else f"{float(rate) * 100:.0f}%"


Shown = frozenset[str] | None


def _in(shown: Shown, namespace: Any) -> bool:
    return shown is None or namespace in shown


def skill_namespaces(src: Sources) -> set[str]:
    """Namespaces holding a Skill or a deleted one's history."""
    found = {ns for ns, _ in src.keys(IndexId.SKILL_VIEWS)}
    return found | set(src.library.libraries if src.library is not None else ())


def skills_list(src: Sources, shown: Shown = None) -> dict[str, Any]:
    """Every Skill: category, description, load rate, grants; and deleted ones with history."""
    present = {
        key
        for key in sorted(src.keys(IndexId.SKILL_VIEWS))
        if _in(shown, key[0]) and src.one(IndexId.SKILL_VIEWS, key) is not None
    }
    built, failed = rows("Skill", sorted(present), lambda k: _skill_row(src, *k), "/".join)
    deleted = []
    if src.library is not None:
        for ns, lib in sorted(src.library.libraries.items()):
            if not _in(shown, ns):
                continue
            for name, record in sorted(lib.skills.items()):
                if record.deleted_at and (ns, name) not in present:
                    deleted.append({"namespace": ns, "name": name, "deleted_at": record.deleted_at})
    return {"skills": built, "deleted": deleted, "unreadable": failed}


def _skill_row(src: Sources, ns: str, name: str) -> dict[str, Any]:
    view = src.one(IndexId.SKILL_VIEWS, (ns, name))
    spec = src.one(SKILL_SPECS, (ns, name)) or {}
    status = view["status"]
    usage = status.get("usage") or {}
    return {
        "namespace": ns,
        "name": name,
        "display_name": spec.get("displayName") or "",
        "category": spec.get("category") or "",
        "description": spec.get("description") or "",
        "ready": condition(status, READY),
        "version": status.get("version") or "",
        "grants": (status.get("grantedBy") or {}).get("count", 0),
        "runs_granted": usage.get("runsGranted", 0),
        "runs_loaded": usage.get("runsLoaded", 0),
        "load_rate": _rate(usage),
    }


def _history(record: SkillRecord | None, current: str | None) -> list[dict[str, Any]]:
    if record is None:
        return []
    return [
        {
            "content_hash": v.content_hash,
            "version": v.content_hash[:12],
            "first_seen": v.first_seen,
            "agents": v.agents,
            "current": v.content_hash == current,
        }
        for v in record.history
    ]


def skill_detail(src: Sources, ns: str, name: str) -> dict[str, Any] | None:
    """One Skill (or what the library remembers of a deleted one)."""
    view = src.one(IndexId.SKILL_VIEWS, (ns, name))
    record = src.record(ns, name)
    if view is None and record is None:
        return None
    spec = src.one(SKILL_SPECS, (ns, name)) or {}
    status = view["status"] if view is not None else {}
    granting = (
        sorted(src.library.granting_agents(ns, name))
        if src.library is not None
        else sorted(set(src.indexes.values(IndexId.AGENT_BY_GRANT, (ns, name))))
    )
    usage = status.get("usage") or {}
    return {
        "namespace": ns,
        "name": name,
        "exists": view is not None,
        "deleted_at": record.deleted_at if record is not None else None,
        "spec": spec,
        "ready": condition(status, READY),
        "conditions": status.get("conditions") or [],
        "content_hash": status.get("contentHash") or "",
        "version": status.get("version") or "",
        "config_map": status.get("renderedConfigMap") or "",
        "scripts": status.get("scripts") or [],
        "usage": usage,
        "load_rate": _rate(usage),
        "granted_by": granting,
        "history": _history(record, status.get("contentHash")),
    }


def agent_detail(src: Sources, ns: str, name: str) -> dict[str, Any] | None:
    view = src.one(IndexId.AGENT_VIEWS, (ns, name))
    if view is None:
        return None
    spec = view["spec"]
    status = view["status"]
    resolved = [
        {
            "name": r.get("name", ""),
            "version": str(r.get("contentHash", ""))[:12],
            "exists": src.one(IndexId.SKILL_VIEWS, (ns, r.get("name", ""))) is not None,
        }
        for r in status.get("resolvedSkills") or ()
    ]
    return {
        "namespace": ns,
        "name": name,
        "description": spec.get("description") or "",
        "model": spec.get("model") or {},
        "workspace": view.get("workspace") or "",
        "grants": [g for g in spec.get("skills") or () if isinstance(g, str)],
        "version": status.get("version") or "",
        "ready": condition(status, READY),
        "conditions": status.get("conditions") or [],
        "resolved": resolved,
        "missing": list(status.get("missingSkills") or ()),
    }


def _target(spec: Mapping[str, Any]) -> tuple[str, str]:
    if spec.get("topologyRef"):
        return "Topology", str(spec["topologyRef"].get("name", ""))
    if spec.get("agentRef"):
        return "Agent", str(spec["agentRef"].get("name", ""))
    return "", ""


def _runs(src: Sources) -> list[dict[str, Any]]:
    out = []
    for uid in src.keys(IndexId.RUNS_BY_UID):
        run = src.one(IndexId.RUNS_BY_UID, uid)
        if run is not None:
            out.append(run)
    return out


def run_namespaces(src: Sources) -> set[str]:
    return {str(r.get("namespace")) for r in _runs(src)}


def runs_list(src: Sources, shown: Shown = None) -> dict[str, Any]:
    visible = [r for r in _runs(src) if _in(shown, r.get("namespace"))]
    built, failed = rows(
        "Run", visible, _run_row, lambda r: f"{r.get('namespace')}/{r.get('name')}"
    )
    built.sort(key=lambda r: (str(r["created"]), str(r["name"])), reverse=True)
    return {"runs": built, "unreadable": failed}


def _run_row(run: Mapping[str, Any]) -> dict[str, Any]:
    status = run.get("status") or {}
    kind, target = _target(run.get("spec") or {})
    loaded = sorted({s for a in status.get("skills") or () for s in a.get("loaded") or ()})
    return {
        "namespace": run.get("namespace"),
        "name": run.get("name"),
        "created": run.get("creationTimestamp") or "",
        "target_kind": kind,
        "target": target,
        "succeeded": condition(status, SUCCEEDED),
        "completion": status.get("completionTime") or "",
        "skills_loaded": loaded,
    }


def run_detail(src: Sources, ns: str, name: str) -> dict[str, Any] | None:
    run = next((r for r in _runs(src) if r.get("namespace") == ns and r.get("name") == name), None)
    if run is None:
        return None
    spec = run.get("spec") or {}
    status = run.get("status") or {}
    kind, target = _target(spec)
    pinned = status.get("pinned") or {}
    return {
        "namespace": ns,
        "name": name,
        "target_kind": kind,
        "target": target,
        "input": spec.get("input") or "",
        "succeeded": condition(status, SUCCEEDED),
        "conditions": status.get("conditions") or [],
        "start": status.get("startTime") or "",
        "completion": status.get("completionTime") or "",
        "job": status.get("jobName") or "",
        "audit": status_heads(status.get("audit")),  # each pod's audit chain head
        "pinned_topology": pinned.get("topology") or "",
        "pinned_agents": sorted((pinned.get("agents") or {}).items()),
        "pinned_skills": sorted((pinned.get("skills") or {}).items()),
        "steps": status.get("steps", 0),
        "tool_calls": status.get("toolCalls", 0),
        "tokens": status.get("usage") or {},
        "skills": status.get("skills") or [],
        "output": status.get("output") or "",
        "output_truncated": bool(status.get("outputTruncated")),
        # schedule / agent_message / mailbox_send, as the operator materialized them
        "effects": status.get("effects") or [],
    }
