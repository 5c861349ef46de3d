"""The runner's egress guard: every connection it makes is checked after DNS resolution.

Defence in depth under the Run's NetworkPolicy. The HTTP clients the runner makes for
model providers, HTTP MCP servers, HTTP tools, A2A agents and web search take their
transport from :func:`client_kwargs` (``httpx``) or :func:`client_kwargs2` (``httpx2``, the
MCP SDK's). While a plan is installed (:func:`install`, from the bundle's ``egress``), that
transport's connection pool opens TCP connections through :class:`GuardedBackend`: it
resolves the host itself, checks every address against the plan
(:func:`swarmkit_api.egress.refusal`) and then connects to the checked address, never to
the name, so a name that re-resolves between check and connect (DNS rebinding) cannot
slip through; TLS still verifies the certificate against the name. A refusal is a
:class:`EgressRefused` tool error naming the destination and why.

One runner process runs one bundle, so the plan is process-wide. Environment proxies are
ignored while a plan is installed (the proxy would be the only destination checked).
``bash`` and skill scripts are separate processes: the NetworkPolicy contains them.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

from swarmkit_api.egress import EgressPlan, refusal

from .errors import ToolError

_plan: EgressPlan | None = None


class EgressRefused(ToolError):
    """A connection to an undeclared destination was refused before it was made."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "EgressRefused")


def install(plan: EgressPlan | None) -> None:
    """Check every later connection against ``plan`` (None: no check, egress policy none)."""
    global _plan
    _plan = plan


async def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now, in the resolver's order (a literal: itself)."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def check(host: str, port: int) -> list[str]:
    """The checked addresses of ``host:port``; raises :class:`EgressRefused`."""
    addresses = await resolve(host, port)
    if _plan is not None:
        reason = refusal(_plan, host, port, addresses)
        if reason is not None:
            raise EgressRefused(reason)
    return addresses


class GuardedBackend:
    """An httpcore network backend that connects only to checked addresses."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        addresses = await check(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except Exception as exc:  # the next address, as getaddrinfo's callers do
                last = exc
        assert last is not None  # check() refuses a name without addresses
        raise last

    async def connect_unix_socket(self, path: str, *args: Any, **kwargs: Any) -> Any:
        raise EgressRefused(f"egress to unix socket {path} refused: not a declared destination")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _guard(transport: Any) -> Any:
    pool = transport._pool  # the transport's httpcore connection pool
    pool._network_backend = GuardedBackend(pool._network_backend)
    return transport


def client_kwargs() -> dict[str, Any]:
    """Extra ``httpx.AsyncClient`` arguments: a guarded transport while a plan is installed."""
    if _plan is None:
        return {}
    import httpx

    return {"transport": _guard(httpx.AsyncHTTPTransport()), "trust_env": False}


def client_kwargs2() -> dict[str, Any]:
    """The same for ``httpx2.AsyncClient`` (the MCP SDK's client)."""
    if _plan is None:
        return {}
    import httpx2

    return {"transport": _guard(httpx2.AsyncHTTPTransport()), "trust_env": False}


__all__ = ["EgressRefused", "GuardedBackend", "check", "client_kwargs", "client_kwargs2", "install"]
