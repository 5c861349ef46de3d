"""The gateways controller: each Agent's ``spec.gateway`` as a Deployment + Service (kopf-free).

Kicked per Agent (its gateway Deployment's events) and per namespace (any Skill, Agent,
Topology or Workspace change there may give a served agent a new version).
The kicks go into a :class:`~.runtime.workqueue.WorkQueue` (the operator's one work-queue
type: one pass per Agent at a time, kicks coalesced), taken off by :data:`WORKERS` workers
the manager starts once this replica leads; a failed reconcile is retried by the queue.
A reconcile runs the Agent's gateway (a :class:`Gateway`) through the runner-workload
pipeline (:mod:`.workload.served`), like a served Topology:

1. disabled (or no ``spec.gateway``): deletes the Deployment, Service, RBAC objects and
   bundle ConfigMaps, and reports ``Serving=False`` ``Disabled`` if it ever reported anything;
2. resolves the agent exactly as a Run of it would
   (the operator's one :class:`~.workload.resolve.Resolver`); while that waits (the agent
   or a skill not Ready yet), ``Serving`` keeps its previous status with the waiting
   message, so a gateway that serves keeps serving;
3. when the observed Deployment does not run the new pod template (its checksum) at the
   wanted replica count: creates the content-addressed bundle ConfigMap, then
   server-side applies the NetworkPolicy, the gateway's ServiceAccount, Role and
   RoleBinding (create/get/watch Reviews: a call that waits for a person opens one), the
   Service and the Deployment (:mod:`.builders.gateway`), never over an object of that
   name the operator did not make for the Agent (``TamperedObject``);
4. writes ``Serving``, ``gatewayUrl`` and ``gatewayVersion`` to the Agent's status: a
   server-side apply of exactly those as the field manager ``swarmkit-gateways`` (the
   ``Serving`` entry of the conditions list is this controller's, the Agent reconciler's
   conditions are the reconcile manager's), skipped when unchanged, with a Warning Event
   on a transition to ``False``; once rolled out it deletes the superseded bundle
   ConfigMaps. While no replica is ready and its pods wait for a token's Secret (key),
   ``Serving=False`` ``SecretNotFound`` names it: read from the pods' status
   (:func:`.workload.served.secret_wait`), as the operator reads no Secret (issue 41).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from swarmkit_api.agent import AgentSpec, GatewaySpec
from swarmkit_api.conditions import REASON_DISABLED, REASON_SECRET_NOT_FOUND, REASON_STARTING
from swarmkit_api.run import RunSpec

from . import egress, k8s
from .builders import gateway as gw
from .builders.bundle import RenderedBundle
from .builders.workload import Target, involved
from .conditions import get_condition, set_condition
from .config import OperatorConfig
from .reconcile.status import apply_status
from .runtime.workqueue import Result, Workers, WorkQueue
from .workload import pipeline, served
from .workload.pipeline import Stop
from .workload.resolve import Resolver
from .workload.served import Manifests

log = logging.getLogger("swarmkit_operator.gateways")

#: Seconds between looks at a Deployment that is still rolling out (events kick sooner).
ROLLOUT_RECHECK = 5.0
#: Gateway reconciles at once (an Agent's is never run twice at once).
WORKERS = 4


class GatewayController:
    """Reconciles Agent gateways (module docstring)."""

    def __init__(
        self,
        config: OperatorConfig,
        resolver: Resolver,
        agents: Mapping[Any, list[Any]],
    ) -> None:
        self.config = config
        #: The operator's one resolver (shared with the Runs controller and serving).
        self.resolver = resolver
        #: (namespace, name) → the reconcile loop's agent view (spec, uid, status).
        self.agents = agents
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        # The same retry rule and metrics as every controller (kind "Gateway").
        self._workers = Workers(
            self.queue,
            self._work,
            "swarmkit-gateways",
            kind=lambda _: "Gateway",
            describe=lambda key: f"{key[0]}/{key[1]}",
        )
        #: namespace → agents there with a ``spec.gateway`` (or one still being torn down):
        #: the only ones a namespace-wide kick reconciles (events cost O(gateways), not
        #: O(agents)).
        self.served: dict[str, set[str]] = {}

    # -- scheduling ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the workers (the manager calls it once this replica leads)."""
        self.resolver.ledger.start()  # what it applies from now on, it remembers
        self._workers.start(WORKERS)

    async def stop(self) -> None:
        await self._workers.stop()

    def seed(self) -> None:
        """Learn which Agents have a gateway from the agent views already indexed (the
        start-up's LIST), before their events arrive."""
        for namespace, name in list(self.agents):
            views = self.agents.get((namespace, name))
            if views:
                self.agent_changed(namespace, name, views[0]["spec"])

    def kick(self, namespace: str, name: str, delay: float = 0.0) -> None:
        self.queue.add((namespace, name), delay)

    def agent_changed(self, namespace: str, name: str, spec: Mapping[str, Any]) -> None:
        """An Agent event: track whether it has a gateway, then kick the namespace's."""
        if spec.get("gateway"):
            self.served.setdefault(namespace, set()).add(name)
        self.kick_namespace(namespace)

    def kick_namespace(self, namespace: str | None) -> None:
        """Every agent of ``namespace`` that has (or had) a gateway: a change there (a
        skill, a topology an agent skill runs, the Workspace) may give it a new version."""
        for name in list(self.served.get(namespace or "", ())):
            self.kick(namespace or "", name)

    async def _work(self, key: tuple[str, str]) -> Result:
        # A failure is retried by the queue (rate-limited), never lost.
        again = await self.reconcile(*key)
        return Result("reconciled", again)

    def _view(self, key: tuple[str, str]) -> dict[str, Any] | None:
        values = self.agents.get(key)
        return dict(next(iter(values))) if values else None

    # -- one reconcile ---------------------------------------------------------------------
    async def reconcile(self, namespace: str, name: str) -> float | None:
        view = self._view((namespace, name))
        if view is None:
            self.served.get(namespace, set()).discard(name)
            return None  # the Agent is gone; ownerReferences collect its gateway
        agent = gw.AgentRef(name, namespace, str(view["uid"]), int(view["generation"] or 0))
        try:
            spec = AgentSpec.model_validate(view["spec"]).gateway
        except ValidationError:
            return None  # the Agent reconciler reports the invalid spec
        status = dict(view["status"])
        if spec is None or not spec.enabled:
            await self._disable(agent, status)
            # Torn down: only its own next event (a re-enable) brings it back.
            self.served.get(namespace, set()).discard(name)
            return None
        assert spec.auth is not None
        gateway = Gateway(agent, spec, self.config, dict(status.get("createdUids") or {}))
        observed = await served.observe(namespace, gw.gateway_name(name))
        result = await served.roll_out(self.resolver, gateway, observed)
        if isinstance(result, Stop):
            # What this process made since: the status it read may not show it yet.
            status["createdUids"] = self.resolver.ledger.recorded(gateway.target, gateway.recorded)
            return await self._stopped(agent, status, result)
        version = result.rendered.bundle.agents[name].version
        verdict = gw.serving(result.deployment, version)
        if verdict.reason == REASON_STARTING:
            secret = await served.secret_wait(namespace, gw.selector(name))
            if secret is not None:
                verdict = dataclasses.replace(
                    verdict, reason=REASON_SECRET_NOT_FOUND, message=f"{verdict.message}: {secret}"
                )
        fields: dict[str, Any] = {
            "gatewayUrl": gw.gateway_url(agent, spec),
            "createdUids": dict(result.created_uids),
        }
        if verdict.version is not None:
            fields["gatewayVersion"] = verdict.version
        await self._write(agent, status, verdict.status, verdict.reason, verdict.message, fields)
        if verdict.rolled:
            await self._delete_bundles(agent, keep=result.config_map)
            return None
        return ROLLOUT_RECHECK

    async def _stopped(
        self, agent: gw.AgentRef, status: Mapping[str, Any], stop: Stop
    ) -> float | None:
        """``Serving`` when the pipeline stopped before the workload."""
        if stop.waiting:  # a gateway that serves keeps serving: its status stays
            previous = get_condition(status.get("conditions"), gw.SERVING)
            state = previous["status"] if previous else "False"
            await self._write(agent, status, state, stop.reason, stop.message, {})
            return stop.recheck
        if stop.remove:  # no gateway, not even an older, ungated one
            await self._disable(agent, status, (stop.reason, stop.message))
            return None
        # A running gateway keeps its pods (a missing RuntimeClass, a tampered object).
        await self._write(agent, status, "False", stop.reason, stop.message, {})
        return stop.recheck

    async def _write(
        self,
        agent: gw.AgentRef,
        status: Mapping[str, Any],
        state: str,
        reason: str,
        message: str,
        fields: Mapping[str, Any],
    ) -> None:
        conditions = set_condition(
            status.get("conditions"),
            gw.SERVING,
            state,  # type: ignore[arg-type]
            reason,
            message,
            agent.generation,
        )
        serving = [c for c in conditions if c.get("type") == gw.SERVING]
        # Everything this manager owns, every time (an apply drops what it leaves out): a
        # field this write does not compute keeps its value.
        owned: dict[str, Any] = {
            "gatewayUrl": status.get("gatewayUrl"),
            "gatewayVersion": status.get("gatewayVersion"),
            "createdUids": status.get("createdUids"),
            **fields,
        }
        current = get_condition(status.get("conditions"), gw.SERVING)
        if current == serving[0] and all(status.get(k) == v for k, v in owned.items()):
            return
        # An empty field is cleared (after the apply: one an older operator wrote).
        desired = {"conditions": serving, **{k: v or None for k, v in owned.items()}}
        await apply_status("Agent", agent.namespace, agent.name, desired, k8s.GATEWAYS_MANAGER)
        changed = current is None or (current.get("status"), current.get("reason")) != (
            state,
            reason,
        )
        if state == "False" and changed:  # like every reconciler: a transition to False
            who = involved(gw.target_of(agent))
            await k8s.post_event(who, "Warning", reason, f"{gw.SERVING}: {message}")

    async def _disable(
        self, agent: gw.AgentRef, status: Mapping[str, Any], why: tuple[str, str] | None = None
    ) -> None:
        """Tear the gateway down; ``why`` (reason, message) is written even where nothing
        was reported yet (default: Disabled, only once something was)."""
        name = gw.gateway_name(agent.name)
        await k8s.delete_object(k8s.apps_path("deployments", agent.namespace, name))
        await k8s.delete_object(k8s.core_path("services", agent.namespace, name))
        await egress.delete_policy(agent.namespace, name)
        for plural in ("rolebindings", "roles"):
            await k8s.delete_object(k8s.rbac_path(plural, agent.namespace, name))
        await k8s.delete_object(k8s.core_path("serviceaccounts", agent.namespace, name))
        await self._delete_bundles(agent, keep=None)
        self.resolver.ledger.forget(agent.uid)
        if why is None and get_condition(status.get("conditions"), gw.SERVING) is None:
            return
        reason, message = why or (REASON_DISABLED, "spec.gateway is not enabled")
        gone = {"gatewayUrl": None, "gatewayVersion": None, "createdUids": None}
        await self._write(agent, status, "False", reason, message, gone)

    async def _delete_bundles(self, agent: gw.AgentRef, keep: str | None) -> None:
        selector = ",".join(f"{k}={v}" for k, v in gw.selector(agent.name).items())
        path = k8s.core_path("configmaps", agent.namespace)
        listed = [
            (str(cm["metadata"]["name"]), str(cm["metadata"].get("uid") or ""))
            for cm in await k8s.list_objects(path, selector)
        ]
        await pipeline.prune_bundles(agent.namespace, listed, keep)


@dataclass(frozen=True)
class Gateway:
    """An Agent's ``spec.gateway`` as the runner-workload pipeline sees it
    (:class:`~.workload.served.Served`)."""

    agent: gw.AgentRef
    spec: GatewaySpec
    config: OperatorConfig
    #: The Agent's ``status.createdUids`` (its gateway's objects, as the operator made them).
    recorded: Mapping[str, str] = field(default_factory=dict)

    @property
    def target(self) -> Target:
        return gw.target_of(self.agent)

    @property
    def what(self) -> str:
        return f"agent {self.agent.name}'s gateway"

    def run_spec(self) -> RunSpec:
        return RunSpec.model_validate({"agentRef": {"name": self.agent.name}})

    def shape(self, rendered: RenderedBundle) -> RenderedBundle:
        """The Agent's bundle with the gateway's port and tokens."""
        bundle = gw.gateway_bundle(rendered, self.spec)
        return dataclasses.replace(rendered, bundle=bundle, bundle_json=bundle.to_json())

    def bundle_config_map(self, rendered: RenderedBundle) -> dict[str, Any]:
        return gw.bundle_config_map(self.agent, rendered, rendered.bundle)

    def manifests(self, rendered: RenderedBundle, config_map: str) -> Manifests:
        deployment, service = gw.workload(
            self.agent, self.spec, rendered, rendered.bundle, config_map, self.config
        )
        rbac = gw.review_rbac(self.agent, gw.service_account(self.agent.name, rendered))
        return Manifests(deployment, service, self.spec.port, tuple(rbac), needs_apiserver=True)


__all__ = ["Gateway", "GatewayController"]
