"""A malformed `after` is refused with 4400 and a message saying what is wrong; an `after` past
the end of the log is answered with a resync to the real end, and the stream goes on."""

import pytest

from tests.sessions.stream.conftest import append
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("after", ["abc", "-1", "1.5", "", "12abc", "1e3", "%201", "9" * 30])
async def test_a_malformed_after_is_closed_with_4400_and_a_reason(
    daphne, watched_session, cookies, after
):
    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await viewer.connect(query=f"after={after}")
    error = await viewer.next_of("error")
    assert await viewer.close_code() == 4400
    assert error["code"] == 4400
    assert "`after`" in error["message"]
    assert viewer.seqs == []


async def test_an_unknown_format_is_closed_with_4400(daphne, watched_session, cookies):
    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await viewer.connect(query="after=0&format=xml")
    error = await viewer.next_of("error")
    assert await viewer.close_code() == 4400
    assert "`format`" in error["message"]


async def test_an_after_beyond_the_end_resyncs_to_the_end_and_streams_on(
    daphne, watched_session, cookies
):
    append(watched_session.pk, 10)
    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"], after=500)
    await viewer.connect()
    resync = await viewer.next_of("resync")
    assert resync == {"type": "resync", "after": 10, "reason": "ahead"}
    append(watched_session.pk, 3, start=10)
    viewer.last = 10
    await viewer.until(13, timeout=5)
    assert viewer.seqs == [11, 12, 13]
    await viewer.close()


async def test_after_equal_to_the_end_means_nothing_was_missed(daphne, watched_session, cookies):
    append(watched_session.pk, 10)
    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"], after=10)
    await viewer.connect()
    await viewer.next_of("presence")
    append(watched_session.pk, 1, start=10)
    await viewer.until(11, timeout=5)
    assert viewer.seqs == [11]
    assert "resync" not in [m["type"] for m in viewer.messages]
    await viewer.close()
