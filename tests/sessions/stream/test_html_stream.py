"""The session page's websocket (`?format=html`) gets the page's own log items and viewer list,
ready for htmx to swap in out of band, resuming after the last seq the page shows."""

import asyncio
import re

import pytest
import websockets

from tests.sessions.stream.conftest import append

pytestmark = pytest.mark.django_db(transaction=True)


async def connect(daphne, session_id, cookie, after):
    return await websockets.connect(
        daphne.ws_url(session_id, f"format=html&after={after}"),
        origin=f"http://127.0.0.1:{daphne.port}",
        additional_headers={"Cookie": cookie},
    )


async def seqs_until(ws, last: int) -> list[int]:
    seen: list[int] = []
    while not seen or seen[-1] < last:
        frame = await asyncio.wait_for(ws.recv(), 10)
        seen += [int(s) for s in re.findall(r'<li id="event-\d+" data-seq="(\d+)"', frame)]
    return seen


async def test_the_page_gets_its_log_items_after_the_seq_it_shows(daphne, watched_session, cookies):
    append(watched_session.pk, 450)
    ws = await connect(daphne, watched_session.pk, cookies["reviewer"], after=400)
    assert await seqs_until(ws, 450) == list(range(401, 451))
    append(watched_session.pk, 2, start=450)
    assert await seqs_until(ws, 452) == [451, 452]
    await ws.close()


async def test_the_page_gets_the_viewer_list_as_html(daphne, watched_session, cookies):
    ws = await connect(daphne, watched_session.pk, cookies["engineer"], after=0)
    frame = await asyncio.wait_for(ws.recv(), 10)
    assert 'id="presence"' in frame
    assert 'hx-swap-oob="true"' in frame
    assert "<li>engineer</li>" in frame
    await ws.close()


async def test_agent_output_is_escaped_in_the_html(daphne, watched_session, cookies):
    from sessions.events import append_event
    from tests.sessions.stream.conftest import in_thread

    await in_thread(append_event, watched_session.pk, "output", {"text": "<script>x()</script>"})
    ws = await connect(daphne, watched_session.pk, cookies["engineer"], after=0)
    frame = ""
    while "data-seq" not in frame:
        frame = await asyncio.wait_for(ws.recv(), 10)
    assert "<script>x()</script>" not in frame
    assert "&lt;script&gt;" in frame
    await ws.close()
