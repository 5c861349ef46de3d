"""Watch streams, read on the event loop (aiohttp, with the client's credentials): a
stream is open for minutes, and cancelling it must close it at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from swarmkit_api.decoding import loads

from .. import metrics
from .client import ApiError, _resource_of, open_request


class Undecodable(ValueError):
    """A watch line that is not JSON (the stream is out of step: list again)."""


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
    headers = {"Accept": accept}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
    resource = _resource_of(path)
    async with open_request(
        "streams", "GET", path, params=query, headers=headers, timeout=timeout
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
    headers = {"Accept": "*/*"}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
    resource = _resource_of(path)
    async with open_request(
        "streams", "GET", path, params=query, headers=headers, timeout=timeout
    ) as response:
        metrics.API_REQUESTS.labels("GET", resource, str(response.status)).inc()
        if response.status >= 300:
            raise ApiError("GET", path, response.status, await response.text())
        tail = b""
        async for chunk in response.content.iter_any():
            *lines, tail = (tail + chunk).split(b"\n")
            for line in lines:
                yield line.decode(errors="replace")
