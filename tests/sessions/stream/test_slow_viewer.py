"""A viewer that cannot keep up is told where to resume and disconnected (4008); it never slows
the other viewers or the producer, and it resumes without a gap when it reconnects."""

import asyncio
import json
import socket
import time

import pytest
import websockets

from sessions.stream.session_socket import MAX_LAG
from tests.sessions.stream.conftest import Producer
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)

TOTAL = 12_000  # well past MAX_LAG
RATE = 3000
PAYLOAD = 2000  # bytes of output per event: the slow viewer's socket fills within a second


async def slow_socket(daphne) -> socket.socket:
    """A TCP connection with a tiny receive window, like a phone on a bad network."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", daphne.port))
    return sock


async def test_a_slow_viewer_is_told_to_resync_and_the_fast_one_is_not_held_up(
    daphne, watched_session, cookies
):
    fast = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await fast.connect()
    await fast.next_of("presence")
    slow = await websockets.connect(
        daphne.ws_url(watched_session.pk, "after=0"),
        sock=await slow_socket(daphne),
        origin=f"http://127.0.0.1:{daphne.port}",
        additional_headers={"Cookie": cookies["reviewer"]},
        max_queue=1,
        max_size=None,
        ping_interval=None,
    )
    producer = Producer(watched_session.pk, TOTAL, RATE, size=PAYLOAD)
    started = time.monotonic()
    producer.start()

    async def read_slowly() -> tuple[list[int], dict | None, int | None]:
        seqs, resync = [], None
        try:
            while True:
                message = json.loads(await asyncio.wait_for(slow.recv(), 60))
                if message["type"] == "events":
                    seqs += [e["seq"] for e in message["events"]]
                elif message["type"] == "resync":
                    resync = message
                await asyncio.sleep(0.2)  # renders one frame every 200 ms
        except websockets.ConnectionClosed as closed:
            return seqs, resync, closed.rcvd.code if closed.rcvd else None

    slow_reading = asyncio.ensure_future(read_slowly())
    await fast.until(TOTAL, timeout=60)
    fast_done = time.monotonic() - started
    high = await asyncio.to_thread(producer.finish)

    assert high == TOTAL
    assert fast.seqs == list(range(1, TOTAL + 1))  # everything, once, in order
    assert fast_done < TOTAL / RATE + 5  # kept pace with the producer
    assert "resync" not in [m["type"] for m in fast.messages]

    seqs, resync, code = await slow_reading
    assert code == 4008
    assert resync == {"type": "resync", "after": seqs[-1], "reason": "lagging"}
    assert seqs == list(range(1, seqs[-1] + 1))
    assert TOTAL - seqs[-1] > MAX_LAG // 2  # it really was far behind

    again = Viewer(daphne, watched_session.pk, cookies["reviewer"], after=resync["after"])
    await again.connect()
    await again.until(TOTAL)
    assert again.seqs == list(range(resync["after"] + 1, TOTAL + 1))
    await again.close()
    await fast.close()
