"""An event has one JSON form: the live streams' fast path (the database's text spliced in,
sessions.stream.read.read_events) gives, byte for byte, what `serialize` gives the REST API and
the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from sessions.events import append_events
from sessions.models import Event, Session
from sessions.stream.read import _iso, event_text, events_after, read_events, serialize

pytestmark = pytest.mark.django_db

PAYLOADS = [
    {"line": "plain"},
    {"text": "naïve café — 日本語 🙂", "quote": 'a "b" \\ c', "tab": "a\tb\nc\r\x01\x1f\x7f"},
    {"nested": {"z": [1, 2.5, -3, 0.1, True, False, None], "a": {}}, "empty": [], "n": 10**18},
    {"b": 1, "a": 2, "longer key": 3, "": 4},  # jsonb orders keys its own way; both follow it
    {"html": "<script>alert(1)</script>", "u2028": "\u2028\u2029", "esc": "\x1b[31mred"},
]
TIMES = [
    datetime(2026, 1, 2, 10, 11, 12, 500000, tzinfo=UTC),  # PostgreSQL prints ".5"
    datetime(2026, 1, 2, 10, 11, 12, 0, tzinfo=UTC),  # no fraction at all
    datetime(2026, 1, 2, 10, 11, 12, 1, tzinfo=UTC),
    datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2026, 1, 2, 10, 11, 12, 120000, tzinfo=UTC),
]


@pytest.fixture
def logged_session(team) -> Session:
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="One encoding", branch="b"
    )
    append_events(session.pk, [("output", p) for p in PAYLOADS])
    for seq, at in enumerate(TIMES, start=1):
        Event.objects.filter(session=session, seq=seq).update(created_at=at)
    return session


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the byte form is PostgreSQL's")
def test_the_fast_path_is_byte_for_byte_what_serialize_gives(logged_session):
    fast = read_events(logged_session.pk, 0)
    slow = events_after(logged_session.pk, 0)
    assert [seq for seq, _ in fast] == [e.seq for e in slow] == [1, 2, 3, 4, 5]
    for (_, text), event in zip(fast, slow, strict=True):
        assert text == event_text(event)
        assert json.loads(text) == serialize(event)
    assert [e.created_at.isoformat() for e in slow] == [t.isoformat() for t in TIMES]


def test_both_give_the_same_value_on_any_database(logged_session):
    fast = read_events(logged_session.pk, 0)
    slow = events_after(logged_session.pk, 0)
    assert [json.loads(text) for _, text in fast] == [serialize(e) for e in slow]


@pytest.mark.parametrize(
    ("database", "iso"),
    [
        ("2026-01-02T10:11:12.500000", "2026-01-02T10:11:12.500000+00:00"),  # PostgreSQL
        ("2026-01-02T10:11:12.000000", "2026-01-02T10:11:12+00:00"),
        ("2026-01-02T10:11:12.000001", "2026-01-02T10:11:12.000001+00:00"),
        ("2026-01-02 10:11:12.500000", "2026-01-02T10:11:12.500000+00:00"),  # SQLite
        ("2026-01-02 10:11:12", "2026-01-02T10:11:12+00:00"),
    ],
)
def test_the_databases_time_text_reads_as_isoformat_prints_it(database, iso):
    assert _iso(database) == iso
