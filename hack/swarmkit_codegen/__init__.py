"""The generators (development only, never in an image): models → files the repository commits.

* :mod:`.crdgen` — ``swarmkit_api`` models → ``crds/``, the chart's CRD, RBAC and admission
  templates;
* :mod:`.chart_values` — the chart's values as a model → ``values.schema.json``;
* :mod:`.docgen` — the docs site's reference pages, the chart README, the figures blocks;
* :mod:`.generate` — the command line they share (``--out ROOT`` / ``--verify ROOT``).

``make generate`` writes them all, ``make verify`` fails on any drift. They read the product
packages (``swarmkit_api``, ``swarmkit_operator``, ``swarmkit_cli``); no product package
imports them (``.importlinter``), and they live under ``hack/``, in the dev-only
distribution (``hack/pyproject.toml``), so the operator image does not carry them.
"""
