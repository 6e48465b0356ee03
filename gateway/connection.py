"""HTTP/1.1 over one client connection (TCP or the Unix socket), spoken with h11: requests in
(keep-alive), responses out, a streamed body written only as fast as the client reads it
(`drain` waits while the socket's send buffer is full, so the handler waits before it reads
the next upstream chunk)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import h11

log = logging.getLogger("gateway")

# Anthropic accepts request bodies up to 32 MB; a larger one is refused before it is read.
MAX_REQUEST_BYTES = 32 * 1024 * 1024
READ_SIZE = 64 * 1024
# A keep-alive connection idle this long (or a request this slow to arrive) is closed.
IDLE_SECONDS = 300


class ClientGone(Exception):
    """The client closed its connection before the response was complete."""


@dataclass
class Request:
    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes


class Responder:
    """How a handler answers one request: `start`, any number of `send`, then `end`."""

    def __init__(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, *, head: bool = False
    ) -> None:
        self._conn, self._writer = conn, writer
        self.started = False
        self._head = head  # a HEAD request: headers only, whatever the handler sends

    async def _write(self, event: h11.Event) -> None:
        data = self._conn.send(event)
        if data:
            if self._writer.is_closing():
                raise ClientGone
            self._writer.write(data)
            try:
                await self._writer.drain()
            except (ConnectionError, OSError):
                raise ClientGone from None

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.started = True
        await self._write(h11.Response(status_code=status, headers=headers))

    async def send(self, data: bytes) -> None:
        if data and not self._head:
            await self._write(h11.Data(data=data))

    async def end(self) -> None:
        await self._write(h11.EndOfMessage())

    async def whole(self, status: int, content_type: str, body: bytes) -> None:
        await self.start(
            status, [("content-type", content_type), ("content-length", str(len(body)))]
        )
        await self.send(body)
        await self.end()


Handler = Callable[[Request, Responder], Awaitable[None]]


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Event:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        data = await asyncio.wait_for(reader.read(READ_SIZE), IDLE_SECONDS)
        conn.receive_data(data)  # b"" means the client closed: h11 then reports it


async def _read_request(
    conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Request | None:
    event = await _next_event(conn, reader)
    if not isinstance(event, h11.Request):
        return None  # ConnectionClosed between requests
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
    length = headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_REQUEST_BYTES:
        raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
    if conn.client_is_waiting_for_100_continue:
        writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
    body = bytearray()
    while True:
        part = await _next_event(conn, reader)
        if isinstance(part, h11.Data):
            body += part.data
            if len(body) > MAX_REQUEST_BYTES:
                raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
        elif isinstance(part, h11.EndOfMessage):
            break
        else:
            return None
    target = event.target.decode("latin-1")
    path, _, query = target.partition("?")
    return Request(event.method.decode("ascii"), path, query, headers, bytes(body))


async def serve_connection(
    handler: Handler, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Answer requests on this connection until the client closes it (or must close)."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
    try:
        while True:
            try:
                request = await _read_request(conn, reader, writer)
            except h11.RemoteProtocolError as exc:
                await _refuse(conn, writer, exc.error_status_hint, str(exc))
                return
            except (TimeoutError, ConnectionError, OSError):
                return
            if request is None:
                return
            responder = Responder(conn, writer, head=request.method == "HEAD")
            try:
                await handler(request, responder)
            except ClientGone:
                return
            except Exception:
                log.exception("gateway: a request failed")
                if not responder.started:
                    await _refuse(conn, writer, 500, "the model gateway failed; see its log")
                return
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def _refuse(conn: h11.Connection, writer: asyncio.StreamWriter, status: int, why: str):
    if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return
    body = why.encode()
    headers = [("content-type", "text/plain"), ("content-length", str(len(body)))]
    headers.append(("connection", "close"))
    try:
        writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
    except (h11.LocalProtocolError, ConnectionError, OSError):
        pass
