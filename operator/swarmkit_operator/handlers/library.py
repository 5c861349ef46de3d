"""kopf wiring of the skill library and the read-only web view.

Thin: indexes keep the Skill fields and the MailboxMessages the pages show; the
composition root (:mod:`.root`) loads the library's ConfigMaps, sees every indexed object
once, and, with ``--web-view HOST:PORT`` (``$SWARMKIT_WEB_VIEW``), serves the web view; the
manager starts the batched flush in the leader; the watch functions here pass each Skill,
Agent and Run event on.
What happens then is in :mod:`swarmkit_operator.library` and :mod:`swarmkit_operator.webview`.
"""

from __future__ import annotations

from typing import Any

import kopf

from swarmkit_api import GROUP, VERSION

from ..indexes import index
from ..webview.mailboxes import MAILBOX_ITEMS, item_summary
from ..webview.pages import SKILL_SPECS
from .common import App
from .events import on_event

#: Longest instructions body kept in memory for the skill page.
MAX_INSTRUCTIONS = 64 * 1024


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


@index("mailboxmessages", id=MAILBOX_ITEMS, group=GROUP, version=VERSION)
def library_mailbox_items(body: kopf.Body, namespace: str | None, **_: Any) -> dict[Any, Any]:
    """(namespace, mailbox) → what the mailboxes page shows of one item (message capped)."""
    item = item_summary(body)
    return {(namespace, item["mailbox"]): item}


@on_event(GROUP, VERSION, "skills")
async def library_skill_event(
    type: str | None, body: kopf.Body, namespace: str | None, name: str, app: App, **_: Any
) -> None:
    lib = app.library
    if namespace is None:
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
    app: App,
    **_: Any,
) -> None:
    lib, ctl = app.library, app.controller
    if namespace is None:
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
    type: str | None,
    body: kopf.Body,
    namespace: str | None,
    uid: str | None,
    app: App,
    **_: Any,
) -> None:
    lib = app.library
    if namespace is None or not uid or type == "DELETED":
        return
    lib.run_seen(namespace, uid, body.get("status") or {})
