"""The gateways controller: each Agent's ``spec.gateway`` as a Deployment + Service (kopf-free).

Kicked per Agent (its gateway Deployment's events) and per namespace (any Skill, Agent,
Topology, Workspace or Secret change there may give a served agent a new version or its
token).
The kicks go into a :class:`~.runtime.workqueue.WorkQueue` (the operator's one work-queue
type: one pass per Agent at a time, kicks coalesced), taken off by :data:`WORKERS` workers
the manager starts once this replica leads; a failed reconcile is retried by the queue.
A reconcile:

1. disabled (or no ``spec.gateway``): deletes the Deployment, Service, RBAC objects and
   bundle ConfigMaps, and reports ``Serving=False`` ``Disabled`` if it ever reported anything;
2. with a token's Secret key missing, reports ``Serving=False`` ``SecretNotFound`` (and
   leaves a running gateway alone); then resolves the agent exactly as a Run of it would
   (:class:`~.runs.resolve.Resolver`); while that waits (the agent or a skill not Ready
   yet), ``Serving`` keeps its previous status with the waiting message, so a gateway
   that serves keeps serving;
3. creates the content-addressed bundle ConfigMap, then server-side applies the gateway's
   ServiceAccount, Role and RoleBinding (create/get/watch Reviews: a call that waits for a
   person opens one), the Service and the Deployment (a new pod template checksum rolls
   it; :mod:`.builders.gateway`);
4. writes ``Serving``, ``gatewayUrl`` and ``gatewayVersion`` to the Agent's status: a
   server-side apply of exactly those as the field manager ``swarmkit-gateways`` (the
   ``Serving`` entry of the conditions list is this controller's, the Agent reconciler's
   conditions are the reconcile manager's), skipped when unchanged; once rolled out it
   deletes the superseded bundle ConfigMaps.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from swarmkit_api.agent import AgentSpec, GatewaySpec
from swarmkit_api.conditions import (
    REASON_DISABLED,
    REASON_FUNNEL_NOT_SERVABLE,
    REASON_RUNTIME_CLASS_NOT_FOUND,
    REASON_SECRET_NOT_FOUND,
    REASON_WAITING,
)
from swarmkit_api.run import RunSpec

from . import egress, k8s, sandbox
from .builders import gateway as gw
from .builders import unservable
from .conditions import get_condition, set_condition
from .config import OperatorConfig
from .reconcile.status import apply_status
from .runs.model import Indexes, RunView
from .runs.resolve import Resolver, Waiting
from .runtime.workqueue import Result, Workers, WorkQueue

log = logging.getLogger("swarmkit_operator.gateways")

#: Seconds between looks at a Deployment that is still rolling out (events kick sooner).
ROLLOUT_RECHECK = 5.0
#: Seconds between looks for a missing token Secret.
SECRET_RECHECK = 5.0
#: Gateway reconciles at once (an Agent's is never run twice at once).
WORKERS = 4


class GatewayController:
    """Reconciles Agent gateways (module docstring)."""

    def __init__(
        self,
        config: OperatorConfig,
        indexes: Indexes,
        agents: Mapping[Any, list[Any]],
        secret_keys: Mapping[Any, list[Any]],
    ) -> None:
        self.config = config
        self.resolver = Resolver(config, indexes)
        #: (namespace, name) → the reconcile loop's agent view (spec, uid, status).
        self.agents = agents
        #: (namespace, Secret) → the names of its keys (never values).
        self.secret_keys = secret_keys
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
        self._workers.start(WORKERS)

    async def stop(self) -> None:
        await self._workers.stop()

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
        missing = self._missing_tokens(namespace, spec)
        if missing:
            # No pod could start (its env names the key); a running gateway keeps running.
            message = f"gateway token Secret key(s) not found: {', '.join(missing)}"
            await self._write(agent, status, "False", REASON_SECRET_NOT_FOUND, message, {})
            return SECRET_RECHECK
        resolution = await self.resolver.resolve(self._run_view(agent), self._run_spec(agent))
        if isinstance(resolution, Waiting):
            previous = get_condition(status.get("conditions"), gw.SERVING)
            state = previous["status"] if previous else "False"
            await self._write(agent, status, state, REASON_WAITING, resolution.message, {})
            return resolution.recheck
        rendered = resolution.rendered
        bundle = gw.gateway_bundle(rendered, spec)
        refused = unservable.refusal(bundle, f"agent {name}'s gateway")
        if refused is not None:  # no gateway, not even an older, ungated one
            await self._disable(agent, status, (REASON_FUNNEL_NOT_SERVABLE, refused))
            return None
        missing_rc = await sandbox.missing_runtime_class(bundle)
        if missing_rc is not None:  # a running gateway keeps its pods
            reason = REASON_RUNTIME_CLASS_NOT_FOUND
            await self._write(agent, status, "False", reason, missing_rc, {})
            return sandbox.RECHECK_SECONDS
        config_map = gw.bundle_config_map(agent, rendered, bundle)
        cm_name = str(config_map["metadata"]["name"])
        await k8s.create_object(k8s.core_path("configmaps", namespace), config_map)
        deployment, service = gw.workload(agent, spec, rendered, bundle, cm_name, self.config)
        for doc in gw.review_rbac(agent, gw.service_account(name, rendered)):
            await k8s.apply(k8s.object_path(doc), doc)
        await egress.apply_workload_policy(deployment, bundle, spec.port, needs_apiserver=True)
        observed = await self._apply(deployment, service)
        version = bundle.agents[name].version
        verdict = gw.serving(observed, version)
        fields: dict[str, Any] = {"gatewayUrl": gw.gateway_url(agent, spec)}
        if verdict.version is not None:
            fields["gatewayVersion"] = verdict.version
        await self._write(agent, status, verdict.status, verdict.reason, verdict.message, fields)
        if verdict.rolled:
            await self._delete_bundles(agent, keep=cm_name)
            return None
        return ROLLOUT_RECHECK

    def _missing_tokens(self, namespace: str, spec: GatewaySpec) -> list[str]:
        missing: list[str] = []
        for token in spec.auth.tokens if spec.auth is not None else ():
            ref = token.secret_key_ref
            values = self.secret_keys.get((namespace, ref.name))
            keys = next(iter(values)) if values else frozenset()
            if ref.key not in keys:
                missing.append(f"{ref.name}/{ref.key}")
        return missing

    @staticmethod
    def _run_view(agent: gw.AgentRef) -> RunView:
        """The gateway as the resolver's "run" of the agent (its id is the Agent's uid)."""
        return RunView(
            name=gw.gateway_name(agent.name),
            namespace=agent.namespace,
            uid=agent.uid,
            generation=1,
            spec={},
            status={},
            labels={},
            deleting=False,
            resource_version=0,
        )

    @staticmethod
    def _run_spec(agent: gw.AgentRef) -> RunSpec:
        return RunSpec.model_validate({"agentRef": {"name": agent.name}})

    async def _apply(
        self, deployment: dict[str, Any], service: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Server-side apply the Service and the Deployment; the observed Deployment.

        Applying the same manifest again changes nothing; a new pod template (its checksum)
        rolls the Deployment.
        """
        namespace = deployment["metadata"]["namespace"]
        name = deployment["metadata"]["name"]
        await k8s.apply(k8s.core_path("services", namespace, name), service)
        return await k8s.apply(k8s.apps_path("deployments", namespace, name), deployment)

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
            **fields,
        }
        current = get_condition(status.get("conditions"), gw.SERVING)
        if current == serving[0] and all(status.get(k) == v for k, v in owned.items()):
            return
        # An empty field is cleared (after the apply: one an older operator wrote).
        desired = {"conditions": serving, **{k: v or None for k, v in owned.items()}}
        await apply_status("Agent", agent.namespace, agent.name, desired, k8s.GATEWAYS_MANAGER)

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
        if why is None and get_condition(status.get("conditions"), gw.SERVING) is None:
            return
        reason, message = why or (REASON_DISABLED, "spec.gateway is not enabled")
        await self._write(
            agent, status, "False", reason, message, {"gatewayUrl": None, "gatewayVersion": None}
        )

    async def _delete_bundles(self, agent: gw.AgentRef, keep: str | None) -> None:
        selector = ",".join(f"{k}={v}" for k, v in gw.selector(agent.name).items())
        path = k8s.core_path("configmaps", agent.namespace)
        for cm in await k8s.list_objects(path, selector):
            cm_name = cm["metadata"]["name"]
            if cm_name != keep:
                await k8s.delete_object(k8s.core_path("configmaps", agent.namespace, cm_name))


__all__ = ["GatewayController"]
