"""The web terminal's websocket: `ws/sessions/<id>/terminal/` (the shared terminal itself, its
shell and hand edits, is sessions.terminal).

Every member of the session's repository who connects sees the same terminal; only members
whose role may prompt the session (engineers and admins) can type or resize it.

Wire format
-----------
client -> server, JSON text frames:
``{"type": "input", "data": "ls\\r"}``        keystrokes (typists only)
``{"type": "resize", "cols": 120, "rows": 40}``  (typists only; the last resize wins)
``{"type": "commit"}``                      record hand edits in the diff now (typists only)

server -> client:
binary frames   the terminal's output bytes, verbatim. The page hands them to xterm.js, which
                interprets escape sequences on its own canvas; output is never put into the
                page as HTML, so nothing the sandbox prints can inject markup or script.
``{"type": "hello", "can_type": bool, "cols": n, "rows": n}``
``{"type": "error", "code": 4403, "message": "..."}``  (e.g. a viewer tried to type)
``{"type": "role", "can_type": bool, "message": "..."}``  the user's role changed while connected
``{"type": "recorded", "files": n, "commit": "..."}``   hand edits went into the diff
``{"type": "closed", "reason": "..."}``  then the socket closes

Close codes (sessions.stream.base): 4401 not logged in; 4403 no such session or not a member
(the same for both), or no longer a member (membership and role are re-checked while connected:
sessions.live_access); 4404 no running sandbox (a viewer's terminal does not restore a reaped
sandbox; an engineer's does, from the session's own snapshot); 4408 closed for idleness;
1000 the shell exited.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

from channels.db import database_sync_to_async

from accounts import access, roles
from sessions import live_access
from sessions.models import Session
from sessions.stream.base import (
    BAD_INPUT,
    FORBIDDEN,
    GONE,
    NO_LONGER_MEMBER,
    NO_SUCH_SESSION,
    NOT_LOGGED_IN,
    SERVER_ERROR,
    SessionSocket,
)
from sessions.terminal import SharedTerminal, shared_terminal
from snapshots.sandbox import SandboxError, SandboxGone

MAX_INPUT = 16 * 1024  # characters per input frame (a paste)
# Input re-reads the typist's role when its last check is older than this (besides the
# re-checks sessions.live_access makes at once on a change and on its heartbeat).
INPUT_RECHECK_SECONDS = 1.0
CANNOT_TYPE = "You can watch this terminal; typing needs the engineer role on this repository."
# Typing is what an engineer does to a session: the role check of prompting it.
TYPE_PERMISSION = roles.PROMPT_SESSION


def _membership(user, session_id: int) -> tuple[bool, bool] | None:
    """(visible, may type) or None when the user may not see the session."""
    session = live_access.seen_session(
        user, session_id, Session.objects.select_related("repository")
    )
    if session is None:
        return None
    return True, access.has_repo_permission(user, session.repository, TYPE_PERMISSION)


def _current_membership(user_id: int, session_id: int) -> tuple[bool, bool] | None:
    """`_membership` of the user as the database has them now (None once deactivated)."""
    user = live_access.current_user(user_id)
    return _membership(user, session_id) if user is not None else None


def _size(value, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value)))
    except (TypeError, ValueError):
        return default


class TerminalConsumer(SessionSocket):
    terminal: SharedTerminal | None = None
    role_checked_at = 0.0

    async def connect(self) -> None:
        self.terminal = None
        self._ended = False
        self.user = await self.socket_user()
        if not self.user.is_authenticated:
            return await self.refuse(NOT_LOGGED_IN, "Log in to use the terminal.")
        found = await database_sync_to_async(_membership)(self.user, self.session_id)
        if found is None:
            return await self.refuse(FORBIDDEN, NO_SUCH_SESSION)
        self.can_type = found[1]
        self.role_checked_at = time.monotonic()
        try:
            self.terminal = await shared_terminal(self.session_id, self.user, self.can_type)
        except SandboxGone:
            return await self.refuse(
                GONE,
                "The session's sandbox is not running; an engineer opening the terminal (or the "
                "next prompt) starts it again.",
            )
        except SandboxError as exc:
            return await self.refuse(GONE, f"The terminal could not start: {exc}")
        await self.accept()
        self.terminal.viewers.add(self)
        await self.watch_access(self.user.pk, self._still_member, self._revoked)
        await self.send_json(
            {
                "type": "hello",
                "can_type": self.can_type,
                "cols": self.terminal.cols,
                "rows": self.terminal.rows,
            }
        )
        if self.terminal.scrollback:
            await self.send(bytes_data=bytes(self.terminal.scrollback))

    # Access, re-checked while connected (sessions.live_access): a member removed is closed;
    # one whose role no longer allows typing keeps watching and types no more.

    def _still_member(self) -> bool:
        found = _current_membership(self.user.pk, self.session_id)
        self._fresh_can_type = bool(found and found[1])
        return found is not None

    async def recheck_access(self) -> bool:
        self._fresh_can_type = self.can_type  # unchanged if the check could not run
        allowed = await super().recheck_access()
        self.role_checked_at = time.monotonic()
        if allowed and self._fresh_can_type != self.can_type:
            self.can_type = self._fresh_can_type
            message = "You can type in this terminal." if self.can_type else CANNOT_TYPE
            await self.send_json({"type": "role", "can_type": self.can_type, "message": message})
        return allowed

    async def _revoked(self) -> None:
        self.can_type = False
        if self.terminal is not None:
            self.terminal.viewers.discard(self)  # no more of its output
        await self.send_json({"type": "error", "code": FORBIDDEN, "message": NO_LONGER_MEMBER})
        await self.end("access revoked", FORBIDDEN)

    def push(self, chunk: bytes) -> None:
        asyncio.ensure_future(self._push(chunk))

    async def _push(self, chunk: bytes) -> None:
        with contextlib.suppress(Exception):  # the socket closed meanwhile
            await self.send(bytes_data=chunk)

    async def end(self, reason: str, code: int) -> None:
        if self._ended:
            return
        self._ended = True
        with contextlib.suppress(Exception):
            await self.send_json({"type": "closed", "reason": reason})
            await self.close(code=code)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        terminal = self.terminal
        if terminal is None or terminal.closed:
            return
        try:
            message = json.loads(text_data or "")
            kind = message["type"]
        except (ValueError, KeyError, TypeError):
            return await self.send_json(
                {"type": "error", "code": BAD_INPUT, "message": "Frames are JSON with a `type`."}
            )
        if kind not in {"input", "resize", "commit"}:
            return
        stale = time.monotonic() - self.role_checked_at > INPUT_RECHECK_SECONDS
        if self.can_type and stale and not await self.recheck_access():
            return
        if not self.can_type:
            return await self.send_json(
                {"type": "error", "code": FORBIDDEN, "message": CANNOT_TYPE}
            )
        if kind == "input":
            data = message.get("data")
            if isinstance(data, str) and data:
                await terminal.type(self.user, data[:MAX_INPUT])
        elif kind == "resize":
            cols = _size(message.get("cols"), terminal.cols, 10, 500)
            rows = _size(message.get("rows"), terminal.rows, 4, 200)
            await terminal.resize(cols, rows)
        else:
            try:
                outcome = await terminal.record_edits()
            except SandboxError as exc:
                return await self.send_json(
                    {"type": "error", "code": SERVER_ERROR, "message": str(exc)}
                )
            await self.send_json({"type": "recorded", **outcome})

    async def disconnect(self, code: int) -> None:
        await self.unwatch_access()
        terminal = self.terminal
        if terminal is None:
            return
        terminal.viewers.discard(self)
        if not terminal.viewers and not terminal.closed:
            await terminal.close("its last viewer left")
