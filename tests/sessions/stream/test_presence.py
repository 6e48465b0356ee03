"""Viewers see who else is watching: the list on arrival, and every join and leave."""

import time

import pytest

from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


def names(message: dict) -> list[str]:
    return [viewer["username"] for viewer in message["viewers"]]


async def test_a_newcomer_gets_the_current_viewers_at_once(daphne, watched_session, cookies):
    first = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await first.connect()
    assert names(await first.next_of("presence")) == ["engineer"]
    second = Viewer(daphne, watched_session.pk, cookies["reviewer"])
    await second.connect()
    assert (await second.recv())["type"] == "hello"
    assert names(await second.recv()) == ["engineer", "reviewer"]
    await first.close()
    await second.close()


async def test_joins_and_leaves_are_seen_by_the_other_viewers(daphne, watched_session, cookies):
    watcher = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await watcher.connect()
    await watcher.next_of("presence")
    guest = Viewer(daphne, watched_session.pk, cookies["manager"])
    await guest.connect()
    joined = await watcher.next_of("presence")
    assert joined["joined"] == "manager"
    assert names(joined) == ["engineer", "manager"]
    await guest.close()
    left = await watcher.next_of("presence")
    assert left["left"] == "manager"
    assert names(left) == ["engineer"]
    await watcher.close()


async def test_a_user_with_two_tabs_is_listed_once(daphne, watched_session, cookies):
    tabs = [Viewer(daphne, watched_session.pk, cookies["admin"]) for _ in range(2)]
    for tab in tabs:
        await tab.connect()
    assert names(await tabs[1].next_of("presence")) == ["admin"]
    await tabs[1].close()
    assert names(await tabs[0].next_of("presence")) == ["admin"]  # still there in tab one
    await tabs[0].close()


async def test_presence_is_not_stored_as_an_event(daphne, watched_session, cookies):
    from tests.sessions.stream.conftest import in_thread

    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await viewer.connect()
    await viewer.next_of("presence")
    await viewer.close()
    count = await in_thread(watched_session.events.count)
    assert count == 0


async def test_a_viewer_whose_server_vanished_expires_from_the_list(watched_session, team):
    from sessions import presence

    gone = presence.Viewer(team.reviewer.pk, "reviewer", "specific.gone")
    here = presence.Viewer(team.engineer.pk, "engineer", "specific.here")
    await presence.presence_join(watched_session.pk, gone)
    # The reviewer's web process died: no heartbeat since longer than the TTL.
    client = presence._redis()
    key = presence._key(watched_session.pk)
    await client.zadd(key, {gone.member(): time.time() - presence.PRESENCE_TTL - 1})
    roster = await presence.presence_join(watched_session.pk, here)
    assert [v["username"] for v in roster.viewers] == ["engineer"]
    assert roster.dropped == 1
    assert (await presence.presence_refresh(watched_session.pk, here)).dropped == 0
    assert await client.ttl(key) > 0  # the whole list expires when nobody refreshes it
    await presence.presence_leave(watched_session.pk, here)
    assert await presence.presence_viewers(watched_session.pk) == []
