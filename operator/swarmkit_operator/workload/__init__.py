"""The runner-workload pipeline: one way from a target to the pods that run its bundle.

Three things run the runner over a pinned bundle: a Run (a Job), a served Topology and an
Agent gateway (a Deployment behind a Service). All of them go through the same steps, in
the same order, over a :class:`~swarmkit_operator.builders.workload.Target` (kind,
namespace, name, uid):

1. **resolve** the target with the one :class:`~.resolve.Resolver` (one set of indexes);
2. **refusals**: funnel-gated nodes a served workload cannot park, a RuntimeClass that
   does not exist (:mod:`.pipeline`);
3. the **bundle** ConfigMap (immutable; an existing one is used only when its data is the
   operator's: exactly what a served workload renders now, or what a Run pinned first);
4. the **egress** NetworkPolicy, before any pod can start (one builder for all three:
   :func:`~swarmkit_operator.builders.netpol.workload_policy`; a Run's created once, a
   served one's applied with its Deployment);
5. the **workload** (Job, or Deployment + Service), never over an object of that name the
   operator did not make for the target (``TamperedObject``);
6. the **verdict** (the Run's status, or ``Serving``), including a Secret (key) the pods
   wait for, read from their status (no Secret is read: issue 41);
7. **prune** the bundles a rolled-out workload no longer mounts.

:mod:`.pipeline` holds the steps, :mod:`.served` runs them for a Deployment; the Runs
controller runs them for a Job (:mod:`swarmkit_operator.runs.start`), adding its budget gate
between the refusals and the bundle, and creating the bundle and the first Job concurrently
(the Run created → Job created latency). What differs per kind is pure and lives in the
builders (:mod:`~swarmkit_operator.builders.job`, :mod:`~swarmkit_operator.builders.serve`,
:mod:`~swarmkit_operator.builders.gateway`), which all wrap the one runner pod
(:func:`~swarmkit_operator.builders.pod.runner_pod_spec`).
"""
