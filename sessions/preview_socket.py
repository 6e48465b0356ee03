"""Websockets of the live preview: `/sessions/<id>/preview/<path>` upgraded to a websocket is
relayed, message by message, to the same path of the application inside the sandbox (e.g. a dev
server's live reload, or the application's own websockets).

Members only, as for the HTTP preview (others are closed with 4403). The connection into the
sandbox is `Sandbox.connect_port`, spoken to with the small RFC 6455 client below (the stdlib
has none, and the websocket libraries the project has are for its tests): the handshake, masked
client frames, fragmented messages, ping/pong and close.

Close codes: the application's own (1000 or 3000-4999); 4403 not a member; 4404 no running
sandbox (the link ended with it); 4502 the preview cannot be reached, or the connection into
the sandbox broke (e.g. the sandbox was stopped). daphne (Autobahn) can send only 1000 and
3000-4999: any other code would fail there and leave the viewer's socket open and silent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import os
import struct

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth.models import AnonymousUser
from django.http import Http404

from accounts import access
from sessions import live_access
from sessions.models import Session

log = logging.getLogger(__name__)

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 16 * 1024 * 1024
TEXT, BINARY, CLOSE, PING, PONG = 1, 2, 8, 9, 10
FORBIDDEN, GONE, UNAVAILABLE = 4403, 4404, 4502


def viewer_close_code(upstream: int) -> int:
    """The code that closes the viewer's socket when the application's closed with `upstream`:
    kept where daphne can send it, else 1000 for a going-away and UNAVAILABLE for the rest
    (1006, the connection into the sandbox broke; 1009, 1011, …)."""
    if upstream == 1000 or 3000 <= upstream <= 4999:
        return upstream
    return 1000 if upstream == 1001 else UNAVAILABLE


class UpstreamClosed(Exception):
    def __init__(self, code: int = 1000) -> None:
        super().__init__(code)
        self.code = code


def _mask(payload: bytes, key: bytes) -> bytes:
    if not payload:
        return payload
    n = len(payload)
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(stream, "big")).to_bytes(n, "big")


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked client frame (RFC 6455 §5.2)."""
    key = os.urandom(4)
    n = len(payload)
    if n < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return header + key + _mask(payload, key)


class Upstream:
    """A websocket client over an already connected stream (into the sandbox)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.subprotocol: str | None = None

    @classmethod
    async def open(cls, sock, *, port: int, target: str, subprotocols: list[str]) -> Upstream:
        reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
        upstream = cls(reader, writer)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {target} HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            f"Origin: http://127.0.0.1:{port}",
        ]
        if subprotocols:
            lines.append(f"Sec-WebSocket-Protocol: {', '.join(subprotocols)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode("latin-1")
        status, *header_lines = head.split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        # RFC 6455 fixes SHA-1 for the handshake's accept value; it protects nothing.
        digest = hashlib.sha1((key + GUID).encode(), usedforsecurity=False).digest()
        accept = base64.b64encode(digest).decode()
        if " 101 " not in status + " " or headers.get("sec-websocket-accept") != accept:
            writer.close()
            raise ConnectionError(f"the application refused the websocket: {status}")
        upstream.subprotocol = headers.get("sec-websocket-protocol") or None
        return upstream

    async def send(self, opcode: int, payload: bytes) -> None:
        self.writer.write(client_frame(opcode, payload))
        await self.writer.drain()

    async def _frame(self) -> tuple[bool, int, bytes]:
        b0, b1 = await self.reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", await self.reader.readexactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
        if n > MAX_MESSAGE:
            raise UpstreamClosed(1009)
        key = await self.reader.readexactly(4) if b1 & 0x80 else b""
        data = await self.reader.readexactly(n)
        return bool(b0 & 0x80), b0 & 0x0F, _mask(data, key) if key else data

    async def receive(self) -> tuple[int, bytes]:
        """The next whole data message (TEXT or BINARY); answers pings; raises UpstreamClosed."""
        parts: list[bytes] = []
        opcode = 0
        while True:
            try:
                fin, op, data = await self._frame()
            except (asyncio.IncompleteReadError, ConnectionError):
                raise UpstreamClosed(1006) from None
            if op == PING:
                await self.send(PONG, data)
            elif op == CLOSE:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1000
                raise UpstreamClosed(code)
            elif op == PONG:
                continue
            else:
                opcode = op or opcode
                parts.append(data)
                if sum(map(len, parts)) > MAX_MESSAGE:
                    raise UpstreamClosed(1009)
                if fin:
                    return opcode, b"".join(parts)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.send(CLOSE, struct.pack("!H", 1000))
        self.writer.close()


def _open_door(user, session_id: int):
    """(socket into the sandbox, preview port) for a member; None for anyone else; raises
    PreviewUnavailable when there is no preview to reach."""
    from sessions import preview as live
    from sessions.screenshots import preview_port

    try:
        session = access.get_visible_or_404(
            user, Session.objects.select_related("snapshot", "repository"), pk=session_id
        )
    except Http404:
        return None
    preview = live.session_preview(session)
    sandbox = live.live_sandbox(session)
    return live.open_preview(sandbox, preview), preview_port(preview)


class PreviewSocketConsumer(live_access.AccessWatch, AsyncWebsocketConsumer):
    upstream: Upstream | None = None
    pump: asyncio.Task | None = None

    async def connect(self) -> None:
        from sessions.preview import PreviewUnavailable

        kwargs = self.scope["url_route"]["kwargs"]
        user = self.scope.get("user") or AnonymousUser()
        if not user.is_authenticated:
            return await self._refuse(FORBIDDEN)
        try:
            door = await database_sync_to_async(_open_door)(user, int(kwargs["session_id"]))
        except PreviewUnavailable as exc:
            log.info("preview websocket of session %s: %s", kwargs["session_id"], exc)
            return await self._refuse(GONE if exc.status == 404 else UNAVAILABLE)
        if door is None:
            return await self._refuse(FORBIDDEN)
        sock, port = door
        query = self.scope.get("query_string", b"").decode("latin-1")
        target = "/" + kwargs["path"] + (f"?{query}" if query else "")
        try:
            self.upstream = await Upstream.open(
                sock, port=port, target=target, subprotocols=self.scope.get("subprotocols", [])
            )
        except (OSError, asyncio.IncompleteReadError):  # incl. ConnectionError, TimeoutError
            sock.close()
            return await self._refuse(UNAVAILABLE)
        await self.accept(subprotocol=self.upstream.subprotocol)
        self.pump = asyncio.ensure_future(self._relay_down())
        # Members only while it lasts, too: a member removed later is closed with 4403.
        session_id = int(kwargs["session_id"])
        await self.watch_access(
            user.pk, lambda: live_access.still_sees_session(user.pk, session_id), self._revoked
        )

    async def _revoked(self) -> None:
        # No longer a member (sessions.live_access): the link ends like a refused one.
        if self.pump is not None:
            self.pump.cancel()
        await self.close(code=FORBIDDEN)

    async def _refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def _relay_down(self) -> None:
        assert self.upstream is not None
        try:
            while True:
                opcode, data = await self.upstream.receive()
                if opcode == TEXT:
                    await self.send(text_data=data.decode("utf-8", "replace"))
                else:
                    await self.send(bytes_data=data)
        except UpstreamClosed as closed:
            await self.close(code=viewer_close_code(closed.code))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        if self.upstream is None:
            return
        if text_data is not None:
            await self.upstream.send(TEXT, text_data.encode())
        elif bytes_data is not None:
            await self.upstream.send(BINARY, bytes_data)

    async def disconnect(self, code: int) -> None:
        await self.unwatch_access()
        if self.pump is not None:
            self.pump.cancel()
        if self.upstream is not None:
            await self.upstream.close()
