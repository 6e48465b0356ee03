"""The read side of the event log: what every reader (the websocket, the SSE endpoint, the REST
API, the CLI) reads events with, and the one JSON form of an event.

An event is `serialize(event)`: {"seq", "kind", "payload", "created_at"}, `created_at` as
`datetime.isoformat()` prints it in UTC ("2026-01-02T10:11:12.500000+00:00", no fraction when
the microseconds are 0). Its text is `event_text(event)`, the standard library's encoding of
that (default separators, UTF-8 kept as is).

`read_events` is the fast path the live streams use: it takes the payload and the time as the
database's text and splices them in, one query and some string formatting per page instead of
a JSON decode and re-encode (and a timestamp parse) of every row (bench/stream.py measures it).
On PostgreSQL its text is byte for byte `event_text` of the same row (tests/sessions/stream/
test_one_encoding.py): jsonb prints a payload with the same separators and escapes as `json`,
and the time is printed as `isoformat` does. One difference is left, in the bytes and not in
the value: a float that Python writes with an exponent (5e-05) is stored by PostgreSQL as a
number and printed positionally (0.00005). On SQLite the stored payload text has non-ASCII
characters escaped; the value is the same.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Func, TextField
from django.db.models.functions import Cast

from sessions.models import Event

PAGE_SIZE = 1000  # rows per database read
FRAME_BYTES = 256 * 1024  # a page is cut into frames of about this size
# The largest seq a client may name (a PostgreSQL bigint).
MAX_SEQ = 2**63 - 1


def parse_after(raw: str) -> int:
    """The seq a reader (websocket `?after=`, SSE `Last-Event-ID` or `?after=`) says it
    has; ValueError says what is wrong with it, for the caller to name its own parameter."""
    if not raw.isascii() or not raw.isdigit():
        raise ValueError(f"must be a whole number, 0 or more (your last seq), not {raw[:40]!r}")
    if int(raw) > MAX_SEQ:
        raise ValueError("is larger than any seq can be")
    return int(raw)


def serialize(event: Event) -> dict[str, Any]:
    """An event as every reader gets it."""
    return {
        "seq": event.seq,
        "kind": event.kind,
        "payload": event.payload,
        "created_at": event.created_at.isoformat(),
    }


def event_text(event: Event) -> str:
    """The JSON text of an event: what `read_events` gives for it (see the module's note)."""
    return json.dumps(serialize(event), ensure_ascii=False)


def events_after(session_id: int, after: int, limit: int = PAGE_SIZE) -> list[Event]:
    """Up to `limit` events after `after`, ascending."""
    return list(_after(session_id, after, limit, bounded=False)[:limit])


def events_page(session_id: int, after: int, limit: int) -> list[Event]:
    """`events_after` for a live stream, asked for as a range as `read_events` does."""
    events = list(_after(session_id, after, limit, bounded=True)[:limit])
    return events or events_after(session_id, after, limit)


def _after(session_id: int, after: int, limit: int, *, bounded: bool):
    """The session's events after `after`, ascending; with `bounded`, only up to after+limit.

    Seqs are gap-free, so a page is asked for as the range after..after+limit: without it
    PostgreSQL, before it has statistics on freshly appended rows, may read (and for
    `read_events`, cast to text) every remaining row of the session before sorting out the
    first `limit`. An empty range is asked again unbounded, in case events were ever removed.
    """
    events = Event.objects.filter(session_id=session_id, seq__gt=after)
    if bounded:
        events = events.filter(seq__lte=after + limit)
    return events.order_by("seq")


@functools.cache
def _kind_json(kind: str) -> str:
    return json.dumps(kind)


class _TimeText(Func):
    """A timestamp as the database prints it in UTC, to six decimals or none: PostgreSQL's
    to_char "2026-01-02T10:11:12.500000" (always six), SQLite's stored text
    "2026-01-02 10:11:12.500000" (none when the microseconds are 0)."""

    function = "CAST"
    template = "CAST(%(expressions)s AS text)"
    output_field = TextField()

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template=_PG_TIME_TEXT, **extra)


_PG_TIME_TEXT = "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')"


def _iso(text: str) -> str:
    """`_TimeText` as `datetime.isoformat()` prints the same time in UTC."""
    if text.endswith(".000000"):
        text = text[:19]
    return f"{text[:10]}T{text[11:]}+00:00"


def read_events(session_id: int, after: int, limit: int = PAGE_SIZE) -> list[tuple[int, str]]:
    """Up to `limit` events after `after`, each as (seq, its JSON text), asked for as a range
    (`_after`)."""
    rows = _event_rows(session_id, after, limit, bounded=True)
    if not rows:
        rows = _event_rows(session_id, after, limit, bounded=False)
    return [_event_text(seq, kind, payload, created) for seq, kind, payload, created in rows]


def _event_text(seq: int, kind: str, payload: str, created: str) -> tuple[int, str]:
    return (
        seq,
        f'{{"seq": {seq}, "kind": {_kind_json(kind)}, "payload": {payload}, '
        f'"created_at": "{_iso(created)}"}}',
    )


def _event_rows(session_id: int, after: int, limit: int, *, bounded: bool) -> list[tuple]:
    return list(
        _after(session_id, after, limit, bounded=bounded)
        .annotate(
            payload_json=Cast("payload", output_field=TextField()),
            created_text=_TimeText("created_at"),
        )
        .values_list("seq", "kind", "payload_json", "created_text")[:limit]
    )


# Several sessions' next events in one query: the live tails of a process read together
# (sessions.stream.tail.TailReader). Each session's page is a range after..after+limit, as in
# `_after`; a session whose range is empty is asked again without the bound.
_MANY_BOUNDED = """
    SELECT w.session_id, {columns}
    FROM unnest(%s::bigint[], %s::bigint[]) AS w(session_id, after)
    JOIN {table} e ON e.session_id = w.session_id AND e.seq > w.after AND e.seq <= w.after + %s
    ORDER BY w.session_id, e.seq
"""
_MANY_UNBOUNDED = """
    SELECT w.session_id, {columns}
    FROM unnest(%s::bigint[], %s::bigint[]) AS w(session_id, after)
    CROSS JOIN LATERAL (
        SELECT * FROM {table} x WHERE x.session_id = w.session_id AND x.seq > w.after
        ORDER BY x.seq LIMIT %s
    ) e
    ORDER BY w.session_id, e.seq
"""
_TEXT_COLUMNS = "e.seq, e.kind, e.payload::text, " + _PG_TIME_TEXT % {"expressions": "e.created_at"}


def _many(wanted: Sequence[tuple[int, int]], limit: int, columns: str) -> dict[int, list[tuple]]:
    """Rows of `columns` for each (session id, after) of `wanted` (session ids distinct), up to
    `limit` each, ascending; PostgreSQL only."""
    found: dict[int, list[tuple]] = {session_id: [] for session_id, _ in wanted}
    asked = list(wanted)
    for sql in (_MANY_BOUNDED, _MANY_UNBOUNDED):
        if not asked:
            break
        query = sql.format(columns=columns, table=Event._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(query, [[s for s, _ in asked], [a for _, a in asked], limit])
            for session_id, *row in cursor.fetchall():
                found[session_id].append(tuple(row))
        asked = [(s, a) for s, a in asked if not found[s]]
    return found


def read_events_many(
    wanted: Sequence[tuple[int, int]], limit: int = PAGE_SIZE
) -> dict[int, list[tuple[int, str]]]:
    """`read_events` of several sessions, (session id, after) each with distinct ids, in one
    query on PostgreSQL (one per session elsewhere)."""
    if connection.vendor != "postgresql":
        return {session_id: read_events(session_id, after, limit) for session_id, after in wanted}
    return {
        session_id: [_event_text(*row) for row in rows]
        for session_id, rows in _many(wanted, limit, _TEXT_COLUMNS).items()
    }


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """An event as the live HTML tail reads it: what rendering and the panels look at, without
    a model instance (the tail reads thousands a second; a model's construction and its
    signals cost more than the rest of the read)."""

    session_id: int
    seq: int
    kind: str
    payload: Any
    created_at: datetime


def events_page_many(
    wanted: Sequence[tuple[int, int]], limit: int = PAGE_SIZE
) -> dict[int, list[Event] | list[LiveEvent]]:
    """`events_page` of several sessions, (session id, after) each with distinct ids, in one
    query on PostgreSQL (as LiveEvent records; one query per session elsewhere)."""
    if connection.vendor != "postgresql":
        return {session_id: events_page(session_id, after, limit) for session_id, after in wanted}
    loads, parse = json.loads, datetime.fromisoformat
    return {
        session_id: [
            LiveEvent(session_id, seq, kind, loads(payload), parse(f"{created}+00:00"))
            for seq, kind, payload, created in rows
        ]
        for session_id, rows in _many(wanted, limit, _TEXT_COLUMNS).items()
    }


@dataclass(frozen=True)
class Frame:
    """An encoded websocket `events` frame holding seqs first..last."""

    text: str
    first: int
    last: int


def events_frame(parts: list[str], first: int, last: int) -> Frame:
    """The `events` frame of consecutive encoded events."""
    return Frame('{"type":"events","events":[' + ",".join(parts) + "]}", first, last)


def frames_of(parts: list[tuple[int, str]]) -> list[Frame]:
    """Consecutive encoded events (as `read_events` gives them) cut into frames of about
    FRAME_BYTES."""
    frames: list[Frame] = []
    start = size = 0
    for i, (_, part) in enumerate(parts):
        size += len(part)
        if size >= FRAME_BYTES or i == len(parts) - 1:
            chunk = parts[start : i + 1]
            frames.append(events_frame([p for _, p in chunk], chunk[0][0], chunk[-1][0]))
            start, size = i + 1, 0
    return frames
