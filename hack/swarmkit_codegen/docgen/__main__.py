"""``python -m swarmkit_codegen.docgen``: write or verify the generated docs."""

from swarmkit_codegen.docgen import main

raise SystemExit(main())
