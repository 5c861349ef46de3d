"""A kubeconfig for a test's own API server: one cluster, one user with a bearer token."""

from __future__ import annotations

from pathlib import Path

import yaml


def token_kubeconfig(path: Path, server: str, token: str = "the-token", **cluster: str) -> str:
    """Write a kubeconfig at ``path`` naming ``server`` (more of the cluster's fields, e.g.
    ``proxy-url``, as keywords) and a user with ``token``; its path as a string."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)
