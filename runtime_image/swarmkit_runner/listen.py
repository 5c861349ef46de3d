"""The listening socket of the runner's servers (``serve`` over A2A, ``gateway`` over MCP).

* ``IPPROTO_TCP`` as the protocol: asyncio sets ``TCP_NODELAY`` on accepted connections only
  for such sockets; without it Nagle + delayed ACK add ~40 ms to every keep-alive response
  written in two parts (headers, body), which dominated both servers' latency.
* ``SO_REUSEPORT``: a new replica may bind the port while the old one drains (on the
  process node every pod shares the host's loopback).
"""

from __future__ import annotations

import contextlib
import socket


def listen_socket(host: str, port: int, backlog: int = 512) -> socket.socket:
    """A bound, listening, non-blocking TCP socket for uvicorn (see the module doc)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    with contextlib.suppress(AttributeError, OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.setblocking(False)
    return sock
