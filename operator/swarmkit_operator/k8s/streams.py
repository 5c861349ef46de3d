"""Watch streams, read on the event loop (aiohttp, with the client's credentials): a
stream is open for minutes, and cancelling it must close it at once."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
from kubernetes import client as kclient

from swarmkit_api.decoding import loads

from .. import metrics
from .client import ApiError, _resource_of, _state


class Undecodable(ValueError):
    """A watch line that is not JSON (the stream is out of step: list again)."""


def _ssl_context(cfg: kclient.Configuration) -> ssl.SSLContext | bool:
    if not cfg.verify_ssl:
        return False
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return ctx


def _auth_headers(cfg: kclient.Configuration) -> dict[str, str]:
    """The headers the REST layer would send (a service-account token is re-read here)."""
    headers: dict[str, str] = {}
    settings: Mapping[str, Any] = cfg.auth_settings()
    for setting in settings.values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[str(setting["key"])] = str(setting["value"])
    return headers


def _session() -> aiohttp.ClientSession:
    api = _state.api
    if api is None:
        raise RuntimeError("k8s.configure() was not called")
    loop = asyncio.get_running_loop()
    if _state.session is None or _state.session.closed or _state.session_loop is not loop:
        connector = aiohttp.TCPConnector(ssl=_ssl_context(api.configuration), limit=0)
        _state.session = aiohttp.ClientSession(connector=connector)
        _state.session_loop = loop  # a session is bound to its loop (tests run several)
    return _state.session


async def stream(
    path: str,
    query: list[tuple[str, str]],
    accept: str = "application/json",
    read_timeout: float = 300.0,
) -> AsyncIterator[dict[str, Any]]:
    """GET ``path`` and yield each JSON line of the answer (a watch) as it arrives.

    Raises :class:`ApiError` for an answer other than 2xx, ``aiohttp.ClientError`` or
    ``TimeoutError`` when the connection fails or stays silent for ``read_timeout``,
    :class:`Undecodable` for a line that is not JSON. A value nested too deep for Python
    is cut and its object marked (:mod:`swarmkit_api.decoding`), never an error.
    """
    api = _state.api
    if api is None:
        raise RuntimeError("k8s.configure() was not called")
    cfg = api.configuration
    headers = {"Accept": accept, **_auth_headers(cfg)}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
    resource = _resource_of(path)
    async with _session().get(
        cfg.host + path, params=query, headers=headers, timeout=timeout
    ) as response:
        metrics.API_REQUESTS.labels("WATCH", resource, str(response.status)).inc()
        if response.status >= 300:
            raise ApiError("WATCH", path, response.status, await response.text())
        tail = b""
        async for chunk in response.content.iter_any():
            if b"\n" not in chunk:
                tail += chunk  # a long line (a big object) arrives in many chunks
                continue
            *lines, tail = (tail + chunk).split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                try:
                    event = loads(line)
                except ValueError as exc:
                    raise Undecodable(f"WATCH {path}: an event is not JSON: {exc}") from None
                yield event


async def text_lines(
    path: str, query: list[tuple[str, str]], read_timeout: float = 300.0
) -> AsyncIterator[str]:
    """GET ``path`` and yield each line of the answer as it arrives (a followed log).

    Raises like :func:`stream`; a line that is not UTF-8 is decoded with replacements."""
    api = _state.api
    if api is None:
        raise RuntimeError("k8s.configure() was not called")
    cfg = api.configuration
    headers = {"Accept": "*/*", **_auth_headers(cfg)}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
    resource = _resource_of(path)
    async with _session().get(
        cfg.host + path, params=query, headers=headers, timeout=timeout
    ) as response:
        metrics.API_REQUESTS.labels("GET", resource, str(response.status)).inc()
        if response.status >= 300:
            raise ApiError("GET", path, response.status, await response.text())
        tail = b""
        async for chunk in response.content.iter_any():
            *lines, tail = (tail + chunk).split(b"\n")
            for line in lines:
                yield line.decode(errors="replace")


async def close_streams() -> None:
    """Close every open watch stream's connection (graceful stop)."""
    session, _state.session = _state.session, None
    if session is not None and not session.closed:
        await session.close()
