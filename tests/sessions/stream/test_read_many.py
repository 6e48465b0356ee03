"""The live tails read every watched session's new events in one query (sessions.stream.read
`read_events_many`, `events_page_many`): each session gets what its own read would give, from
its own `after`, bounded by `limit`, and a session whose range is empty is asked again without
the bound (the per-session reads' rule)."""

from __future__ import annotations

import pytest

from sessions.events import append_events
from sessions.models import Event, Session
from sessions.stream.read import (
    events_page,
    events_page_many,
    read_events,
    read_events_many,
    serialize,
)

pytestmark = pytest.mark.django_db


def session_with(team, title: str, count: int) -> Session:
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title=title, branch=title
    )
    append_events(
        session.pk,
        [("output", {"stream": "stdout", "text": f"{title} {n} <&> ünï"}) for n in range(count)]
        + [("state", {"from": "running", "to": "idle"})],
    )
    return session


@pytest.fixture
def sessions(team) -> list[Session]:
    return [session_with(team, f"s{i}", count) for i, count in enumerate((12, 3, 0, 30))]


def wanted_of(sessions: list[Session]) -> list[tuple[int, int]]:
    # From the start, mid-log, at the end (nothing new) and mid-log again.
    return list(zip([s.pk for s in sessions], [0, 2, 1, 7], strict=True))


@pytest.mark.parametrize("limit", [1, 5, 1000])
def test_each_session_gets_what_its_own_read_gives(sessions, limit):
    wanted = wanted_of(sessions)
    texts = read_events_many(wanted, limit)
    events = events_page_many(wanted, limit)
    assert set(texts) == set(events) == {s for s, _ in wanted}
    for session_id, after in wanted:
        assert texts[session_id] == read_events(session_id, after, limit)
        own = events_page(session_id, after, limit)
        assert [serialize(e) for e in events[session_id]] == [serialize(e) for e in own]
        assert all(e.session_id == session_id for e in events[session_id])
    assert texts[sessions[2].pk] == [] and events[sessions[2].pk] == []  # nothing after 1


def test_an_empty_range_is_asked_again_without_the_bound(sessions):
    """Seqs are gap-free, but if events were ever removed the read skips the hole (as the
    per-session reads do) instead of stopping at it."""
    hole = sessions[0]
    Event.objects.filter(session=hole, seq__in=range(3, 9)).delete()
    wanted = [(hole.pk, 2), (sessions[3].pk, 0)]
    texts = read_events_many(wanted, 4)
    events = events_page_many(wanted, 4)
    assert [seq for seq, _ in texts[hole.pk]] == [9, 10, 11, 12]
    assert [e.seq for e in events[hole.pk]] == [9, 10, 11, 12]
    assert texts[hole.pk] == read_events(hole.pk, 2, 4)
    assert [seq for seq, _ in texts[sessions[3].pk]] == [1, 2, 3, 4]
