"""The event log: the one way events are appended, and how viewers are told about them.

`append_events` allocates `seq` by bumping `Session.last_seq` in the same transaction as the
insert, so seqs are unique, increasing and gap-free (a rolled-back append leaves no hole). After
commit it tells the session's channel group the new high-water seq; viewers read the rows
(the read side: sessions.stream). The notification goes out on one long-lived event loop per
process, so a batch costs one PUBLISH, not a new loop and a new Redis connection.
`EventWriter` batches a producer's lines: 50 ms or 200 events per transaction.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import decode_hosts
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from inspect_web.text import cut
from sessions import artifacts
from sessions.controls import record_session_actions, redact_event_payload
from sessions.event_kinds import KINDS, check_payload
from sessions.models import Event, Session

log = logging.getLogger(__name__)

MAX_PAYLOAD = 64 * 1024
KEEP_HEAD = KEEP_TAIL = 8 * 1024
BATCH_SECONDS = 0.05
BATCH_SIZE = 200
RETRIES = 3


def group_name(session_id: int) -> str:
    return f"session.{session_id}"


@dataclass(frozen=True)
class NewEvent:
    kind: str
    payload: dict[str, Any]


def _cap(session_id: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Keep a payload under MAX_PAYLOAD: the whole goes to an artifact, long strings keep
    their head and tail (inspect_web.text.cut), and the event links the artifact."""
    raw = json.dumps(payload, ensure_ascii=False, default=str)
    if len(raw.encode()) <= MAX_PAYLOAD:
        return payload
    link = artifacts.save(session_id, kind, raw.encode())
    capped: dict[str, Any] = {}
    for key, value in payload.items():
        part = cut(value, KEEP_HEAD, KEEP_TAIL) if isinstance(value, str) else None
        if part is not None and part.omitted:
            capped[key] = part.head
            capped[f"{key}_tail"] = part.tail
            capped[f"{key}_omitted"] = part.omitted
        else:
            capped[key] = value
    if len(json.dumps(capped, default=str).encode()) > MAX_PAYLOAD:
        capped = {"summary": f"{kind} payload of {len(raw)} bytes, stored as an artifact"}
    capped["artifact"] = link
    capped["artifact_bytes"] = len(raw)
    return capped


def append_events(session_id: int, events: Iterable[NewEvent | tuple[str, dict]]) -> int:
    """Append events in one transaction; returns the new high-water seq.

    Retries when the database connection drops mid-append. The transaction commits whole or
    not at all, so a retry cannot leave a gap; and a drop during COMMIT itself (committed, but
    the reply lost) is recognised before retrying, so the batch is not stored twice. Raises
    ValueError for an unknown kind (or, with CHECK_EVENT_PAYLOADS, a payload that does not
    fit its kind: sessions.event_kinds) and Session.DoesNotExist for a missing session.
    """
    batch = [e if isinstance(e, NewEvent) else NewEvent(*e) for e in events]
    if not batch:
        return Session.objects.filter(pk=session_id).values_list("last_seq", flat=True).get()
    for event in batch:
        if settings.CHECK_EVENT_PAYLOADS:  # DEBUG and the tests: each payload fits its kind
            check_payload(event.kind, event.payload)
        elif event.kind not in KINDS:
            raise ValueError(f"unknown event kind {event.kind!r}")
    # Repository secrets never reach a stored event or artifact (approvals.secrets).
    payloads = [
        _cap(session_id, e.kind, redact_event_payload(session_id, e.payload)) for e in batch
    ]
    # What a retry needs to tell whether the attempt before it committed: the last_seq it built
    # on (SQLite), or the created_at its rows carry (PostgreSQL).
    seen: dict[str, Any] = {}
    for attempt in range(RETRIES + 1):
        try:
            if "last" in seen:
                high = _committed_already(session_id, batch, payloads, seen["last"])
                if high is not None:
                    break
            high = _insert(session_id, batch, payloads, seen)
            break
        except (OperationalError, InterfaceError) as exc:
            if attempt == RETRIES or connection.in_atomic_block:
                raise
            log.warning("append to session %s failed (%s); retrying", session_id, exc)
            connection.close()  # the next query opens a fresh connection
            time.sleep(0.05 * (attempt + 1))
    transaction.on_commit(lambda: notify(session_id, high))
    _audit_actions(session_id, batch, payloads, high)
    return high


AUDITED_KINDS = frozenset({"tool_call", "command"})


def _audit_actions(session_id: int, batch: list[NewEvent], payloads: list[dict], high: int) -> None:
    """Every agent tool call and sandbox command goes to the audit log too (invariant 5),
    after the events commit, in the audit log's own short transaction."""
    first = high - len(batch) + 1
    audited = [
        (first + i, e.kind, p)
        for i, (e, p) in enumerate(zip(batch, payloads, strict=True))
        if e.kind in AUDITED_KINDS
    ]
    if not audited:
        return

    def record() -> None:
        record_session_actions(session_id, audited)

    transaction.on_commit(record)


def _insert(
    session_id: int, batch: list[NewEvent], payloads: list[dict], seen: dict[str, Any]
) -> int:
    if connection.vendor == "postgresql":
        return _insert_postgresql(session_id, batch, payloads, seen)
    with transaction.atomic():
        last = (
            Session.objects.select_for_update()
            .filter(pk=session_id)
            .values_list("last_seq", flat=True)
            .get()
        )
        seen["last"] = last
        high = last + len(batch)
        Event.objects.bulk_create(
            [
                Event(session_id=session_id, seq=last + i, kind=e.kind, payload=p)
                for i, (e, p) in enumerate(zip(batch, payloads, strict=True), start=1)
            ]
        )
        Session.objects.filter(pk=session_id).update(last_seq=high)
    return high


# The same append as the ORM's (lock and bump the session's last_seq, insert the rows, in one
# transaction) in one statement, sent with server-side binding so PostgreSQL prepares it once per
# connection: the ORM took four statements and about five times the CPU, and a producer writing
# 2,000 small batches a second spent more than a core on them. `created_at` is the batch's time,
# as auto_now_add would set it (one value for the batch).
_APPEND_SQL = """
    WITH bumped AS (
        UPDATE {session} SET last_seq = last_seq + %s WHERE id = %s RETURNING last_seq
    ), inserted AS (
        INSERT INTO {event} (session_id, seq, kind, payload, created_at)
        SELECT %s, bumped.last_seq - %s + v.i, v.e->>0, v.e->1, %s
        FROM bumped, jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS v(e, i)
    )
    SELECT last_seq FROM bumped
"""


def _insert_postgresql(
    session_id: int, batch: list[NewEvent], payloads: list[dict], seen: dict[str, Any]
) -> int:
    import psycopg  # PostgreSQL only

    n = len(batch)
    if "at" in seen:  # an earlier attempt lost its connection: it may have committed
        high = _stored_at(session_id, n, seen["at"])
        if high is not None:
            return high
    # Fixed before the first attempt: a retry finds by it the batch that did commit.
    at = seen.setdefault("at", timezone.now())
    # One JSON array of [kind, payload] pairs: one parameter to send, none to escape.
    rows = json.dumps([[e.kind, p] for e, p in zip(batch, payloads, strict=True)])
    sql = _APPEND_SQL.format(session=Session._meta.db_table, event=Event._meta.db_table)
    connection.ensure_connection()
    # Outside a transaction the statement is its own (autocommit): one round trip, where
    # BEGIN, the statement and COMMIT took three, each a wait that a busy machine stretches.
    # Django's cursors bind client-side (ClientCursor); a plain psycopg cursor binds on the
    # server and lets the statement be prepared. Its errors are wrapped as Django's would be
    # (a dropped connection is an OperationalError, and is retried).
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        found = cursor.execute(sql, (n, session_id, session_id, n, at, rows)).fetchone()
    if found is None:
        raise Session.DoesNotExist(f"Session matching query does not exist: {session_id}")
    return found[0]


def _stored_at(session_id: int, n: int, at: datetime) -> int | None:
    """The high seq of the batch of `n` events stored with created_at `at`, if it is there (a
    batch's rows share one created_at, to the microsecond), else None. Looks only at the
    session's newest 10,000 events: a retry comes within a second of the attempt."""
    newest = Session.objects.filter(pk=session_id).values_list("last_seq", flat=True).first()
    if newest is None:
        return None
    seqs = list(
        Event.objects.filter(session_id=session_id, seq__gt=newest - 10_000, created_at=at)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    return seqs[-1] if len(seqs) == n else None


def _committed_already(
    session_id: int, batch: list[NewEvent], payloads: list[dict], last: int
) -> int | None:
    """The high seq if the attempt that built on `last` did commit (its first and last events
    are in place at last+1 and last+n), else None."""
    n = len(batch)
    rows = Event.objects.filter(session_id=session_id, seq__in={last + 1, last + n})
    stored = {
        seq: (kind, payload) for seq, kind, payload in rows.values_list("seq", "kind", "payload")
    }
    ours = {
        last + 1: (batch[0].kind, json.loads(json.dumps(payloads[0]))),
        last + n: (batch[-1].kind, json.loads(json.dumps(payloads[-1]))),
    }
    return last + n if stored == ours else None


def append_event(session_id: int, kind: str, payload: dict[str, Any]) -> int:
    return append_events(session_id, [NewEvent(kind, payload)])


def notify(session_id: int, seq: int) -> None:
    """Wake every viewer of the session: "events up to `seq` exist". Best effort by design;
    viewers that miss it catch up from the table."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "events.available", "seq": seq}
    try:
        publish = _publisher(layer)
        if publish is not None:
            publish(group_name(session_id), message)
        else:
            _layer_call(layer.group_send(group_name(session_id), message))
    except Exception as exc:  # a lost wake-up is harmless; a crash of the producer is not
        log.warning("could not notify viewers of session %s: %s", session_id, exc)


NOTIFY_TIMEOUT = 2.0
_publishers: weakref.WeakKeyDictionary[Any, tuple[int, Any]] = weakref.WeakKeyDictionary()


def _publisher(layer) -> Any:
    """A synchronous PUBLISH in the Redis pub/sub layer's own format, for callers without an
    event loop: a group_send handed to the notifier loop cost a producer ~5 times the CPU
    (two thread switches per batch). None for other layers, several Redis hosts, or a caller
    on an event loop (which uses the layer's own connection)."""
    try:
        asyncio.get_running_loop()
        return None
    except RuntimeError:
        pass
    known = _publishers.get(layer)  # (pid, publish): a forked child makes its own
    if known is not None and known[0] == os.getpid():
        return known[1]
    publish = None
    is_pubsub = isinstance(layer, RedisPubSubChannelLayer)
    hosts = decode_hosts(layer._kwargs.get("hosts")) if is_pubsub else []
    if len(hosts) == 1 and "address" in hosts[0]:
        client = redis.Redis.from_url(
            hosts[0]["address"],
            socket_timeout=NOTIFY_TIMEOUT,
            socket_connect_timeout=NOTIFY_TIMEOUT,
        )
        prefix = layer._kwargs.get("prefix", "asgi")

        def publish(group: str, message: dict) -> None:
            # channels_redis.pubsub: a group's Redis channel is f"{prefix}__group__{group}".
            client.publish(f"{prefix}__group__{group}", layer.serialize(message))

    _publishers[layer] = (os.getpid(), publish)
    return publish


_notifier: tuple[int, asyncio.AbstractEventLoop] | None = None
_notifier_lock = threading.Lock()


def _layer_call(coroutine) -> None:
    """Run a channel-layer call from sync code on this process's notifier loop and wait for it
    (at most NOTIFY_TIMEOUT).

    async_to_sync would make a new event loop per call, and with it a new Redis connection
    (both layers keep their connections per loop): about 2.5 ms and a TCP connect per batch
    of events. One long-lived loop keeps one connection. Called from async code (a running
    loop in this thread), it does not wait.
    """
    global _notifier
    with _notifier_lock:
        if _notifier is None or _notifier[0] != os.getpid():  # new, or inherited by a fork
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, daemon=True, name="event-notify").start()
            _notifier = (os.getpid(), loop)
        loop = _notifier[1]
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        try:
            future.result(timeout=NOTIFY_TIMEOUT)
        except TimeoutError:
            future.cancel()  # Redis hangs: do not let wake-ups pile up behind it
            raise


def diff_attribution(session_id: int) -> dict[str, dict]:
    """Per path, who the session's newest diff event of it names: {"author"[, "by_hand"]}."""
    found: dict[str, dict] = {}
    rows = (
        Event.objects.filter(session_id=session_id, kind="diff")
        .order_by("-seq")
        .values_list("payload__path", "payload__author", "payload__by_hand")
    )
    for path, author, by_hand in rows.iterator():
        if author and path not in found:
            found[path] = {"author": author} | ({"by_hand": by_hand} if by_hand else {})
    return found


class EventWriter:
    """Batches events from a producer (an agent's output) into few transactions.

    `add` buffers; the buffer is written when it holds BATCH_SIZE events or its oldest event
    is BATCH_SECONDS old (a background thread flushes stragglers). `close` flushes the rest.
    With `first_at_once`, the first event is written as it is added (a turn's first agent
    event: what someone who just pressed Start waits for).
    """

    def __init__(self, session_id: int, *, first_at_once: bool = False) -> None:
        self.session_id = session_id
        self._first_pending = first_at_once
        self._buffer: list[NewEvent] = []
        self._oldest = 0.0
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = threading.Event()
        self.high = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._tick, daemon=True, name="event-writer")
        self._thread.start()

    def add(self, kind: str, payload: dict[str, Any]) -> None:
        with self._lock:
            if not self._buffer:
                self._oldest = time.monotonic()
            self._buffer.append(NewEvent(kind, payload))
            full = len(self._buffer) >= BATCH_SIZE or self._first_pending
            self._first_pending = False
        if full:
            self.flush()

    def flush(self) -> int:
        with self._write_lock:
            with self._lock:
                batch, self._buffer = self._buffer, []
            if batch:
                try:
                    self.high = append_events(self.session_id, batch)
                except BaseException:
                    with self._lock:  # nothing is lost: the batch goes back in front
                        self._buffer[:0] = batch
                    raise
            return self.high

    def _tick(self) -> None:
        try:
            pause = BATCH_SECONDS / 2
            while not self._closed.wait(pause):
                with self._lock:
                    age = time.monotonic() - self._oldest if self._buffer else None
                if age is None:
                    pause = BATCH_SECONDS / 2
                elif age < BATCH_SECONDS:
                    pause = BATCH_SECONDS - age  # wake when the oldest is due, not a tick later
                else:
                    try:
                        self.flush()
                        self.error = None
                        pause = 0
                    except DatabaseError as exc:  # retried by the next tick or by close()
                        self.error = exc
                        pause = BATCH_SECONDS
        finally:
            connection.close()  # this thread's own connection

    def close(self) -> int:
        self._closed.set()
        self._thread.join()
        return self.flush()

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
