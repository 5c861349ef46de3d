"""Shared test helpers (importable as ``tests.support.*``).

* :mod:`tests.support.model_server` — a scripted model API on 127.0.0.1 speaking both the
  Anthropic Messages and the OpenAI Chat Completions wire formats (tool calls, usage,
  injected 429/5xx, recorded requests).
* :mod:`tests.support.mcp_servers` — MCP test servers built with the ``mcp`` SDK, over stdio
  (``stdio_command()``) and streamable HTTP (``HttpMcpServer``), optionally bearer-protected.
* :mod:`tests.support.a2a_server` — an A2A test agent built with the public ``a2a-sdk``
  (JSON-RPC, A2A 1.0 and 0.3 cards; completed, input-required, human-gate, failed and
  never-ending tasks; records what it saw), in a subprocess on loopback.
* :mod:`tests.support.bundles` — small factories that build valid ``RunBundle`` objects and
  write them (with skill files) to disk the way the operator mounts them.
* :mod:`tests.support.runner` — run ``python -m swarmkit_runner`` as a real subprocess (or
  in-process) and read back its result and audit lines.
* :mod:`tests.support.fake_k8s` — an in-memory Kubernetes API (controller-runtime's fake
  client in spirit) behind the operator's own ``k8s.request``/``k8s.stream`` seam:
  resourceVersions, generations, 404/409, the status subresource, apply, watches, faults.
* :mod:`tests.support.reconciling` — the operator's reconcile controller (its wiring,
  indexes, reflectors, workers) running against that fake, with ``settle()``.
"""
