"""``python -m swarmkit_runner serve``: a Topology served over A2A (the pod of a Deployment).

The operator renders a served Topology's bundle like a Run's and runs this server in a
Deployment (``spec.serve``). Each A2A task is one run of the topology with the runner's
own loop, limits, default-deny catalog and audit (:mod:`.tasks`); the HTTP surface (Agent
Card, JSON-RPC in the A2A 1.0 and 0.3 dialects, SSE streaming, probes, metrics) is in
:mod:`.app` and :mod:`.wire`; :mod:`.server` starts it and drains it on SIGTERM.
"""
