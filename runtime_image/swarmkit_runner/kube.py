"""The smallest in-cluster Kubernetes API client the MCP gateway needs (create, get, watch).

Only ``python -m swarmkit_runner gateway`` uses it, to open a Review for a call that waits
for a person and to follow that Review until it is decided (:mod:`.gateway_review`). A
Run's runner never talks to the API. Credentials are the pod's own service account, as a
kubelet projects them: ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the token and CA under
:data:`SA_DIR`. The token file is re-read on every request (the kubelet rotates it).

Nothing here knows Reviews; failures are :class:`KubeUnavailable` (no in-cluster
credentials) or :class:`KubeError` (the apiserver's answer, with its ``Status`` message).
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: Seconds for a create/get (a watch is bounded by its own ``timeoutSeconds``).
REQUEST_TIMEOUT = 15.0


class KubeUnavailable(Exception):
    """This process has no in-cluster API credentials (the reason says which part)."""


class KubeError(Exception):
    """The apiserver refused or failed a request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _status_message(status: int, body: bytes) -> str:
    try:
        payload = json.loads(body)
    except ValueError:
        return body.decode(errors="replace")[:300] or f"HTTP {status}"
    if isinstance(payload, Mapping) and payload.get("message"):
        return str(payload["message"])
    return f"HTTP {status}"


class KubeApi:
    """Requests to the apiserver as the pod's service account (see the module doc)."""

    def __init__(self, base_url: str, sa_dir: Path = SA_DIR) -> None:
        self.base_url = base_url
        self.sa_dir = sa_dir
        self._client: httpx.AsyncClient | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, sa_dir: Path = SA_DIR) -> KubeApi:
        """The in-cluster API, or :class:`KubeUnavailable` naming what is missing."""
        env = os.environ if env is None else env
        host = env.get("KUBERNETES_SERVICE_HOST")
        port = env.get("KUBERNETES_SERVICE_PORT") or "443"
        if not host:
            raise KubeUnavailable("not running in a Kubernetes pod (no KUBERNETES_SERVICE_HOST)")
        if not (sa_dir / "token").is_file():
            raise KubeUnavailable(
                f"the pod has no service account token ({sa_dir}/token; "
                "automountServiceAccountToken is off)"
            )
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return cls(f"https://{host}:{port}", sa_dir)

    def _token(self) -> str:
        try:
            return (self.sa_dir / "token").read_text().strip()
        except OSError as exc:
            raise KubeUnavailable(f"cannot read the service account token: {exc}") from None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            ca = self.sa_dir / "ca.crt"
            verify: ssl.SSLContext | bool = (
                ssl.create_default_context(cafile=str(ca)) if ca.is_file() else True
            )
            self._client = httpx.AsyncClient(base_url=self.base_url, verify=verify)
        return self._client

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token()}", "Accept": "application/json"}

    async def request(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        response = await self.client.request(
            method, path, json=body, headers=self._headers(), timeout=REQUEST_TIMEOUT
        )
        if response.status_code >= 400:
            raise KubeError(
                response.status_code, _status_message(response.status_code, response.content)
            )
        payload: dict[str, Any] = response.json()
        return payload

    async def watch(
        self, path: str, params: Mapping[str, str], timeout_seconds: int
    ) -> AsyncIterator[dict[str, Any]]:
        """The watch events of ``path`` (``{type, object}``) until the server ends it."""
        import httpx

        query = {**params, "watch": "1", "timeoutSeconds": str(max(1, timeout_seconds))}
        timeout = httpx.Timeout(REQUEST_TIMEOUT, read=timeout_seconds + REQUEST_TIMEOUT)
        async with self.client.stream(
            "GET", path, params=query, headers=self._headers(), timeout=timeout
        ) as response:
            if response.status_code >= 400:
                body = await response.aread()
                raise KubeError(response.status_code, _status_message(response.status_code, body))
            async for line in response.aiter_lines():
                if line.strip():
                    event: dict[str, Any] = json.loads(line)
                    yield event

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


__all__ = ["SA_DIR", "KubeApi", "KubeError", "KubeUnavailable"]
