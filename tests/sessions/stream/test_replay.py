"""A viewer that connects with `?after=N` gets exactly the events after N, in order, then live."""

import pytest

from tests.sessions.stream.conftest import append
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


async def test_it_replays_exactly_the_events_after_the_given_seq(daphne, watched_session, cookies):
    high = append(watched_session.pk, 2500)
    viewer = Viewer(daphne, watched_session.pk, cookies["reviewer"], after=1234)
    await viewer.connect()
    hello = await viewer.next_of("hello")
    assert hello == {
        "type": "hello",
        "session": watched_session.pk,
        "after": 1234,
        "last_seq": high,
    }
    await viewer.until(high)
    assert viewer.seqs == list(range(1235, high + 1))
    await viewer.close()


async def test_without_after_it_replays_everything(daphne, watched_session, cookies):
    append(watched_session.pk, 30)
    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await viewer.connect(query="")
    await viewer.until(30)
    assert viewer.seqs == list(range(1, 31))
    await viewer.close()


async def test_events_appended_after_connecting_arrive_live(daphne, watched_session, cookies):
    append(watched_session.pk, 10)
    viewer = Viewer(daphne, watched_session.pk, cookies["manager"])
    await viewer.connect()
    await viewer.until(10)
    append(watched_session.pk, 5, start=10)
    await viewer.until(15, timeout=5)
    assert viewer.seqs == list(range(1, 16))
    await viewer.close()


async def test_each_event_carries_kind_payload_and_time(daphne, watched_session, cookies):
    append(watched_session.pk, 1)
    viewer = Viewer(daphne, watched_session.pk, cookies["admin"])
    await viewer.connect()
    frame = await viewer.next_of("events")
    (event,) = frame["events"]
    assert event["seq"] == 1
    assert event["kind"] == "output"
    assert event["payload"] == {"n": 0, "line": "x" * 20}
    assert event["created_at"].endswith("+00:00")
    await viewer.close()
