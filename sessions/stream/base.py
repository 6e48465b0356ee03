"""What every websocket of a session shares: the close codes, refusing a connection, who the user
is, and sending a JSON frame. The membership check is sessions.live_access's (the one access
rule), re-checked while the socket is open through its AccessWatch.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth.models import AnonymousUser
from redis.exceptions import RedisError

from sessions import live_access

# Close codes. Daphne (autobahn) can send only 1000 and 3000-4999: any other code fails there
# and leaves the viewer's socket open and silent. So "try again", "server error" and "bad
# gateway" are 4503, 4500 and 4502 (not 1013, 1011 and 1014); the pages reconnect on those.
LAGGING = 4008  # the session stream: fell too far behind (after a `resync`)
BAD_INPUT = 4400
NOT_LOGGED_IN = 4401
FORBIDDEN = live_access.FORBIDDEN  # no such session or not a member (the same for both)
GONE = 4404  # no running sandbox
SERVER_ERROR = 4500
UNAVAILABLE = 4502  # the preview cannot be reached
TRY_AGAIN = 4503  # Redis or the database unreachable

# What the channel layer raises when Redis cannot be reached.
LAYER_ERRORS = (RedisError, OSError, ConnectionError, asyncio.TimeoutError)
REDIS_UNAVAILABLE = "Live updates are unavailable right now (Redis); reconnect shortly."

log = logging.getLogger(__name__)

NO_SUCH_SESSION = "This session does not exist or you are not a member of its repository."
NO_LONGER_MEMBER = "You are no longer a member of this session's repository."

TokenAuthenticator = Callable[[dict], Any]
_token_authenticators: list[TokenAuthenticator] = []


def register_token_authenticator(authenticate: TokenAuthenticator) -> None:
    """Add a way to find the user of a socket that has no browser session: `authenticate(scope)`
    (sync, run in a thread) returns the user or None. API tokens and stream tickets are the
    API's (api.tokens, a layer above), so the API registers theirs when it is ready."""
    if authenticate not in _token_authenticators:
        _token_authenticators.append(authenticate)


def scope_token_user(scope: dict):
    """The user a registered authenticator finds in `scope`, or None."""
    for authenticate in _token_authenticators:
        user = authenticate(scope)
        if user is not None:
            return user
    return None


class SessionSocket(live_access.AccessWatch, AsyncWebsocketConsumer):
    """Base of the websockets of one session (`session_id` in the route)."""

    # False: refusals carry only the code (the preview's socket speaks the app's protocol).
    speaks_json = True

    async def __call__(self, scope, receive, send) -> None:
        # Channels asks the layer for this socket's channel before the handshake is even
        # read; with Redis down that raised and daphne answered HTTP 500, which the page's
        # websocket does not retry. Refuse with 4503 instead: the page reconnects on it.
        self.channel_name = None
        try:
            await super().__call__(scope, receive, send)
        except LAYER_ERRORS as exc:
            if self.channel_name is not None:
                raise  # the layer failed later, not in the handshake
            log.warning("websocket %s refused: Redis unavailable (%s)", scope.get("path"), exc)
            await refuse_without_layer(
                receive, send, TRY_AGAIN, REDIS_UNAVAILABLE if self.speaks_json else None
            )

    @property
    def session_id(self) -> int:
        return int(self.scope["url_route"]["kwargs"]["session_id"])

    async def socket_user(self, *, tokens: bool = False):
        """The user: the browser session's (Channels' AuthMiddlewareStack); with `tokens`, else
        an API token (`Authorization: Bearer …`) or a stream ticket (`?ticket=`)."""
        user = self.scope.get("user") or AnonymousUser()
        if user.is_authenticated or not tokens:
            return user
        return await database_sync_to_async(scope_token_user)(self.scope) or AnonymousUser()

    async def refuse(self, code: int, message: str | None = None) -> None:
        """Accept, say why in one JSON `error` frame (a browser cannot read the reason of a
        refused handshake), close with `code`. Without a message only the code: the preview's
        socket speaks the application's protocol, not ours."""
        await self.accept()
        if message is not None:
            await self.send_json({"type": "error", "code": code, "message": message})
        await self.close(code=code)

    async def send_json(self, message: dict) -> None:
        await self.send(text_data=json.dumps(message))


async def refuse_without_layer(receive, send, code: int, message: str | None) -> None:
    """SessionSocket.refuse in plain ASGI, for a socket that has no channel (yet)."""
    if (await receive())["type"] != "websocket.connect":
        return  # the client left before the handshake
    await send({"type": "websocket.accept"})
    if message is not None:
        frame = {"type": "error", "code": code, "message": message}
        await send({"type": "websocket.send", "text": json.dumps(frame)})
    await send({"type": "websocket.close", "code": code})
