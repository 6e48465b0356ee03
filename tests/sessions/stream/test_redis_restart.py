"""Redis is only the doorbell: when it restarts under five viewers mid-stream, they carry on (or
reconnect) and end up with every event exactly once, in order, and live again afterwards."""

import asyncio
import time

import pytest

from tests.sessions.stream.conftest import Producer, append, running_daphne
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


async def test_viewers_resume_without_gap_or_duplicate_after_redis_restarts(
    watched_session, cookies, private_redis, tmp_path, settings
):
    # The producer (this process) and daphne both use the private Redis.
    layer = dict(settings.CHANNEL_LAYERS["default"])
    layer["CONFIG"] = {**layer.get("CONFIG", {}), "hosts": [private_redis.url]}
    settings.CHANNEL_LAYERS = {"default": layer}
    settings.REDIS_URL = private_redis.url

    total = 6000
    with running_daphne(tmp_path / "daphne.log", REDIS_URL=private_redis.url) as daphne:
        viewers = [Viewer(daphne, watched_session.pk, cookies["engineer"]) for _ in range(5)]
        for viewer in viewers:
            await viewer.connect()
            await viewer.next_of("hello")
        producer = Producer(watched_session.pk, total, rate=1000)
        producer.start()

        async def restart_redis() -> None:
            await asyncio.sleep(1.5)
            private_redis.kill()
            await asyncio.sleep(2)
            private_redis.start()

        await asyncio.gather(restart_redis(), *(v.follow(total, timeout=90) for v in viewers))
        assert await asyncio.to_thread(producer.finish) == total
        for viewer in viewers:
            assert viewer.seqs == list(range(1, total + 1))

        # Live again: a new event reaches everyone promptly (not only by the fallback poll).
        await asyncio.sleep(1)
        started = time.monotonic()
        await asyncio.to_thread(append, watched_session.pk, 1, start=total)
        await asyncio.gather(*(v.follow(total + 1, timeout=10) for v in viewers))
        assert time.monotonic() - started < 2.0, daphne.log_text()[-3000:]
        for viewer in viewers:
            assert viewer.seqs == list(range(1, total + 2))
            await viewer.close()
