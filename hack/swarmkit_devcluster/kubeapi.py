"""A small, dependency-free JSON client for the Kubernetes API (dicts in, dicts out).

The process node and the cluster manager talk to the apiserver through this client rather than
the generated ``kubernetes`` models: it needs a handful of endpoints, works with the API's own
camelCase JSON, streams watches with timeouts, and keeps one keep-alive connection per thread.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import ssl
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import yaml

JSON = dict[str, Any]


class ApiError(Exception):
    """An HTTP error status from the apiserver."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        message = body
        with contextlib.suppress(ValueError, AttributeError):
            message = str(json.loads(body).get("message", body))
        super().__init__(f"{status} {reason}: {message}")


class KubeClient:
    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        ca_data: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        insecure: bool = False,
        timeout: float = 30.0,
    ) -> None:
        url = urllib.parse.urlsplit(server)
        if url.scheme != "https":
            raise ValueError(f"only https servers are supported, got {server!r}")
        self.server = server.rstrip("/")
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or 443
        self.base_path = url.path.rstrip("/")
        self._token = token
        self._token_file = token_file
        self.timeout = timeout
        ctx = ssl.create_default_context()
        if insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if ca_file:
            ctx.load_verify_locations(cafile=ca_file)
        if ca_data:
            ctx.load_verify_locations(cadata=ca_data)
        if cert_file:
            ctx.load_cert_chain(cert_file, key_file)
        self._ctx = ctx
        self._local = threading.local()

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str], context: str | None = None
    ) -> KubeClient:
        cfg = yaml.safe_load(Path(path).read_text())
        ctx_name = context or cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user: dict[str, Any] = next(
            (u["user"] for u in cfg.get("users", []) if u["name"] == ctx.get("user")), {}
        )
        base = Path(path).parent

        def rel(p: str | None) -> str | None:
            return str(base / p) if p else None

        def data_file(b64: str | None) -> str | None:
            if not b64:
                return None
            fd, name = tempfile.mkstemp(prefix="kubeapi-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(base64.b64decode(b64))
            return name

        ca_data = cluster.get("certificate-authority-data")
        return cls(
            cluster["server"],
            token=user.get("token"),
            token_file=rel(user.get("tokenFile")),
            ca_file=rel(cluster.get("certificate-authority")),
            ca_data=base64.b64decode(ca_data).decode() if ca_data else None,
            cert_file=rel(user.get("client-certificate"))
            or data_file(user.get("client-certificate-data")),
            key_file=rel(user.get("client-key")) or data_file(user.get("client-key-data")),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
        )

    # -- plumbing ---------------------------------------------------------------------------

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "swarmkit-devcluster"}
        token = self._token
        if self._token_file:
            token = Path(self._token_file).read_text().strip()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _new_conn(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self._ctx, timeout=timeout)

    def url(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        full = self.base_path + path
        if params:
            clean = {k: _param(v) for k, v in params.items() if v is not None}
            full += "?" + urllib.parse.urlencode(clean)
        return full

    def request_raw(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers(content_type if data is not None else None)
        url = self.url(path, params)
        t = timeout if timeout is not None else self.timeout
        for attempt in range(2):
            conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._new_conn(t)
                self._local.conn = conn
            conn.timeout = t
            if conn.sock is not None:
                conn.sock.settimeout(t)
            try:
                conn.request(method, url, body=data, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
                return resp.status, payload
            except (http.client.HTTPException, ConnectionError, BrokenPipeError, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> JSON:
        status, payload = self.request_raw(
            method, path, body, params=params, content_type=content_type, timeout=timeout
        )
        if status >= 400:
            raise ApiError(
                status, http.client.responses.get(status, ""), payload.decode(errors="replace")
            )
        if not payload:
            return {}
        return cast(JSON, json.loads(payload))

    # -- verbs ------------------------------------------------------------------------------

    def get(self, path: str, **params: Any) -> JSON:
        return self.request("GET", path, params=params)

    def create(self, path: str, body: JSON, **params: Any) -> JSON:
        return self.request("POST", path, body, params=params)

    def replace(self, path: str, body: JSON) -> JSON:
        return self.request("PUT", path, body)

    def merge_patch(self, path: str, body: JSON) -> JSON:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str, body: JSON | None = None, **params: Any) -> JSON:
        return self.request("DELETE", path, body, params=params)

    def watch(
        self,
        path: str,
        *,
        resource_version: str | None,
        timeout_seconds: int = 60,
        **params: Any,
    ) -> Iterator[JSON]:
        """Stream watch events ({type, object}); ends when the server closes the watch."""
        query: dict[str, Any] = {
            "watch": "true",
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true",
            **params,
        }
        if resource_version:
            query["resourceVersion"] = resource_version
        conn = self._new_conn(timeout_seconds + 30)
        try:
            conn.request("GET", self.url(path, query), headers=self._headers(None))
            resp = conn.getresponse()
            if resp.status >= 400:
                raise ApiError(resp.status, resp.reason, resp.read().decode(errors="replace"))
            buf = b""
            while True:
                try:
                    chunk = resp.read1(65536)
                except (TimeoutError, http.client.IncompleteRead):
                    return
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield cast(JSON, json.loads(line))
        finally:
            conn.close()


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def pod_path(namespace: str, name: str = "", sub: str = "") -> str:
    p = f"/api/v1/namespaces/{namespace}/pods"
    if name:
        p += f"/{name}"
    if sub:
        p += f"/{sub}"
    return p
