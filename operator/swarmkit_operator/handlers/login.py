"""kopf login: the in-cluster service account (path-prefix aware) or the kubeconfig.

kopf's built-in login reads the service-account files from their fixed paths; on the local
process node they live under ``$SWARMKIT_PATH_PREFIX``, so the operator pod of the Helm chart
could not log in there. This handler reads the same files through :func:`k8s.in_cluster`
(identical on a real cluster) and otherwise defers to kopf's kubernetes-client login.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kopf

from .. import k8s


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    creds = k8s.in_cluster()
    if creds is None:
        return kopf.login_via_client(**kwargs)
    namespace_file = Path(creds.namespace_path)
    return kopf.ConnectionInfo(
        server=creds.server,
        ca_path=creds.ca_path,
        token=Path(creds.token_path).read_text().strip(),
        default_namespace=namespace_file.read_text().strip() if namespace_file.exists() else None,
    )
