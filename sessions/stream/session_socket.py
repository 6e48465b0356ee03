"""The live stream of a session: `ws/sessions/<id>/?after=<seq>`.

A viewer connects with the last `seq` it has (0, or no `after`, for everything) and receives,
exactly once and in order, every event after it: first the stored ones, then new ones as they
are appended. The channel layer only says "events up to seq N exist" (sessions.events.notify);
each connection pulls the rows from the Event table itself, so a lost notification, a Redis
restart or a reconnect never loses or repeats an event.

Wire format (JSON text frames, server to client)
------------------------------------------------
``{"type": "hello", "session": 7, "after": 120, "last_seq": 450}``
    First frame. `after` is where this stream starts; `last_seq` the newest seq at connect
    (so a client can show replay progress: events 121..450 are history, later ones are live).
``{"type": "events", "events": [{"seq", "kind", "payload", "created_at"}, ...]}``
    One or more events, consecutive seqs, ascending. Across the frames of one connection
    every seq appears once, with no gaps. Frames hold up to PAGE_SIZE events / ~FRAME_BYTES.
    Each event is sessions.stream.read's one JSON form of it (as the REST API and the SSE
    endpoint give it): `payload` is the stored JSON (PostgreSQL may reorder its keys);
    `created_at` is ISO 8601 in UTC, e.g. "2026-01-02T10:11:12.500000+00:00".
``{"type": "presence", "viewers": [{"id": 3, "username": "reviewer"}, ...], "version": n}``
    Who is watching (each user once, however many tabs); sent right after `hello` and when
    someone joins (`"joined": name`), leaves (`"left": name`) or drops out without saying
    goodbye. `version` increases with every change; only newer rosters are sent.
``{"type": "resync", "after": N, "reason": "ahead" | "lagging"}``
    "ahead": the `after` asked for is beyond the end of the log (the client's state is not
    this session's); treat N as the last event you have, events after N follow on this
    connection. "lagging": this viewer fell too far behind (MAX_LAG events, or its socket did
    not drain for STALL_SECONDS); the connection is then closed with 4008 and the client
    should reconnect with `?after=N` (N is the last seq sent). The server stops sending events,
    waits up to STALL_SECONDS for the socket to drain, then sends this; a client that stopped
    reading altogether may never see it, sees the connection drop, and does the same.
``{"type": "error", "code": 4400, "message": "..."}``
    Sent before the server closes the connection with that code.

Close codes: 4400 bad `after` (not a whole number, negative) or unsupported `format`;
4401 not logged in; 4403 no such session or not a member of its repository (the same for
both, so ids cannot be probed), also sent to an open connection whose user was removed from
the repository or deactivated (re-checked at once on the change, and every
INSPECT_WS_RECHECK_SECONDS); 4008 lagging (after a resync); 4503 live updates unavailable
(Redis or the database unreachable) and 4500 the stream failed — reconnect shortly. Messages
from the client are ignored.

How it keeps its promises
-------------------------
Each connection has one sender task, the only writer to its socket. It joins the group before
reading, then reads history pages (PAGE_SIZE rows, one query each) until it reaches the
session's shared tail, and from there slices frames out of the tail: the newest events of the
session, read once per notification and encoded once for every viewer in the process
(SessionTail; the process's TailReader reads every watched session's new events together, one
query per read however many sessions). A notification only raises the seq the sender aims
for; nothing is queued per viewer. The sender writes only while the socket drains
(SocketProbe): a slow viewer stops being read for, so its memory stays bounded, and past
MAX_LAG / STALL_SECONDS it is told to resync.
Without notifications (lost, or Redis down) the sender still re-reads the log every POLL_SECONDS.

HTML (`?format=html`, the session page's htmx websocket extension): event frames are the
page's own `<li>` items appended out of band (the same HTML the page renders) followed by the
side panels their events changed, presence is the `#presence` list swapped out of band; `hello`
is not sent, and `resync` / `error` stay JSON (htmx ignores them; the page reconnects with its
last seq on 4008). Live HTML frames are rendered once per session for every viewer in the
process (sessions.stream.html_tail.HtmlTail: each event and each panel update once, the same
bytes to every viewer at the same seq); history pages before the tail are rendered per viewer
(sessions.rendering.live_fragment).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.utils.html import format_html, format_html_join
from redis.exceptions import RedisError

from sessions import live_access, presence
from sessions.events import group_name
from sessions.rendering import live_fragment
from sessions.stream.base import (
    BAD_INPUT,
    FORBIDDEN,
    LAGGING,
    NO_LONGER_MEMBER,
    NO_SUCH_SESSION,
    NOT_LOGGED_IN,
    SERVER_ERROR,
    TRY_AGAIN,
    SessionSocket,
)
from sessions.stream.html_tail import HTML_PAGE, HtmlTail
from sessions.stream.probe import SocketProbe
from sessions.stream.read import events_page, frames_of, parse_after, read_events
from sessions.stream.tail import SessionTail, tail_attach, tail_detach

log = logging.getLogger(__name__)

MAX_LAG = 5000  # a caught-up viewer this many events behind, with its socket full, resyncs
STALL_SECONDS = 10.0  # a socket that does not drain for this long resyncs
POLL_SECONDS = 5.0  # the log is re-read this often without a notification (lost wake-ups)
_LAYER_ERRORS = (RedisError, OSError, ConnectionError, asyncio.TimeoutError)


def render_html_page(session_id: int, after: int, until: int) -> tuple[str, int]:
    """The page's HTML for up to HTML_PAGE events after `after` (none past `until`), and the
    last seq in it."""
    events = events_page(session_id, after, max(1, min(HTML_PAGE, until - after)))
    return (live_fragment(events), events[-1].seq) if events else ("", after)


def presence_html(message: dict) -> str:
    """The `#presence` list (the same for every viewer: who watches, no "you")."""
    return _presence_html(tuple(v["username"] for v in message["viewers"]))


@functools.lru_cache(maxsize=256)
def _presence_html(usernames: tuple[str, ...]) -> str:
    items = format_html_join("", "<li>{}</li>", ((name,) for name in usernames))
    return format_html(
        '<ul id="presence" class="presence" aria-labelledby="presence-title" aria-live="polite" '
        'hx-swap-oob="true">{}</ul>',
        items,
    )


class _Lagging(Exception):
    pass


def _parse_after(query: dict[str, list[str]]) -> tuple[int | None, str]:
    values = query.get("after")
    if not values:
        return 0, ""
    try:
        return parse_after(values[-1]), ""
    except ValueError as exc:
        return None, f"`after` {exc}"


class SessionStreamConsumer(SessionSocket):
    """One viewer of one session. Two tasks per connection: the sender (the only writer to the
    socket: replay, live events, presence) and the heartbeat (presence, group membership); and
    the access watch (sessions.live_access), which closes it with 4403 once the viewer may no
    longer see the session."""

    async def connect(self) -> None:
        self.group = group_name(self.session_id)
        self.sent = 0  # the last seq written to this socket
        self.target = 0  # the newest seq this connection knows exists
        self.viewer: presence.Viewer | None = None
        self._grouped = False
        self._tasks: list[asyncio.Task] = []
        self._tail: SessionTail | None = None
        self.html = False
        self._wake = asyncio.Event()
        self._notices: dict[str, dict] = {}  # latest broadcast of each type, sent by the sender
        self._presence_version = 0

        user = await self.socket_user(tokens=True)
        if not user.is_authenticated:
            return await self.refuse(NOT_LOGGED_IN, "Log in to watch this session.")
        query = parse_qs(
            self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True
        )
        after, problem = _parse_after(query)
        if after is None:
            return await self.refuse(BAD_INPUT, problem)
        fmt = query.get("format", ["json"])[-1]
        if fmt not in {"json", "html"}:
            return await self.refuse(BAD_INPUT, "`format` must be json (the default) or html.")
        self.html = fmt == "html"
        try:
            found = await database_sync_to_async(live_access.visible_session)(user, self.session_id)
        except DatabaseError as exc:
            log.warning(
                "viewer of session %s refused: database unavailable (%s)", self.session_id, exc
            )
            return await self.refuse(
                TRY_AGAIN, "The session log is unavailable right now (database); reconnect shortly."
            )
        if found is None:
            return await self.refuse(FORBIDDEN, NO_SUCH_SESSION)
        _, last_seq = found

        self.viewer = presence.Viewer(user.pk, user.get_username(), self.channel_name)
        try:
            # Join the group before reading anything: an event appended from here on is
            # notified to us, and one appended before is in the first page we read.
            await self.channel_layer.group_add(self.group, self.channel_name)
            self._grouped = True
            roster = await presence.presence_join(self.session_id, self.viewer)
            await presence.presence_announce(
                self.channel_layer,
                self.session_id,
                presence.presence_message(roster, joined=self.viewer.username),
            )
        except _LAYER_ERRORS as exc:
            log.warning(
                "viewer of session %s refused: Redis unavailable (%s)", self.session_id, exc
            )
            return await self.refuse(
                TRY_AGAIN, "Live updates are unavailable right now (Redis); reconnect shortly."
            )
        await self.accept()
        self._probe = SocketProbe.find(self.base_send)
        self._tasks = [
            asyncio.ensure_future(self._stream(after, last_seq, roster)),
            asyncio.ensure_future(self._heartbeat()),
        ]
        await self.watch_access(
            user.pk,
            functools.partial(live_access.still_sees_session, user.pk, self.session_id),
            self._revoked,
        )

    async def _revoked(self) -> None:
        # Stop the sender first: it is the socket's only writer until now.
        for task in self._tasks:
            task.cancel()
        await self.send_json({"type": "error", "code": FORBIDDEN, "message": NO_LONGER_MEMBER})
        await self.close(code=FORBIDDEN)

    async def disconnect(self, code: int) -> None:
        await self.unwatch_access()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):  # already logged
                await task
        if self._tail is not None:
            tail_detach(self._tail)
            self._tail = None
        if not self._grouped:
            return
        try:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            roster = await presence.presence_leave(self.session_id, self.viewer)
            await presence.presence_announce(
                self.channel_layer,
                self.session_id,
                presence.presence_message(roster, left=self.viewer.username),
            )
        except _LAYER_ERRORS as exc:  # the entry expires by itself after PRESENCE_TTL
            log.info(
                "viewer of session %s left while Redis was unavailable: %s", self.session_id, exc
            )

    async def receive(self, text_data=None, bytes_data=None) -> None:
        pass  # the stream is one-way; prompts and approvals go through their own endpoints

    # Channel layer messages. Both only record and wake the sender, so they never block the
    # dispatch loop (which would let notifications pile up in the layer).

    async def dispatch(self, message: dict) -> None:
        # Channels runs close_old_connections() on the one database thread before every
        # handler: for 50 viewers, 50 thread hops per notification, queued in front of the read
        # they are waiting for. These two handlers never touch the database (every read goes
        # through database_sync_to_async, which does that cleanup itself).
        if message["type"] == "events.available":
            return await self.events_available(message)
        if message["type"] == "broadcast.message":
            return await self.broadcast_message(message)
        return await super().dispatch(message)

    async def events_available(self, message: dict) -> None:
        seq = int(message["seq"])
        if seq > self.target:
            self.target = seq
            self._wake.set()

    async def broadcast_message(self, message: dict) -> None:
        notice = message["message"]
        kind = str(notice.get("type"))
        if kind == "presence":
            # Only a roster newer than the newest one this viewer has (broadcasts can arrive
            # out of order, and a newcomer already got the roster its own join produced).
            if notice.get("version", 0) <= self._presence_version:
                return
            self._presence_version = notice["version"]
        self._notices[kind] = notice
        self._wake.set()

    # The sender.

    async def _stream(self, after: int, last_seq: int, roster: presence.Roster) -> None:
        self.sent = after
        self.target = max(self.target, last_seq)
        self._live_from = last_seq  # once past this, the viewer is live and MAX_LAG applies
        try:
            if not self.html:
                hello = {"type": "hello", "session": self.session_id, "after": after}
                await self.send_json({**hello, "last_seq": last_seq})
            if roster.version > self._presence_version:
                self._presence_version = roster.version
                self._notices["presence"] = presence.presence_message(roster)
            if after > last_seq:
                self.sent = last_seq
                await self.send_json({"type": "resync", "after": last_seq, "reason": "ahead"})
            polled = False
            while True:
                self._wake.clear()
                await self._send_notices()
                await self._drain(poll=polled)
                await self._send_notices()
                polled = False
                if not self._wake.is_set():
                    try:
                        await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
                    except TimeoutError:
                        polled = True
        except _Lagging:
            log.info(
                "viewer %s of session %s is lagging at seq %s (newest %s); told to resync",
                self.viewer.username, self.session_id, self.sent, self.target,
            )  # fmt: skip
            await self._resync_lagging()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("stream of session %s failed", self.session_id)
            await self.close(code=SERVER_ERROR)

    async def _drain(self, poll: bool = False) -> None:
        """Send everything after self.sent that the log holds: history pages from the table
        while this viewer is behind the session's tail, then frames sliced from the tail (the
        JSON tail, or the HTML one: rendered once for every viewer of the session).
        `poll`: no notification came for POLL_SECONDS; look at the table anyway."""
        if self._tail is None:
            kind = HtmlTail if self.html else SessionTail
            self._tail = tail_attach(self.session_id, max(self.sent, self.target), kind)
        tail = self._tail
        loop = asyncio.get_running_loop()
        while True:
            await self._wait_writable()
            try:
                if self.sent + 1 < tail.first:
                    if not await self._send_history(tail.first - 1):
                        return
                    continue
                frame = tail.frame_after(self.sent)
                if frame is None:
                    stale = poll and loop.time() - tail.read_at >= POLL_SECONDS / 2
                    if tail.high >= self.target and not stale:
                        return
                    poll = False
                    if not await tail.read_more():
                        return
                    continue
            except DatabaseError as exc:  # a dropped connection: the next read reconnects
                log.warning("reading session %s failed (%s); retrying", self.session_id, exc)
                await asyncio.sleep(1)
                continue
            await self.send(text_data=frame.text)
            self.sent = frame.last

    async def _send_history(self, until: int) -> bool:
        """Send the next history page after self.sent (the tail starts after `until`); False
        when the table has nothing after it. HTML history is rendered for this viewer alone:
        it is where a late joiner or a reconnecting page catches up, not the live path."""
        if self.html:
            html, last = await database_sync_to_async(render_html_page)(
                self.session_id, self.sent, until
            )
            if last <= self.sent:
                return False
            await self.send(text_data=html)
            self.sent = last
            return True
        rows = await database_sync_to_async(read_events)(self.session_id, self.sent)
        for frame in frames_of(rows):
            await self._wait_writable()
            await self.send(text_data=frame.text)
            self.sent = frame.last
        return bool(rows)

    async def _send_notices(self) -> None:
        while self._notices:
            _, notice = self._notices.popitem()
            if self.html and notice.get("type") == "presence":
                await self.send(text_data=presence_html(notice))
            else:
                await self.send_json(notice)

    async def _resync_lagging(self) -> None:
        """Stop sending events; let what is queued drain (for at most STALL_SECONDS), then say
        where to resume and close with 4008. Nothing more is buffered meanwhile."""
        if self._probe is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + STALL_SECONDS
            while self._probe.full() and loop.time() < deadline:
                await asyncio.sleep(0.05)
            self._probe.allow_slow_close(STALL_SECONDS)
        await self.send_json({"type": "resync", "after": self.sent, "reason": "lagging"})
        await self.close(code=LAGGING)

    async def _wait_writable(self) -> None:
        """Return when the socket can take more; raise _Lagging when this viewer is too far
        behind. Memory per connection stays bounded: nothing is read while the socket is
        full, and a notification is only a number."""
        if self._probe is None:
            self._check_lag()  # without a probe, a slow socket shows as `send` blocking
            return
        if not self._probe.full():
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        delay = 0.0
        while self._probe.full():
            self._check_lag()
            if loop.time() - started > STALL_SECONDS:
                raise _Lagging
            await asyncio.sleep(delay)
            delay = min(0.05, delay * 2 or 0.001)

    def _check_lag(self) -> None:
        if self.sent >= self._live_from and self.target - self.sent > MAX_LAG:
            raise _Lagging

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(presence.HEARTBEAT_SECONDS)
            try:
                # Renews the group membership too: the core layer forgets groups after
                # group_expiry, and a restarted Redis has forgotten them already.
                await self.channel_layer.group_add(self.group, self.channel_name)
                roster = await presence.presence_refresh(self.session_id, self.viewer)
                if roster.dropped:
                    await presence.presence_announce(
                        self.channel_layer, self.session_id, presence.presence_message(roster)
                    )
            except _LAYER_ERRORS as exc:
                log.warning("heartbeat of a viewer of session %s failed: %s", self.session_id, exc)
