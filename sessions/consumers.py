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
``{"type": "presence", "viewers": [{"id": 3, "username": "reviewer"}, ...], "version": n}``
    Who is watching (each user once, however many tabs); sent right after `hello` and when
    someone joins (`"joined": name`), leaves (`"left": name`) or drops out without saying
    goodbye. `version` increases with every change; only newer rosters are sent.
``{"type": "resync", "after": N, "reason": "ahead" | "lagging"}``
    "ahead": the `after` asked for is beyond the end of the log (the client's state is not
    this session's); treat N as the last event you have, events after N follow on this
    connection. "lagging": this viewer fell too far behind (MAX_LAG events, or its socket did
    not drain for STALL_SECONDS); the connection is then closed with 4008 and the client
    should reconnect with `?after=N` (N is the last seq sent). A client that stopped reading
    altogether may not see this frame; it sees the connection drop and does the same.
``{"type": "error", "code": 4400, "message": "..."}``
    Sent before the server closes the connection with that code.

Close codes: 4400 bad `after` (not a whole number, negative) or unsupported `format`;
4401 not logged in; 4403 no such session or not a member of its repository (the same for
both, so ids cannot be probed); 4008 lagging (after a resync); 1013 live updates unavailable
(Redis unreachable) — reconnect shortly. Messages from the client are ignored.

HTML fragments (`?format=html`) are not served yet; the dashboard issue adds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth.models import AnonymousUser
from django.db import DatabaseError
from django.db.models import TextField
from django.db.models.functions import Cast
from django.http import Http404
from redis.exceptions import RedisError

from inspect_web import access
from sessions import presence
from sessions.events import group_name
from sessions.models import Event, Session

log = logging.getLogger(__name__)

PAGE_SIZE = 1000  # rows per database read
FRAME_BYTES = 256 * 1024  # a page is cut into frames of about this size
MAX_LAG = 5000  # a caught-up viewer this many events behind, with its socket full, resyncs
STALL_SECONDS = 10.0  # a socket that does not drain for this long resyncs
POLL_SECONDS = 5.0  # the log is re-read this often without a notification (lost wake-ups)
MAX_SEQ = 2**63 - 1

BAD_INPUT, NOT_LOGGED_IN, FORBIDDEN, LAGGING, TRY_AGAIN = 4400, 4401, 4403, 4008, 1013
NO_SUCH_SESSION = "This session does not exist or you are not a member of its repository."
_LAYER_ERRORS = (RedisError, OSError, ConnectionError, asyncio.TimeoutError)


@dataclass(frozen=True)
class Frame:
    text: str
    first: int
    last: int


@dataclass(frozen=True)
class Page:
    """Consecutive events after `after`, already encoded as frames."""

    after: int
    frames: tuple[Frame, ...]
    full: bool  # PAGE_SIZE rows: there may be more right after it
    size: int

    @property
    def last(self) -> int:
        return self.frames[-1].last if self.frames else self.after


@functools.cache
def _kind_json(kind: str) -> str:
    return json.dumps(kind)


def read_page(session_id: int, after: int, limit: int = PAGE_SIZE) -> Page:
    """Read up to `limit` events after `after` and encode them as frames.

    The payload is taken as the database's JSON text and spliced into the frame, so a page
    costs one query and one string join, not a decode and re-encode of every payload.
    """
    rows = (
        Event.objects.filter(session_id=session_id, seq__gt=after)
        .order_by("seq")
        .annotate(payload_json=Cast("payload", output_field=TextField()))
        .values_list("seq", "kind", "payload_json", "created_at")[:limit]
    )
    frames: list[Frame] = []
    parts: list[str] = []
    first = size = total = count = 0
    for seq, kind, payload, created_at in rows:
        part = (
            f'{{"seq":{seq},"kind":{_kind_json(kind)},"payload":{payload},'
            f'"created_at":"{created_at.isoformat()}"}}'
        )
        if not parts:
            first = seq
        parts.append(part)
        size += len(part)
        count += 1
        if size >= FRAME_BYTES:
            frames.append(_frame(parts, first, seq))
            total += size
            parts, size = [], 0
    if parts:
        frames.append(_frame(parts, first, first + len(parts) - 1))
        total += size
    return Page(after=after, frames=tuple(frames), full=count >= limit, size=total)


def _frame(parts: list[str], first: int, last: int) -> Frame:
    return Frame('{"type":"events","events":[' + ",".join(parts) + "]}", first, last)


class PageCache:
    """Pages shared by the viewers in this process.

    The viewers of a busy session stand at the same seq, so a notification makes all of them ask
    for the same page: one read and one encoding serve them all. A cached page is reused only
    while it still answers the question (it is full, or it reaches the seq the asker knows
    exists); otherwise it is read again. Pages are immutable (events are append-only), so
    sharing them cannot reorder or repeat anything.
    """

    def __init__(self, max_entries: int = 512, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, int], asyncio.Future[Page]] = OrderedDict()

    async def read(self, session_id: int, after: int, known: int) -> Page:
        key = (session_id, after)
        stale = None
        while True:
            entry = self._entries.get(key)
            fresh = entry is None or entry is stale
            if fresh:
                entry = asyncio.ensure_future(self._read(key))
                self._entries[key] = entry
                self._evict()
            else:
                self._entries.move_to_end(key)
            page = await asyncio.shield(entry)
            if fresh or page.full or (known > after and page.last >= known):
                return page
            stale = entry

    async def _read(self, key: tuple[int, int]) -> Page:
        try:
            return await database_sync_to_async(read_page)(*key)
        except BaseException:
            if self._entries.get(key) is asyncio.current_task():
                del self._entries[key]
            raise

    def _evict(self) -> None:
        total = sum(f.result().size for f in self._entries.values() if _done_ok(f))
        while len(self._entries) > self.max_entries or total > self.max_bytes:
            key, oldest = next(iter(self._entries.items()))
            if not oldest.done():
                break  # everything older is in flight; it is bounded by the number of readers
            del self._entries[key]
            if _done_ok(oldest):
                total -= oldest.result().size


def _done_ok(future: asyncio.Future) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


_caches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PageCache] = (
    weakref.WeakKeyDictionary()
)


def page_cache() -> PageCache:
    loop = asyncio.get_running_loop()
    cache = _caches.get(loop)
    if cache is None:
        cache = _caches[loop] = PageCache()
    return cache


def output_full_probe(send) -> Callable[[], bool] | None:
    """A function telling whether this connection's outgoing buffer is full, if the server
    exposes it; None otherwise.

    ASGI gives a consumer no backpressure: daphne's `send` hands the frame to Twisted, which
    buffers without limit. Daphne's `send` is `partial(server.handle_reply, protocol)`; the
    protocol's transport has a streaming producer registered (the HTTP channel it was upgraded
    from), so Twisted keeps `transport.producerPaused` true while more than its bufferSize
    (64 KiB) waits to be written. Behind Channels' session middleware the partial sits at
    `send.__self__.real_send`. On another server the probe is None and the lag check relies on
    `send` itself blocking (uvicorn's does).
    """
    for _ in range(8):
        if isinstance(send, functools.partial):
            for arg in send.args:
                transport = getattr(arg, "transport", None)
                if transport is not None and hasattr(transport, "producerPaused"):
                    if getattr(transport, "producer", None) is None:
                        return None
                    return lambda: bool(transport.producerPaused)
            send = send.func
        elif hasattr(getattr(send, "__self__", None), "real_send"):
            send = send.__self__.real_send
        else:
            return None
    return None


class _Lagging(Exception):
    pass


def _visible_session(user, session_id: int) -> tuple[int, int] | None:
    try:
        session = access.get_visible_or_404(
            user, Session.objects.only("id", "last_seq"), pk=session_id
        )
    except Http404:
        return None
    return session.pk, session.last_seq


def _parse_after(query: dict[str, list[str]]) -> tuple[int | None, str]:
    values = query.get("after")
    if not values:
        return 0, ""
    raw = values[-1]
    if not raw.isascii() or not raw.isdigit():
        shown = raw[:40]
        return None, f"`after` must be a whole number, 0 or more (your last seq), not {shown!r}"
    value = int(raw)
    if value > MAX_SEQ:
        return None, "`after` is larger than any seq can be"
    return value, ""


class SessionStreamConsumer(AsyncWebsocketConsumer):
    """One viewer of one session. Two tasks per connection: the sender (the only writer to the
    socket: replay, live events, presence) and the heartbeat (presence, group membership)."""

    async def connect(self) -> None:
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        self.group = group_name(self.session_id)
        self.sent = 0  # the last seq written to this socket
        self.target = 0  # the newest seq this connection knows exists
        self.viewer: presence.Viewer | None = None
        self._grouped = False
        self._tasks: list[asyncio.Task] = []
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
        if query.get("format", ["json"])[-1] != "json":
            return await self.refuse(
                BAD_INPUT, "Only JSON frames are served for now; leave out `format`."
            )
        found = await database_sync_to_async(_visible_session)(user, self.session_id)
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
        self._output_full = output_full_probe(self.base_send)
        self._tasks = [
            asyncio.ensure_future(self._stream(after, last_seq, roster)),
            asyncio.ensure_future(self._heartbeat()),
        ]

    async def authenticate(self):
        """The viewer's user: the browser session's (Channels' AuthMiddlewareStack).

        HOOK(api-tokens): API-token authentication (CLI, REST clients) goes here, in the later
        issue that adds tokens: read `Authorization: Bearer …` from self.scope["headers"] and
        return the token's user when the session cookie gave none.
        """
        return self.scope.get("user") or AnonymousUser()

    async def refuse(self, code: int, message: str) -> None:
        """Accept, say why in one JSON frame, close with `code` (a browser cannot read the
        reason of a refused handshake)."""
        await self.accept()
        await self.send(text_data=json.dumps({"type": "error", "code": code, "message": message}))
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):  # already logged
                await task
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
            hello = {"type": "hello", "session": self.session_id, "after": after}
            await self._send_json({**hello, "last_seq": last_seq})
            if roster.version > self._presence_version:
                self._presence_version = roster.version
                self._notices["presence"] = presence.presence_message(roster)
            if after > last_seq:
                self.sent = last_seq
                await self._send_json({"type": "resync", "after": last_seq, "reason": "ahead"})
            while True:
                self._wake.clear()
                await self._send_notices()
                await self._drain()
                await self._send_notices()
                if not self._wake.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
        except _Lagging:
            log.info(
                "viewer %s of session %s is lagging at seq %s (newest %s); told to resync",
                self.viewer.username, self.session_id, self.sent, self.target,
            )  # fmt: skip
            await self._send_json({"type": "resync", "after": self.sent, "reason": "lagging"})
            await self.close(code=LAGGING)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("stream of session %s failed", self.session_id)
            await self.close(code=1011)

    async def _drain(self) -> None:
        """Send everything after self.sent that the log holds, page by page."""
        cache = page_cache()
        while True:
            await self._wait_writable()
            try:
                page = await cache.read(self.session_id, self.sent, self.target)
            except DatabaseError as exc:  # a dropped connection: the next read reconnects
                log.warning("reading session %s failed (%s); retrying", self.session_id, exc)
                await asyncio.sleep(1)
                continue
            for frame in page.frames:
                if frame.last <= self.sent:
                    continue  # already sent (cannot happen with pages keyed by seq; cheap)
                await self._wait_writable()
                await self.send(text_data=frame.text)
                self.sent = frame.last
            if not page.frames or (not page.full and self.sent >= self.target):
                return
            await self._send_notices()

    async def _send_notices(self) -> None:
        while self._notices:
            _, notice = self._notices.popitem()
            await self._send_json(notice)

    async def _send_json(self, message: dict) -> None:
        await self.send(text_data=json.dumps(message))

    async def _wait_writable(self) -> None:
        """Return when the socket can take more; raise _Lagging when this viewer is too far
        behind. Memory per connection stays bounded: nothing is read while the socket is
        full, and a notification is only a number."""
        if self._output_full is None:
            self._check_lag()  # without a probe, a slow socket shows as `send` blocking
            return
        if not self._output_full():
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        delay = 0.0
        while self._output_full():
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
