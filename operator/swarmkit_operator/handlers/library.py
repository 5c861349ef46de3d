"""kopf wiring of the skill library and the read-only web view.

Thin: an index keeps the Skill fields the pages show; the start-up handler (after the
shared one and the Runs one, which it builds on) loads the library's ConfigMaps, sees every
indexed object once, starts the batched flush and, with ``--web-view HOST:PORT``
(``$SWARMKIT_WEB_VIEW``), the web view; the watch handlers pass each Skill, Agent and Run
event on. What happens then is in :mod:`swarmkit_operator.library` and
:mod:`swarmkit_operator.webview`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION

from ..indexes import index
from ..library import SkillLibrary
from ..reconcile.controller import controller_of
from ..runtime import manager_of
from ..webview import Sources, WebView, parse_address
from ..webview.pages import SKILL_SPECS
from .events import on_event

log = logging.getLogger("swarmkit_operator.library")

WEB_VIEW_ENV = "SWARMKIT_WEB_VIEW"
FLUSH_ENV = "SWARMKIT_LIBRARY_FLUSH_SECONDS"
#: Longest instructions body kept in memory for the skill page.
MAX_INSTRUCTIONS = 64 * 1024

_library: SkillLibrary | None = None
_web_view: WebView | None = None


def library() -> SkillLibrary | None:
    """The running skill library (None before start-up)."""
    return _library


def web_view() -> WebView | None:
    return _web_view


@index("skills", id=SKILL_SPECS)
def library_skill_specs(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, name) → what the skill pages show of the spec (files without content)."""
    spec = body.get("spec") or {}
    impl = spec.get("implementation") or {}
    provenance = spec.get("provenance") or {}
    instructions = str(spec.get("instructions") or "")
    files = []
    for f in spec.get("files") or ():
        path = str(f.get("path", ""))
        content = f.get("content")
        files.append(
            {
                "path": path,
                "size": len(content.encode()) if isinstance(content, str) else None,
                "script": path.startswith("scripts/") or bool(f.get("executable")),
            }
        )
    return {
        (namespace, name): {
            "displayName": spec.get("displayName") or "",
            "description": str(spec.get("description") or ""),
            "category": str(spec.get("category") or ""),
            "implementation": str(impl.get("type") or "") if isinstance(impl, dict) else "",
            "authoredBy": str(provenance.get("authoredBy") or ""),
            "provenanceVersion": str(provenance.get("version") or ""),
            "instructions": instructions[:MAX_INSTRUCTIONS],
            "instructionsTruncated": len(instructions) > MAX_INSTRUCTIONS,
            "files": files,
        }
    }


@kopf.on.startup()
async def library_startup(memo: kopf.Memo, **_: Any) -> None:
    global _library, _web_view
    ctl = controller_of(memo)
    if ctl is None:
        raise RuntimeError("the shared start-up (handlers/common.py) must run first")

    def pending(namespace: str, name: str) -> bool:
        key = ("Skill", namespace, name)
        return ctl.pending(key, ctl.lookup("skill_views", (namespace, name)))

    lib = SkillLibrary(
        ctl.config,
        ctl.indexes,
        ctl.namespaces,
        flush_seconds=float(os.environ.get(FLUSH_ENV, "2.0")),
        pending=pending,
    )
    await lib.load()
    lib.seed()
    _library = lib
    manager = manager_of(memo)
    if manager is not None:
        manager.library = lib  # its flush starts once this replica leads
    address = os.environ.get(WEB_VIEW_ENV, "")
    if address:
        host, port = parse_address(address)
        view = WebView(Sources(ctl.indexes, lib))
        await view.start(host, port)
        _web_view = view


@kopf.on.cleanup()
async def library_cleanup(**_: Any) -> None:
    global _library, _web_view
    if _web_view is not None:
        await _web_view.stop()
        _web_view = None
    if _library is not None:
        await _library.stop()
        _library = None


@on_event(GROUP, VERSION, "skills")
async def library_skill_event(
    type: str | None, body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> None:
    lib = _library
    if lib is None or namespace is None:
        return
    if type == "DELETED":
        lib.skill_deleted(namespace, name)
    else:
        lib.skill_seen(namespace, name, (body.get("status") or {}).get("contentHash"))


@on_event(GROUP, VERSION, "agents")
async def library_agent_event(
    type: str | None,
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    lib = _library
    ctl = controller_of(memo)
    if lib is None or ctl is None or namespace is None:
        return
    if type == "DELETED":
        regranted = lib.agent_deleted(namespace, name)
    else:
        regranted = lib.agent_seen(
            namespace, name, body.get("spec") or {}, body.get("status") or {}
        )
    # Their status.grantedBy changes (written through the reconcile queue, so the Agents
    # reading those Skills wait for it like for any other Skill status write).
    ctl.enqueue_many("SkillGrants", namespace, regranted)


@on_event(GROUP, VERSION, "runs")
async def library_run_event(
    type: str | None, body: kopf.Body, namespace: str | None, uid: str | None, **_: Any
) -> None:
    lib = _library
    if lib is None or namespace is None or not uid or type == "DELETED":
        return
    lib.run_seen(namespace, uid, body.get("status") or {})
