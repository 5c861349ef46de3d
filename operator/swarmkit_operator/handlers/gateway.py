"""kopf wiring of the gateways controller (:mod:`swarmkit_operator.gateways`).

Thin on purpose: the start-up handler builds the controller over the shared indexes; every
watch event only kicks: any change of a Skill, Agent, Topology, Workspace or Secret the
gateways of its namespace (one may have a new version or its token), and a
gateway Deployment's event (its rollout) the Agent it belongs to.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from ..builders.gateway import GATEWAY_LABEL
from ..gateways import GatewayController
from ..indexes import PRESENT
from ..runs import Indexes
from ..runs.model import AGENTS, SKILLS, TOPOLOGIES, WORKSPACES
from ..runtime import manager_of
from .common import controller_of
from .events import on_event

_controller: GatewayController | None = None


def controller() -> GatewayController | None:
    """The running gateways controller (None before start-up)."""
    return _controller


@kopf.on.startup()
async def gateways_startup(
    memo: Any,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    **_: Any,
) -> None:
    global _controller
    shared = controller_of(memo)
    if shared is None:
        raise RuntimeError("the shared start-up (handlers/common.py) must run first")
    view = shared.indexes.view
    indexes = Indexes(
        runs=view("runs_by_uid"),
        jobs=view("runs_jobs_by_run"),
        pods=view("runs_pods_by_run"),
        topologies=view("runs_topologies"),
        agents=view("runs_agents"),
        skills=view("runs_skills"),
        workspaces=view("runs_workspaces"),
    )
    _controller = GatewayController(
        shared.config, indexes, view("agent_views"), view("secret_keys")
    )
    manager = manager_of(memo)
    if manager is not None:
        manager.gateways = _controller  # ``ready`` is set once this replica leads
    for namespace, name in shared.indexes.keys("agent_views"):
        view = shared.lookup("agent_views", (namespace, name))
        if view is not None:
            _controller.agent_changed(namespace, name, view["spec"])
    logger.info("gateways controller started")


@on_event(*AGENTS)
async def gateways_on_agent_event(
    namespace: str | None, name: str | None, spec: Mapping[str, Any], **_: Any
) -> None:
    ctl = _controller
    if ctl is not None and namespace and name:
        ctl.agent_changed(namespace, name, spec or {})


@on_event("v1", "secrets")
async def gateways_on_secret_event(namespace: str | None, **_: Any) -> None:
    ctl = _controller
    if ctl is not None and namespace:
        ctl.kick_namespace(namespace)


@on_event(*TOPOLOGIES)
@on_event(*SKILLS)
@on_event(*WORKSPACES)
async def gateways_on_dependency_event(namespace: str | None, **_: Any) -> None:
    ctl = _controller
    if ctl is not None and namespace:
        ctl.kick_namespace(namespace)


@on_event("apps", "v1", "deployments", labels={GATEWAY_LABEL: PRESENT})
async def gateways_on_deployment_event(
    namespace: str | None, labels: Mapping[str, str], **_: Any
) -> None:
    ctl = _controller
    agent = labels.get(GATEWAY_LABEL)
    if ctl is not None and namespace and agent:
        ctl.kick(namespace, agent)


__all__ = ["controller"]
