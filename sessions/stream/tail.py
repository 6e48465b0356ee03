"""The newest events of a watched session, read once and encoded once for all its viewers in
this process (the websocket's live path; history pages are read from the table instead), and
the one reader that reads every watched session's new events together."""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from typing import Any

from channels.db import database_sync_to_async

from sessions.stream.read import FRAME_BYTES, PAGE_SIZE, Frame, events_frame, read_events_many

TAIL_EVENTS = 5000  # newest events kept encoded per watched session, per process ...
TAIL_BYTES = 8 * 1024 * 1024  # ... and at most this much of them


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

    frame_events = PAGE_SIZE  # the most events in one frame

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
        return await _reader().read(self)

    # How the process's TailReader reads a tail: `fetch` the next rows of several tails of
    # this kind in one query, `prepare` one tail's rows (both in the database thread), then
    # `absorb` them (in the event loop); absorb returns how many events arrived.

    @staticmethod
    def fetch(wanted: list[tuple[int, int]]) -> dict[int, list]:
        return read_events_many(wanted)

    def prepare(self, rows: list, after: int) -> Any:
        return rows

    def absorb(self, rows: list[tuple[int, str]]) -> int:
        for seq, part in rows:
            if seq == self.high + 1:  # always so: the log is a gap-free prefix
                self.parts.append(part)
                self.size += len(part)
        self._trim()
        return len(rows)

    def _trim(self) -> None:
        if len(self.parts) <= 2 * TAIL_EVENTS and self.size <= TAIL_BYTES:
            return
        drop = 0
        while drop < len(self.parts) - 1 and (
            len(self.parts) - drop > TAIL_EVENTS or self.size > TAIL_BYTES // 2
        ):
            self.size -= len(self.parts[drop])
            drop += 1
        del self.parts[:drop]
        self.first += drop

    def frame_after(self, after: int) -> Frame | None:
        """The frame of events after `after` (which must be at or past the tail's front)."""
        start = after + 1 - self.first
        if start < 0 or start >= len(self.parts):
            return None
        end, size = start, 0
        while end < len(self.parts) and end - start < self.frame_events and size < FRAME_BYTES:
            size += len(self.parts[end])
            end += 1
        key = (after + 1, self.first + end - 1)
        frame = self._frames.get(key)
        if frame is None:
            frame = self._frame(start, end, key)
            self._frames[key] = frame
            if len(self._frames) > 32:
                self._frames.popitem(last=False)
        return frame

    def _frame(self, start: int, end: int, key: tuple[int, int]) -> Frame:
        """The frame of parts[start:end], the events key[0]..key[1]."""
        return events_frame(self.parts[start:end], *key)


class TailReader:
    """Reads the next events of every tail of this process that wants some, together: one
    database call (one thread hop) and one query per kind of tail, however many sessions.

    With a read per session per notification, 100 watched sessions at 20 batches a second each
    are 2,000 queries a second queued on Channels' one database thread. Here a tail asks and
    waits; if no read is running one starts at once, else the tail goes in the next one, which
    starts when the running one ends. So a busy process reads in fewer, larger queries, and an
    idle one reads at once. A failure while preparing one tail's rows (rendering, say) fails
    that tail's read only; a database error fails the whole read (each viewer retries).
    """

    def __init__(self) -> None:
        self._wanted: dict[SessionTail, asyncio.Future[int]] = {}
        self._running: asyncio.Task | None = None

    async def read(self, tail: SessionTail) -> int:
        """Read `tail`'s next events (from its end) in the next read; how many arrived."""
        future = self._wanted.get(tail)
        if future is None:
            future = self._wanted[tail] = asyncio.get_running_loop().create_future()
        if self._running is None:
            self._running = asyncio.ensure_future(self._run())
        return await asyncio.shield(future)

    async def _run(self) -> None:
        wanted: dict[SessionTail, asyncio.Future[int]] = {}
        try:
            while self._wanted:
                wanted, self._wanted = self._wanted, {}
                tails = list(wanted)
                try:
                    prepared = await database_sync_to_async(_load)(tails, [t.high for t in tails])
                except Exception as exc:
                    prepared = [exc] * len(tails)
                for tail, outcome in zip(tails, prepared, strict=True):
                    if not isinstance(outcome, Exception):
                        try:
                            wanted[tail].set_result(tail.absorb(outcome))
                            continue
                        except Exception as exc:
                            outcome = exc
                    wanted[tail].set_exception(outcome)
                    wanted[tail].exception()  # retrieved: a waiting viewer has it raised
        finally:
            self._running = None
            for future in [*wanted.values(), *self._wanted.values()]:
                future.cancel()  # only if this was cancelled (the loop is ending)
            self._wanted.clear()


def _load(tails: list[SessionTail], afters: list[int]) -> list[Any]:
    """The rows of each tail after its `after`, prepared (or the exception preparing them
    raised), in the database thread: one query per kind of tail."""
    by_kind: dict[type[SessionTail], list[int]] = {}
    for i, tail in enumerate(tails):
        by_kind.setdefault(type(tail), []).append(i)
    prepared: list[Any] = [None] * len(tails)
    for kind, indexes in by_kind.items():
        rows = kind.fetch([(tails[i].session_id, afters[i]) for i in indexes])
        for i in indexes:
            try:
                prepared[i] = tails[i].prepare(rows[tails[i].session_id], afters[i])
            except Exception as exc:
                prepared[i] = exc
    return prepared


_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TailReader] = (
    weakref.WeakKeyDictionary()
)


def _reader() -> TailReader:
    loop = asyncio.get_running_loop()
    reader = _readers.get(loop)
    if reader is None:
        reader = _readers[loop] = TailReader()
    return reader


_tails: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[type, int], SessionTail]
] = weakref.WeakKeyDictionary()


def tail_attach(session_id: int, base: int, kind: type[SessionTail] = SessionTail) -> SessionTail:
    """The session's tail of this kind in this process (JSON: SessionTail; the page's HTML:
    sessions.stream.html_tail.HtmlTail), made starting after `base` if it has none."""
    tails = _tails.setdefault(asyncio.get_running_loop(), {})
    tail = tails.get((kind, session_id))
    if tail is None:
        tail = tails[kind, session_id] = kind(session_id, base)
    tail.viewers += 1
    return tail


def tail_of(session_id: int, kind: type[SessionTail] = SessionTail) -> SessionTail | None:
    """The session's tail of this kind in this process, if a viewer holds one."""
    return _tails.get(asyncio.get_running_loop(), {}).get((kind, session_id))


def tail_detach(tail: SessionTail) -> None:
    tail.viewers -= 1
    if tail.viewers <= 0:
        tails = _tails.get(asyncio.get_running_loop(), {})
        if tails.get((type(tail), tail.session_id)) is tail:
            del tails[type(tail), tail.session_id]
