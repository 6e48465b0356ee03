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
    `payload` is the stored JSON (PostgreSQL may reorder its keys); `created_at` is ISO 8601
    in UTC, e.g. "2026-01-02T10:11:12.5+00:00".
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
(SessionTail). A notification only raises the seq the sender aims for; nothing is queued per
viewer. The sender writes only while the socket drains (SocketProbe): a slow viewer stops being
read for, so its memory stays bounded, and past MAX_LAG / STALL_SECONDS it is told to resync.
Without notifications (lost, or Redis down) the sender still re-reads the log every POLL_SECONDS.

HTML (`?format=html`, the session page's htmx websocket extension): event frames are the
page's own `<li>` items appended out of band (sessions.rendering.live_fragment, the same HTML
the page renders), presence is the `#presence` list swapped out of band; `hello` is not sent,
and `resync` / `error` stay JSON (htmx ignores them; the page reconnects with its last seq on
4008). HTML frames are rendered per connection (HTML_PAGE events per frame), not shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth.models import AnonymousUser
from django.db import DatabaseError
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils.html import format_html, format_html_join
from redis.exceptions import RedisError

from sessions import live_access, presence
from sessions.events import group_name, parse_after
from sessions.models import Event

log = logging.getLogger(__name__)

PAGE_SIZE = 1000  # rows per database read
HTML_PAGE = 200  # events per HTML frame (rendering templates costs more than JSON)
TAIL_EVENTS = 5000  # newest events kept encoded per watched session, per process ...
TAIL_BYTES = 8 * 1024 * 1024  # ... and at most this much of them
FRAME_BYTES = 256 * 1024  # a page is cut into frames of about this size
MAX_LAG = 5000  # a caught-up viewer this many events behind, with its socket full, resyncs
STALL_SECONDS = 10.0  # a socket that does not drain for this long resyncs
POLL_SECONDS = 5.0  # the log is re-read this often without a notification (lost wake-ups)

# Daphne (autobahn) can send only 1000 and 3000-4999, so "try again" and "server error" are
# 4503 and 4500 (not 1013 and 1011); the page reconnects on both, as on 4008.
BAD_INPUT, NOT_LOGGED_IN, FORBIDDEN, LAGGING, TRY_AGAIN = 4400, 4401, 4403, 4008, 4503
SERVER_ERROR = 4500
NO_SUCH_SESSION = "This session does not exist or you are not a member of its repository."
NO_LONGER_MEMBER = "You are no longer a member of this session's repository."
_LAYER_ERRORS = (RedisError, OSError, ConnectionError, asyncio.TimeoutError)


@dataclass(frozen=True)
class Frame:
    """An encoded `events` frame holding seqs first..last."""

    text: str
    first: int
    last: int


@functools.cache
def _kind_json(kind: str) -> str:
    return json.dumps(kind)


_OFFSET = re.compile(r"[+-]\d\d$")


def _iso(created_at: str) -> str:
    """The database's text of a timestamp as ISO 8601: PostgreSQL gives
    "2026-01-02 10:11:12.5+00" (the connection is in UTC), SQLite "2026-01-02 10:11:12.5"."""
    text = created_at.replace(" ", "T", 1)
    if _OFFSET.search(text):
        return text + ":00"
    return text if text[19:].count("+") or text[19:].count("-") else text + "+00:00"


def read_events(session_id: int, after: int, limit: int = PAGE_SIZE) -> list[tuple[int, str]]:
    """Up to `limit` events after `after`, each as (seq, its JSON object as text).

    Payload and time are taken as the database's text and spliced in: one query and some
    string formatting per page, not a JSON decode and re-encode (and a timestamp parse) of
    every row. Seqs are gap-free, so the page is asked for as the range after..after+limit:
    without it PostgreSQL, before it has statistics on freshly appended rows, may cast every
    remaining row of the session to text before sorting out the first `limit`.
    """
    rows = _event_rows(session_id, after, limit, bounded=True)
    if not rows:  # nothing in the range; look past it in case events were ever removed
        rows = _event_rows(session_id, after, limit, bounded=False)
    return [
        (
            seq,
            f'{{"seq":{seq},"kind":{_kind_json(kind)},"payload":{payload},'
            f'"created_at":"{_iso(created)}"}}',
        )
        for seq, kind, payload, created in rows
    ]


def _event_rows(session_id: int, after: int, limit: int, *, bounded: bool) -> list[tuple]:
    events = Event.objects.filter(session_id=session_id, seq__gt=after)
    if bounded:
        events = events.filter(seq__lte=after + limit)
    return list(
        events.order_by("seq")
        .annotate(
            payload_json=Cast("payload", output_field=TextField()),
            created_text=Cast("created_at", output_field=TextField()),
        )
        .values_list("seq", "kind", "payload_json", "created_text")[:limit]
    )


def frames_of(parts: list[tuple[int, str]]) -> list[Frame]:
    """Consecutive encoded events cut into frames of about FRAME_BYTES."""
    frames: list[Frame] = []
    start = size = 0
    for i, (_, part) in enumerate(parts):
        size += len(part)
        if size >= FRAME_BYTES or i == len(parts) - 1:
            chunk = parts[start : i + 1]
            frames.append(_frame([p for _, p in chunk], chunk[0][0], chunk[-1][0]))
            start, size = i + 1, 0
    return frames


def _frame(parts: list[str], first: int, last: int) -> Frame:
    return Frame('{"type":"events","events":[' + ",".join(parts) + "]}", first, last)


class SessionTail:
    """The newest events of one session, read once and encoded once for all its viewers in this
    process.

    Live viewers stand at (nearly) the same seq, but under load they drift apart by a frame or
    two; reading "events after my seq" per viewer then costs one query per viewer per
    notification. The tail is read by one viewer at a time (single flight), always from its own
    end, so a notification costs one query whatever the viewers' positions; each viewer slices
    its frame out of it. Events are immutable and the tail only grows at the end (its front is
    trimmed to TAIL_EVENTS), so slicing cannot reorder or repeat anything. A viewer behind the
    tail's front reads history pages from the table instead.
    """

    def __init__(self, session_id: int, base: int) -> None:
        self.session_id = session_id
        self.first = base + 1  # seq of parts[0]
        self.parts: list[str] = []
        self.size = 0  # characters held in parts
        self.viewers = 0
        self.read_at = 0.0  # loop time of the last read
        self._reading: asyncio.Future[int] | None = None
        self._frames: OrderedDict[tuple[int, int], Frame] = OrderedDict()

    @property
    def high(self) -> int:
        return self.first + len(self.parts) - 1

    async def read_more(self) -> int:
        """Append the next page of the log; returns how many events arrived (0: none yet).
        Joins a read already in flight instead of starting a second one."""
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read())
        reading = self._reading
        try:
            return await asyncio.shield(reading)
        finally:
            if reading.done() and self._reading is reading:
                self._reading = None

    async def _read(self) -> int:
        self.read_at = asyncio.get_running_loop().time()
        rows = await database_sync_to_async(read_events)(self.session_id, self.high)
        for seq, part in rows:
            if seq == self.high + 1:  # always so: the log is a gap-free prefix
                self.parts.append(part)
                self.size += len(part)
        if len(self.parts) > 2 * TAIL_EVENTS or self.size > TAIL_BYTES:
            drop = 0
            while drop < len(self.parts) - 1 and (
                len(self.parts) - drop > TAIL_EVENTS or self.size > TAIL_BYTES // 2
            ):
                self.size -= len(self.parts[drop])
                drop += 1
            del self.parts[:drop]
            self.first += drop
        return len(rows)

    def frame_after(self, after: int) -> Frame | None:
        """The frame of events after `after` (which must be at or past the tail's front)."""
        start = after + 1 - self.first
        if start < 0 or start >= len(self.parts):
            return None
        end, size = start, 0
        while end < len(self.parts) and end - start < PAGE_SIZE and size < FRAME_BYTES:
            size += len(self.parts[end])
            end += 1
        key = (after + 1, self.first + end - 1)
        frame = self._frames.get(key)
        if frame is None:
            frame = _frame(self.parts[start:end], *key)
            self._frames[key] = frame
            if len(self._frames) > 32:
                self._frames.popitem(last=False)
        return frame


_tails: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, SessionTail]] = (
    weakref.WeakKeyDictionary()
)


def tail_attach(session_id: int, base: int) -> SessionTail:
    """The session's tail in this process (made, starting after `base`, if it has none)."""
    tails = _tails.setdefault(asyncio.get_running_loop(), {})
    tail = tails.get(session_id)
    if tail is None:
        tail = tails[session_id] = SessionTail(session_id, base)
    tail.viewers += 1
    return tail


def tail_detach(tail: SessionTail) -> None:
    tail.viewers -= 1
    if tail.viewers <= 0:
        tails = _tails.get(asyncio.get_running_loop(), {})
        if tails.get(tail.session_id) is tail:
            del tails[tail.session_id]


class SocketProbe:
    """What ASGI does not tell a consumer: whether this connection's output is backed up.

    ASGI has no backpressure: daphne's `send` hands the frame to Twisted, which buffers without
    limit. Daphne's `send` is `partial(server.handle_reply, protocol)` (behind Channels' session
    middleware, at `send.__self__.real_send`); the protocol's transport has a streaming producer
    registered (the HTTP channel it was upgraded from), so Twisted keeps
    `transport.producerPaused` true while more than its bufferSize (64 KiB) waits to be
    written. `find` returns None on another server; the lag check then relies on `send`
    itself blocking (uvicorn's does).
    """

    def __init__(self, protocol) -> None:
        self.protocol = protocol
        self.transport = protocol.transport

    @classmethod
    def find(cls, send) -> SocketProbe | None:
        for _ in range(8):
            if isinstance(send, functools.partial):
                for arg in send.args:
                    transport = getattr(arg, "transport", None)
                    if (
                        transport is not None
                        and hasattr(transport, "producerPaused")
                        and getattr(transport, "producer", None) is not None
                    ):
                        return cls(arg)
                send = send.func
            elif hasattr(getattr(send, "__self__", None), "real_send"):
                send = send.__self__.real_send
            else:
                return None
        return None

    def full(self) -> bool:
        return bool(self.transport.producerPaused)

    def allow_slow_close(self, seconds: float) -> None:
        """Give the peer `seconds` (autobahn's default: 1) to answer our close frame, so a slow
        reader gets through what is queued, our resync included, before the socket drops."""
        if hasattr(self.protocol, "closeHandshakeTimeout"):
            self.protocol.closeHandshakeTimeout = seconds


def render_html_page(session_id: int, after: int) -> tuple[str, int]:
    """The page's HTML for up to HTML_PAGE events after `after`, and the last seq in it."""
    from sessions.rendering import live_fragment

    events = list(
        Event.objects.filter(
            session_id=session_id, seq__gt=after, seq__lte=after + HTML_PAGE
        ).order_by("seq")
    )
    if not events:
        events = list(
            Event.objects.filter(session_id=session_id, seq__gt=after).order_by("seq")[:HTML_PAGE]
        )
    return (live_fragment(events), events[-1].seq) if events else ("", after)


def presence_html(message: dict) -> str:
    items = format_html_join("", "<li>{}</li>", ((v["username"],) for v in message["viewers"]))
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


class SessionStreamConsumer(live_access.AccessWatch, AsyncWebsocketConsumer):
    """One viewer of one session. Two tasks per connection: the sender (the only writer to the
    socket: replay, live events, presence) and the heartbeat (presence, group membership); and
    the access watch (sessions.live_access), which closes it with 4403 once the viewer may no
    longer see the session."""

    async def connect(self) -> None:
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
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

        user = await self.authenticate()
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
        await self._send_json({"type": "error", "code": FORBIDDEN, "message": NO_LONGER_MEMBER})
        await self.close(code=FORBIDDEN)

    async def authenticate(self):
        """The viewer's user: the browser session's (Channels' AuthMiddlewareStack).

        Without one, an API token (`Authorization: Bearer …`) or a stream ticket (`?ticket=`).
        """
        user = self.scope.get("user") or AnonymousUser()
        if user.is_authenticated:
            return user
        from api.stream import scope_token_user

        return await database_sync_to_async(scope_token_user)(self.scope) or AnonymousUser()

    async def refuse(self, code: int, message: str) -> None:
        """Accept, say why in one JSON frame, close with `code` (a browser cannot read the
        reason of a refused handshake)."""
        await self.accept()
        await self.send(text_data=json.dumps({"type": "error", "code": code, "message": message}))
        await self.close(code=code)

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
                await self._send_json({**hello, "last_seq": last_seq})
            if roster.version > self._presence_version:
                self._presence_version = roster.version
                self._notices["presence"] = presence.presence_message(roster)
            if after > last_seq:
                self.sent = last_seq
                await self._send_json({"type": "resync", "after": last_seq, "reason": "ahead"})
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
        while this viewer is behind the session's tail, then frames sliced from the tail.
        `poll`: no notification came for POLL_SECONDS; look at the table anyway."""
        if self.html:
            return await self._drain_html()
        if self._tail is None:
            self._tail = tail_attach(self.session_id, max(self.sent, self.target))
        tail = self._tail
        loop = asyncio.get_running_loop()
        while True:
            await self._wait_writable()
            try:
                if self.sent + 1 < tail.first:
                    rows = await database_sync_to_async(read_events)(self.session_id, self.sent)
                    for frame in frames_of(rows):
                        await self._wait_writable()
                        await self.send(text_data=frame.text)
                        self.sent = frame.last
                    if not rows:
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

    async def _drain_html(self) -> None:
        while True:
            await self._wait_writable()
            try:
                html, last = await database_sync_to_async(render_html_page)(
                    self.session_id, self.sent
                )
            except DatabaseError as exc:
                log.warning("reading session %s failed (%s); retrying", self.session_id, exc)
                await asyncio.sleep(1)
                continue
            if last <= self.sent:
                return
            await self.send(text_data=html)
            self.sent = last

    async def _send_notices(self) -> None:
        while self._notices:
            _, notice = self._notices.popitem()
            if self.html and notice.get("type") == "presence":
                await self.send(text_data=presence_html(notice))
            else:
                await self._send_json(notice)

    async def _send_json(self, message: dict) -> None:
        await self.send(text_data=json.dumps(message))

    async def _resync_lagging(self) -> None:
        """Stop sending events; let what is queued drain (for at most STALL_SECONDS), then say
        where to resume and close with 4008. Nothing more is buffered meanwhile."""
        if self._probe is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + STALL_SECONDS
            while self._probe.full() and loop.time() < deadline:
                await asyncio.sleep(0.05)
            self._probe.allow_slow_close(STALL_SECONDS)
        await self._send_json({"type": "resync", "after": self.sent, "reason": "lagging"})
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
