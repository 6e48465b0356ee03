"""Websockets of the live preview: `/sessions/<id>/preview/<path>` upgraded to a websocket is
relayed, message by message, to the same path of the application inside the sandbox (e.g. a dev
server's live reload, or the application's own websockets).

Members only, as for the HTTP preview (others are closed with 4403). The connection into the
sandbox is `Sandbox.connect_port`; the `websockets` library speaks the protocol over it (the
handshake, masked client frames, fragmented messages, ping/pong and close), as the client the
hand-written one was: no compression offered, no keepalive pings of its own.

Close codes: the application's own (1000 or 3000-4999); 4403 not a member; 4404 no running
sandbox (the link ended with it); 4502 the preview cannot be reached, or the connection into
the sandbox broke (e.g. the sandbox was stopped). Daphne can send only 1000 and 3000-4999
(sessions.stream.base), so any other code of the application's is mapped onto those.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.db import database_sync_to_async
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.frames import CloseCode

from sessions import live_access
from sessions.models import Session
from sessions.preview import PreviewUnavailable, live_sandbox, open_preview, session_preview
from sessions.screenshots import preview_port
from sessions.stream.base import FORBIDDEN, GONE, UNAVAILABLE, SessionSocket

log = logging.getLogger(__name__)

MAX_MESSAGE = 16 * 1024 * 1024
OPEN_SECONDS = 10  # the application's answer to the handshake
CLOSE_SECONDS = 2  # the application's answer to our close, when the viewer leaves


def viewer_close_code(upstream: int) -> int:
    """The code that closes the viewer's socket when the application's closed with `upstream`:
    kept where daphne can send it, else 1000 for a going-away and UNAVAILABLE for the rest
    (1006, the connection into the sandbox broke; 1009, 1011, …)."""
    if upstream == 1000 or 3000 <= upstream <= 4999:
        return upstream
    return 1000 if upstream == 1001 else UNAVAILABLE


def upstream_close_code(closed: ConnectionClosed) -> int:
    """The code the application closed with: 1006 when the connection broke without a close
    frame, 1000 for a close frame without a code."""
    if closed.rcvd is None:
        return CloseCode.ABNORMAL_CLOSURE
    if closed.rcvd.code == CloseCode.NO_STATUS_RCVD:
        return CloseCode.NORMAL_CLOSURE
    return closed.rcvd.code


async def open_upstream(sock, *, port: int, target: str, subprotocols: list[str]):
    """A websocket client over `sock`, already connected into the sandbox, to `target` (path and
    query) of the application on `port`. Raises OSError or InvalidHandshake when refused."""
    return await connect(
        f"ws://127.0.0.1:{port}{target}",
        sock=sock,
        origin=f"http://127.0.0.1:{port}",
        subprotocols=subprotocols or None,
        compression=None,
        user_agent_header=None,
        open_timeout=OPEN_SECONDS,
        ping_interval=None,
        close_timeout=CLOSE_SECONDS,
        max_size=MAX_MESSAGE,
    )


def _open_door(user, session_id: int):
    """(socket into the sandbox, preview port) for a member; None for anyone else; raises
    PreviewUnavailable when there is no preview to reach."""
    session = live_access.seen_session(
        user, session_id, Session.objects.select_related("snapshot", "repository")
    )
    if session is None:
        return None
    preview = session_preview(session)
    sandbox = live_sandbox(session)
    return open_preview(sandbox, preview), preview_port(preview)


class PreviewSocketConsumer(SessionSocket):
    speaks_json = False
    upstream: ClientConnection | None = None
    pump: asyncio.Task | None = None

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        user = await self.socket_user()
        if not user.is_authenticated:
            return await self.refuse(FORBIDDEN)
        try:
            door = await database_sync_to_async(_open_door)(user, self.session_id)
        except PreviewUnavailable as exc:
            log.info("preview websocket of session %s: %s", self.session_id, exc)
            return await self.refuse(GONE if exc.status == 404 else UNAVAILABLE)
        if door is None:
            return await self.refuse(FORBIDDEN)
        sock, port = door
        query = self.scope.get("query_string", b"").decode("latin-1")
        target = "/" + kwargs["path"] + (f"?{query}" if query else "")
        try:
            self.upstream = await open_upstream(
                sock, port=port, target=target, subprotocols=self.scope.get("subprotocols", [])
            )
        except (OSError, InvalidHandshake, ValueError) as exc:  # OSError: incl. TimeoutError
            log.info("preview websocket of session %s refused: %s", self.session_id, exc)
            sock.close()
            return await self.refuse(UNAVAILABLE)
        await self.accept(subprotocol=self.upstream.subprotocol)
        self.pump = asyncio.ensure_future(self._relay_down())
        # Members only while it lasts, too: a member removed later is closed with 4403.
        session_id = self.session_id
        await self.watch_access(
            user.pk, lambda: live_access.still_sees_session(user.pk, session_id), self._revoked
        )

    async def _revoked(self) -> None:
        # No longer a member (sessions.live_access): the link ends like a refused one.
        if self.pump is not None:
            self.pump.cancel()
        await self.close(code=FORBIDDEN)

    async def _relay_down(self) -> None:
        assert self.upstream is not None
        try:
            while True:
                message = await self.upstream.recv()
                if isinstance(message, str):
                    await self.send(text_data=message)
                else:
                    await self.send(bytes_data=message)
        except ConnectionClosed as closed:
            await self.close(code=viewer_close_code(upstream_close_code(closed)))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        if self.upstream is None:
            return
        # A message after the application closed is dropped: the pump closes the viewer.
        with contextlib.suppress(ConnectionClosed):
            if text_data is not None:
                await self.upstream.send(text_data)
            elif bytes_data is not None:
                await self.upstream.send(bytes_data)

    async def disconnect(self, code: int) -> None:
        await self.unwatch_access()
        if self.pump is not None:
            self.pump.cancel()
        if self.upstream is not None:
            await self.upstream.close()
