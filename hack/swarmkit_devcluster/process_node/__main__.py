"""``python -m swarmkit_devcluster.process_node``: see :func:`.cli.main`."""

from __future__ import annotations

import sys

from swarmkit_devcluster.process_node.cli import main

if __name__ == "__main__":
    sys.exit(main())
