"""Small factories for the skill library and web view tests: objects as the API shows them,
indexed by the operator's real index functions."""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx

import swarmkit_operator.handlers  # noqa: F401  (registers every index function)
from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.indexes import Indexes


def indexes() -> Indexes:
    return wiring().indexes()


@contextlib.asynccontextmanager
async def served(view: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``view`` (a :class:`~swarmkit_operator.webview.WebView`) started on a
    free loopback port, stopped afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    await view.start("127.0.0.1", port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            yield c
    finally:
        await view.stop()


def _meta(name: str, namespace: str, uid: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "uid": uid or str(uuid.uuid4()),
        "generation": 1,
        "resourceVersion": "1",
        "creationTimestamp": "2026-12-03T08:00:00Z",
    }


def skill(
    name: str,
    namespace: str = "ns",
    *,
    content_hash: str = "a" * 64,
    description: str = "Use when testing.",
    category: str = "capability",
    instructions: str = "",
    files: list[dict[str, Any]] | None = None,
    scripts: list[dict[str, Any]] | None = None,
    composes: list[str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "description": description,
        "category": category,
        "instructions": instructions,
        "files": files or [],
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
    }
    if composes:
        spec["implementation"] = {"type": "composed", "composes": composes}
    return {
        "metadata": _meta(name, namespace),
        "spec": spec,
        "status": {
            "observedGeneration": 1,
            "contentHash": content_hash,
            "version": content_hash[:12],
            "scripts": scripts or [],
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}],
            **(status or {}),
        },
    }


def agent(
    name: str,
    skills: list[str],
    namespace: str = "ns",
    *,
    resolved: dict[str, str] | None = None,
    missing: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": _meta(name, namespace),
        "spec": {"model": {"provider": "replay"}, "skills": skills, "description": "An agent."},
        "status": {
            "observedGeneration": 1,
            "version": "v" + name,
            "resolvedSkills": [
                {"name": s, "contentHash": h, "renderedConfigMap": f"skill-{s}"}
                for s, h in (resolved or {}).items()
            ],
            "missingSkills": missing or [],
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}],
        },
    }


def run(
    name: str,
    namespace: str = "ns",
    *,
    uid: str | None = None,
    outcome: str = "True",
    granted: list[str] = (),  # type: ignore[assignment]
    usage: list[dict[str, Any]] | None = None,
    completed: str = "2026-12-03T08:10:00Z",
    output: str = "done",
) -> dict[str, Any]:
    return {
        "metadata": _meta(name, namespace, uid),
        "spec": {"topologyRef": {"name": "pipeline"}, "input": "go"},
        "status": {
            "conditions": [
                {"type": "Succeeded", "status": outcome, "reason": "Succeeded", "message": "ok"}
            ],
            "completionTime": completed,
            "pinned": {
                "topology": "t1",
                "agents": {"lead": "v1"},
                "skills": dict.fromkeys(granted, "h"),
            },
            "skills": usage or [],
            "output": output,
        },
    }


def usage(
    agent: str, loaded: list[str], scripts: list[tuple[str, str, int, int]] = ()
) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "agent": agent,
        "loaded": loaded,
        "loads": len(loaded),
        "filesRead": [],
        "fileReads": 0,
        "scripts": [{"skill": s, "path": p, "runs": r, "failures": f} for s, p, r, f in scripts],
        "scriptRuns": sum(r for *_, r, _f in scripts),
        "scriptFailures": sum(f for *_, f in scripts),
    }
