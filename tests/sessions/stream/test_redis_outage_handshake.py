"""A viewer connecting while Redis is down is told so with a close code the session page
reconnects on (4503), not an HTTP 500; once Redis is back the same viewer gets the whole log."""

import asyncio

import pytest

from tests.sessions.stream.conftest import append, running_daphne
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_handshake_during_a_redis_outage_closes_with_try_again(
    watched_session, cookies, private_redis, tmp_path
):
    from sessions.stream.base import TRY_AGAIN

    await asyncio.to_thread(append, watched_session.pk, 3)
    with running_daphne(tmp_path / "daphne.log", REDIS_URL=private_redis.url) as daphne:
        private_redis.kill()
        for query in ("after=0", "after=0&format=html"):
            viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
            await viewer.connect(query)  # the handshake succeeds: no HTTP 500
            assert await viewer.close_code() == TRY_AGAIN, daphne.log_text()[-3000:]
            if "html" not in query:
                (error,) = [m for m in viewer.messages if m["type"] == "error"]
                assert error["code"] == TRY_AGAIN and "Redis" in error["message"]

        private_redis.start()
        viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
        await viewer.follow(3, timeout=30)  # the page's reconnect gets everything
        assert viewer.seqs == [1, 2, 3]
        await viewer.close()
        assert "Traceback" not in daphne.log_text()
