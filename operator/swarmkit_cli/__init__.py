"""``kubectl swarmkit``: the kubectl plugin (console script ``kubectl-swarmkit``).

Subcommands live one per module in :mod:`swarmkit_cli.commands` and are discovered at
start-up (see :mod:`swarmkit_cli.plugin` for the registration API). This package imports
``swarmkit_api`` of ours and nothing else of ours: it talks to the cluster with the
``kubernetes`` client or ``kubectl``, like any other user.
"""
