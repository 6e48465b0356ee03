"""The preview relay's client side (sessions.stream.preview_socket.open_upstream) against a
websocket server over an already connected socket, as Sandbox.connect_port gives one."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed, InvalidStatus

from sessions.stream.preview_socket import open_upstream, upstream_close_code, viewer_close_code


@contextlib.asynccontextmanager
async def application(handler, **options):
    """A websocket application on a free port, and a connected socket to it."""
    async with serve(handler, "127.0.0.1", 0, **options) as server:
        port = server.sockets[0].getsockname()[1]
        sock = socket.create_connection(("127.0.0.1", port))
        try:
            yield sock, port
        finally:
            sock.close()


async def test_it_relays_messages_and_takes_the_applications_subprotocol():
    seen = {}

    async def handler(ws):
        seen["path"], seen["headers"] = ws.request.path, ws.request.headers
        await ws.send(["frag", "mented"])  # one message in two frames
        await ws.send(await ws.recv())
        await ws.send(await ws.recv())
        await ws.ping()

    async with application(handler, subprotocols=["chat"]) as (sock, port):
        upstream = await open_upstream(
            sock, port=port, target="/live?x=1", subprotocols=["other", "chat"]
        )
        assert upstream.subprotocol == "chat"
        assert await asyncio.wait_for(upstream.recv(), 5) == "fragmented"
        await upstream.send("text")
        assert await asyncio.wait_for(upstream.recv(), 5) == "text"
        await upstream.send(b"\x00\x01")
        assert await asyncio.wait_for(upstream.recv(), 5) == b"\x00\x01"
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(upstream.recv(), 5)
        assert upstream_close_code(closed.value) == 1000
    assert seen["path"] == "/live?x=1"
    assert seen["headers"]["Host"] == f"127.0.0.1:{port}"
    assert seen["headers"]["Origin"] == f"http://127.0.0.1:{port}"
    assert "User-Agent" not in seen["headers"]
    assert "Sec-WebSocket-Extensions" not in seen["headers"]  # no compression offered


@pytest.mark.parametrize(("code", "viewer"), [(4001, 4001), (1011, 4502), (1001, 1000)])
async def test_the_applications_close_code_reaches_the_viewer(code, viewer):
    async def handler(ws):
        await ws.close(code)

    async with application(handler) as (sock, port):
        upstream = await open_upstream(sock, port=port, target="/", subprotocols=[])
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(upstream.recv(), 5)
    assert viewer_close_code(upstream_close_code(closed.value)) == viewer


async def test_a_refused_handshake_raises():
    def refuse(connection, request):
        return connection.respond(403, "no\n")

    async with application(lambda ws: None, process_request=refuse) as (sock, port):
        with pytest.raises(InvalidStatus):
            await open_upstream(sock, port=port, target="/", subprotocols=[])
