"""Workspace: check Secret references, render ``ws-<name>-<hash8>``; Secrets fan out here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from swarmkit_api.conditions import READY
from swarmkit_api.resources import WORKSPACE

from ..builders import ObjectRef
from ..builders.trust import foreign_config_map
from ..builders.workspace import referenced_config_maps, referenced_secrets, render_workspace
from ..indexes import index
from ..reconcile.controller import Controller, Kind, Observation
from ..reconcile.views import MISSING, base_view
from .common import App
from .events import on_event
from .skill import read_sources


@index("workspaces", id="workspace_views")
def workspace_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    view = base_view(body)
    view.update(spec=dict(body.get("spec") or {}))
    return {(namespace, name): view}


@index("workspaces", id="workspace_by_secret")
def workspace_by_secret(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, Secret) → workspaces referencing one of its keys."""
    return {(namespace, s): name for s in referenced_secrets(body.get("spec") or {})}


@index("workspaces", id="workspace_by_config_map")
def workspace_by_config_map(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, ConfigMap) → workspaces taking flow data from it."""
    return {(namespace, c): name for c in referenced_config_maps(body.get("spec") or {})}


@index("secrets", id="secret_keys")
def secret_keys(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, Secret) → the names of its keys. Values are never kept."""
    keys = set((body.get("data") or {}).keys()) | set((body.get("stringData") or {}).keys())
    return {(namespace, name): frozenset(keys)}


def dependents_view(view: dict[str, Any] | None) -> Any:
    if view is None:
        return MISSING
    message = ""
    for cond in view["status"].get("conditions") or ():
        if cond.get("type") == READY:
            message = cond.get("message", "")
    return (
        view["status"].get("version"),
        view["status"].get("renderedConfigMap"),
        view["ready"],
        view["reason"],
        message,
        view["observed"] == view["generation"],
    )


def dependents(
    ctl: Controller, namespace: str, name: str, seen: Observation, _body: Mapping[str, Any]
) -> None:
    """The Agents and Topologies using the Workspace, and its old render's collection."""
    if seen.changed:
        ctl.enqueue_many(
            "Agent", namespace, ctl.lookup_all("agent_by_workspace", (namespace, name))
        )
        ctl.enqueue_many(
            "Topology", namespace, ctl.lookup_all("topology_by_workspace", (namespace, name))
        )
        ctl.enqueue_gc(namespace)


@on_event("v1", "secrets")
async def secret_event(
    type: str | None,
    body: kopf.Body,
    namespace: str | None,
    name: str,
    uid: str,
    app: App,
    **_: Any,
) -> None:
    """A Secret appeared, changed keys or went: re-check exactly the workspaces using it."""
    ctl = app.controller
    if namespace is None:
        return
    if type == "DELETED":
        ctl.indexes.delete("secrets", uid)
    else:
        ctl.indexes.update("secrets", body)
    key = ("Secret", namespace, name)
    keys = MISSING if type == "DELETED" else ctl.lookup("secret_keys", (namespace, name))
    if ctl.changed(key, keys):
        ctl.enqueue_many(
            "Workspace", namespace, ctl.lookup_all("workspace_by_secret", (namespace, name))
        )


async def reconcile_workspace(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    view = ctl.lookup("workspace_views", (namespace, name))
    if view is None:
        return "gone"
    spec = view["spec"]
    secrets = {
        s: ctl.lookup("secret_keys", (namespace, s)) for s in sorted(referenced_secrets(spec))
    }
    sources = await read_sources(namespace, referenced_config_maps(spec))
    owner = ObjectRef("Workspace", name, namespace, view["uid"])
    render = render_workspace(owner, spec, secrets, sources)
    created = False
    if render.config_map is not None:
        created = await ctl.ensure_config_map(render.config_map)
        # Adopted only if it is the render: built-in edit creates ConfigMaps (as for Skills).
        key = ("Workspace", namespace, name)
        foreign = None if created else await ctl.foreign_render(render.config_map, key)
        if foreign is not None:
            render = foreign_config_map(render, "Workspace", name, foreign)
    written = await ctl.write_status(
        "Workspace",
        namespace,
        name,
        view["uid"],
        int(view["generation"]),
        view["status"],
        render.status_fields(),
        render.verdicts,
    )
    if render.config_map_name != view["status"].get("renderedConfigMap"):
        ctl.enqueue_gc(namespace)
    return "changed" if written or created else "unchanged"


KIND = Kind(
    "Workspace",
    priority=0,  # the first input: Agents and Topologies read it
    reconcile=reconcile_workspace,
    api=WORKSPACE,
    indexes=(workspace_views, workspace_by_secret, workspace_by_config_map),
    dependents_view=dependents_view,
    dependents=dependents,
)
