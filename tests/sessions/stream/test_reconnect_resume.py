"""A viewer that drops and reconnects with its last seq gets exactly what it missed, once, in
order, while the agent keeps producing."""

import asyncio

import pytest

from tests.sessions.stream.conftest import Producer
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


async def test_reconnecting_with_the_last_seq_resumes_without_gap_or_duplicate(
    daphne, watched_session, cookies
):
    total = 6000
    producer = Producer(watched_session.pk, total, rate=1500)
    producer.start()
    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
    for _ in range(8):  # eight drops while the producer runs
        await viewer.connect()
        await viewer.until(min(total, viewer.last + 500))
        await viewer.close()
        await asyncio.sleep(0.15)  # away for a moment: events pile up meanwhile
    await viewer.connect()
    await viewer.until(total)
    await asyncio.to_thread(producer.finish)
    assert viewer.connections == 9
    assert viewer.seqs == list(range(1, total + 1))
    await viewer.close()


async def test_a_connection_cut_mid_frame_resumes_after_the_last_whole_frame(
    daphne, watched_session, cookies
):
    from tests.sessions.stream.conftest import append

    append(watched_session.pk, 3000, size=500)
    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await viewer.connect()
    await viewer.next_of("events")
    viewer.ws.transport.abort()  # the network goes away without a close frame
    viewer.ws = None
    await viewer.follow(3000)
    assert viewer.seqs == list(range(1, 3001))
    await viewer.close()
