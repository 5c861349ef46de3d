"""Workspace: render ``ws-<name>-<hash8>`` (flow data pinned by content).

Secrets are never read (issue 41): the render lists the references, the kubelet resolves
them into a pod's env, and a missing one comes back from the pod's status
(``builders/run_pod.secret_not_found``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from swarmkit_api.conditions import READY
from swarmkit_api.resources import WORKSPACE

from ..builders import ObjectRef
from ..builders.trust import foreign_config_map
from ..builders.workspace import referenced_config_maps, render_workspace
from ..indexes import IndexId, index
from ..reconcile.controller import Controller, Kind, Observation
from ..reconcile.status import StatusOf
from ..reconcile.views import MISSING, base_view
from .skill import read_sources


@index("workspaces", id=IndexId.WORKSPACE_VIEWS)
def workspace_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    view = base_view(body)
    view.update(spec=dict(body.get("spec") or {}))
    return {(namespace, name): view}


@index("workspaces", id=IndexId.WORKSPACE_BY_CONFIG_MAP)
def workspace_by_config_map(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, ConfigMap) → workspaces taking flow data from it."""
    return {(namespace, c): name for c in referenced_config_maps(body.get("spec") or {})}


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
    ctl: Controller, namespace: str, _name: str, seen: Observation, _body: Mapping[str, Any]
) -> None:
    """Its old render's collection (the Agents and Topologies using it declare their own
    :class:`~..reconcile.controller.Watch` of it)."""
    if seen.changed:
        ctl.enqueue_gc(namespace)


async def reconcile_workspace(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    view = ctl.lookup(IndexId.WORKSPACE_VIEWS, (namespace, name))
    if view is None:
        return "gone"
    spec = view["spec"]
    sources = await read_sources(namespace, referenced_config_maps(spec))
    owner = ObjectRef("Workspace", name, namespace, view["uid"])
    render = render_workspace(owner, spec, sources)
    created = False
    if render.config_map is not None:
        created = await ctl.ensure_config_map(render.config_map)
        # Adopted only if it is the render: built-in edit creates ConfigMaps (as for Skills).
        key = ("Workspace", namespace, name)
        foreign = None if created else await ctl.foreign_render(render.config_map, key)
        if foreign is not None:
            render = foreign_config_map(render, "Workspace", name, foreign)
    written = await ctl.write_status(
        StatusOf.of_view("Workspace", namespace, name, view),
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
    indexes=(workspace_views, workspace_by_config_map),
    dependents_view=dependents_view,
    dependents=dependents,
)
