"""``python -m swarmkit_operator.docgen``: write or verify the generated docs."""

from swarmkit_operator.docgen import main

raise SystemExit(main())
