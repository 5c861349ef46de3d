"""The runner servers' listening socket: accepted connections have Nagle turned off (else
every keep-alive answer of ``serve`` and ``gateway`` waited ~40 ms on delayed ACKs)."""

from __future__ import annotations

import asyncio
import socket

from swarmkit_runner.listen import listen_socket


def test_accepted_connections_have_tcp_nodelay_and_the_port_can_be_shared() -> None:
    async def scenario() -> int:
        sock = listen_socket("127.0.0.1", 0)
        port = sock.getsockname()[1]
        # SO_REUSEPORT: a second replica binds the same port while the first still listens.
        second = listen_socket("127.0.0.1", port)
        second.close()
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_client, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            nodelay = await asyncio.wait_for(seen, 5)
            writer.close()
        return nodelay

    assert asyncio.run(scenario()) != 0
