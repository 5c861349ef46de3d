"""Proving many renders the operator's with one LIST instead of a GET each.

A render's ConfigMap found under its content-addressed name (one this process did not
create) is the render only if its content is (``Controller.foreign_render``; a namespace
editor could have made it first). The proof is kept per uid in memory: immutable, that uid
cannot change content. A new process has none, and its start-up checks every object in the
background, each render with a GET of its whole ConfigMap: 24,000 GETs after a restart at
20,000 Skills, ~50 s of the process's CPU. So the first time a namespace with many renders
needs one proved, this process LISTs the namespace's renders once (paged, the content
hashed page by page, kept as (uid, digest) by name) and proves each from that record while
its uid is the one the index shows; a render not in the record (made since), or not
matching it, is read with a GET as before, which also says what differs. One LIST per
namespace per process: afterwards a single render is read with a GET.
"""

from __future__ import annotations

import asyncio

from .. import k8s
from ..builders import content_digest
from ..indexes import Indexes, IndexId
from .book import Renders

#: Renders in a namespace from which one LIST proves them instead of a GET each.
LIST_FROM = 100
#: How long a LIST's unused records are kept (what no check asked for is dropped).
KEPT_SECONDS = 600.0


async def listed_proof(
    renders: Renders, indexes: Indexes, namespace: str, name: str
) -> tuple[str, str] | None:
    """(uid, content digest) of the immutable ConfigMap ``name`` as this process's one LIST
    of ``namespace``'s renders found it; None when there is no such record (not many
    renders there, listed already and not in it, or the LIST failed)."""
    listed = renders.listed.get(namespace)
    if listed is None:
        if len(indexes.values(IndexId.RENDERED_CONFIG_MAPS, namespace)) < LIST_FROM:
            return None
        listed = asyncio.ensure_future(_digests(namespace, _selector(indexes)))
        listed.add_done_callback(_forget_later)
        renders.listed[namespace] = listed
    try:
        found = await asyncio.shield(listed)
    except (k8s.ApiError, OSError):
        return None
    return found.pop(name, None)


def _forget_later(listed: asyncio.Task[dict[str, tuple[str, str]]]) -> None:
    """Drop the records no check asked for within :data:`KEPT_SECONDS` of the LIST (a GET
    proves one if ever needed); the namespace stays listed (no second LIST)."""
    if not listed.cancelled() and listed.exception() is None:
        asyncio.get_running_loop().call_later(KEPT_SECONDS, listed.result().clear)


def _selector(indexes: Indexes) -> str:
    """The label selector of the renders the names index holds (one declaration)."""
    return next(
        spec.selector
        for specs in indexes.specs.values()
        for spec in specs
        if spec.id == IndexId.RENDERED_CONFIG_MAP_NAMES
    )


async def _digests(namespace: str, selector: str) -> dict[str, tuple[str, str]]:
    """name → (uid, content digest) of every immutable rendered ConfigMap of ``namespace``."""
    out: dict[str, tuple[str, str]] = {}
    query = [("limit", "500"), ("labelSelector", selector)]
    async for page in k8s.list_pages(k8s.core_path("configmaps", namespace), query):
        for cm in page.get("items") or ():
            meta = cm.get("metadata") or {}
            if cm.get("immutable") is True and meta.get("name") and meta.get("uid"):
                digest = content_digest(cm.get("data") or {}, cm.get("binaryData") or {})
                out[str(meta["name"])] = (str(meta["uid"]), digest)
    return out
