"""kopf wiring of the gateways controller (:mod:`swarmkit_operator.gateways`).

Thin on purpose: the composition root (:mod:`.root`) builds the controller over the shared
indexes; every
watch event only kicks: any change of a Skill, Agent, Topology or Workspace the
gateways of its namespace (one may have a new version), and a
gateway Deployment's event (its rollout) the Agent it belongs to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..builders.gateway import GATEWAY_LABEL
from ..indexes import PRESENT
from ..runs.model import AGENTS, SKILLS, TOPOLOGIES, WORKSPACES
from .common import App
from .events import on_event


@on_event(*AGENTS)
async def gateways_on_agent_event(
    namespace: str | None, name: str | None, spec: Mapping[str, Any], app: App, **_: Any
) -> None:
    ctl = app.gateways
    if namespace and name:
        ctl.agent_changed(namespace, name, spec or {})


@on_event(*TOPOLOGIES)
@on_event(*SKILLS)
@on_event(*WORKSPACES)
async def gateways_on_dependency_event(namespace: str | None, app: App, **_: Any) -> None:
    ctl = app.gateways
    if namespace:
        ctl.kick_namespace(namespace)


@on_event("apps", "v1", "deployments", labels={GATEWAY_LABEL: PRESENT})
async def gateways_on_deployment_event(
    namespace: str | None, labels: Mapping[str, str], app: App, **_: Any
) -> None:
    ctl = app.gateways
    agent = labels.get(GATEWAY_LABEL)
    if namespace and agent:
        ctl.kick(namespace, agent)
