"""The tails of a process are read together (sessions.stream.tail.TailReader): sessions that
want events at the same time are read in one database call, each gets its own events, and a
tail whose rows fail to prepare fails alone."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from sessions.events import append_events
from sessions.models import Session
from sessions.stream import tail as tail_module
from sessions.stream.html_tail import HtmlTail
from sessions.stream.tail import tail_attach, tail_detach
from tests.sessions.stream.conftest import in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
async def close_the_database_thread():
    """The reader reads in Channels' database thread of this process: close its connection
    afterwards, or the test database cannot be dropped."""
    yield
    await database_sync_to_async(close_connection)()


def close_connection() -> None:
    connection.close()  # this thread's own


def logged_sessions(team, counts: list[int]) -> list[int]:
    ids = []
    for i, count in enumerate(counts):
        session = Session.objects.create(
            repository=team.repository, creator=team.engineer, title=f"t{i}", branch=f"t{i}"
        )
        lines = [("output", {"stream": "stdout", "text": f"{i}:{n} <&>"}) for n in range(count)]
        append_events(session.pk, lines)
        ids.append(session.pk)
    return ids


@pytest.fixture
def counted_loads(monkeypatch) -> list[list[int]]:
    """The session ids of each database call the reader makes."""
    calls: list[list[int]] = []
    real = tail_module._load

    def counting(tails, afters):
        calls.append(sorted(t.session_id for t in tails))
        return real(tails, afters)

    monkeypatch.setattr(tail_module, "_load", counting)
    return calls


async def test_tails_wanting_events_together_are_read_in_one_call(team, counted_loads):
    ids = await in_thread(logged_sessions, team, [3, 5, 2])
    json_tails = [tail_attach(i, 0) for i in ids]
    html_tails = [tail_attach(i, 0, HtmlTail) for i in ids]
    tails = json_tails + html_tails
    try:
        arrived = await asyncio.gather(*(t.read_more() for t in tails))
        assert arrived == [3, 5, 2, 3, 5, 2]
        assert counted_loads == [sorted(ids + ids)]  # one call for JSON and HTML tails alike
        for tail, count in zip(json_tails, [3, 5, 2], strict=True):
            assert (tail.first, tail.high) == (1, count)
        assert [f'data-seq="{n}"' in html_tails[1].parts[n - 1] for n in (1, 5)] == [True, True]
        assert "&lt;&amp;&gt;" in html_tails[1].parts[0]

        high = await in_thread(append_events, ids[1], [("output", {"text": "more"})])
        assert await json_tails[1].read_more() == 1 and json_tails[1].high == high == 6
        assert counted_loads[-1] == [ids[1]]  # alone, it is read at once, by itself
    finally:
        for tail in tails:
            tail_detach(tail)


async def test_a_tail_that_fails_to_prepare_fails_alone(team, monkeypatch):
    ids = await in_thread(logged_sessions, team, [2, 2])
    good, bad = tail_attach(ids[0], 0, HtmlTail), tail_attach(ids[1], 0, HtmlTail)

    def broken(rows, after):
        raise RuntimeError("cannot render")

    monkeypatch.setattr(bad, "prepare", broken)
    try:
        results = await asyncio.gather(good.read_more(), bad.read_more(), return_exceptions=True)
        assert results[0] == 2 and good.high == 2
        assert isinstance(results[1], RuntimeError) and bad.high == 0
    finally:
        tail_detach(good)
        tail_detach(bad)
