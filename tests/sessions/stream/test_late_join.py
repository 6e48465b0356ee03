"""A viewer joining a long session late gets its whole history and then the live events, with
no seam where history ends and live begins, while others are already watching live."""

import asyncio

import pytest

from sessions.stream.tail import TAIL_EVENTS
from tests.sessions.stream.conftest import Producer, append
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_late_joiner_catches_up_while_the_session_streams_live(
    daphne, watched_session, cookies
):
    live = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await live.connect()
    await live.next_of("hello")
    history = 3 * TAIL_EVENTS  # more than the live viewers' shared tail keeps
    await asyncio.to_thread(append, watched_session.pk, history)
    await live.until(history)

    producer = Producer(watched_session.pk, 3000, rate=1500)
    producer.start()
    late = Viewer(daphne, watched_session.pk, cookies["reviewer"])
    await late.connect()
    hello = await late.next_of("hello")
    assert hello["last_seq"] >= history
    total = history + 3000
    await asyncio.gather(late.until(total, timeout=60), live.until(total, timeout=60))
    await asyncio.to_thread(producer.finish)
    assert late.seqs == list(range(1, total + 1))
    assert live.seqs == list(range(1, total + 1))
    await late.close()
    await live.close()
