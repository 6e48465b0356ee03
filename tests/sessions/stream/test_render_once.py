"""Render once, send many: N viewers of one session's page (`?format=html`) cost one render per
batch of events, whatever N, and all get the same bytes, whoever they are.

The real consumer runs in this process (Channels' WebsocketCommunicator, the Redis channel layer,
PostgreSQL), so the session's HTML tail, which counts what it renders, can be looked at; a spy
around the one function that renders a log item counts every render in any code path.
"""

import re

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.template.loader import render_to_string

from sessions import rendering
from sessions.change_summary import change_summary
from sessions.stream import html_tail
from sessions.stream.session_socket import SessionStreamConsumer
from sessions.stream.tail import tail_of
from tests.sessions.stream.conftest import in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
async def close_the_database_thread():
    """The consumer reads in Channels' database thread of this process: close its connection
    afterwards, or the test database cannot be dropped."""
    yield
    await database_sync_to_async(close_connection)()


def close_connection() -> None:
    connection.close()  # this thread's own


ROLES = ["engineer", "reviewer", "manager", "admin", "engineer", "reviewer"]  # two in two tabs


def seqs(frame: str) -> list[int]:
    return [int(s) for s in re.findall(r'<li id="event-\d+" data-seq="(\d+)"', frame)]


async def viewer(team, session_id: int, role: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        SessionStreamConsumer.as_asgi(), f"/ws/sessions/{session_id}/?format=html&after=0"
    )
    communicator.scope["user"] = getattr(team, role)
    communicator.scope["url_route"] = {"kwargs": {"session_id": session_id}}
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


async def frames_until(communicator: WebsocketCommunicator, last: int) -> list[str]:
    """The event frames up to seq `last` (presence frames are left out)."""
    frames: list[str] = []
    while not frames or seqs(frames[-1])[-1:] != [last]:
        frame = await communicator.receive_output(timeout=10)
        if frame["type"] == "websocket.close":
            pytest.fail(f"closed with {frame.get('code')}")
        if "data-seq" in frame.get("text", ""):
            frames.append(frame["text"])
    return frames


def batches(turn_files: int = 3) -> list[list[tuple[str, dict]]]:
    """Output, then a turn's diff, its verification and its state change: panels included."""
    out = [("output", {"stream": "stdout", "text": f"line {n} <b>&</b>"}) for n in range(20)]
    diff = [
        ("diff", {"path": f"src/m{n}.py", "added": 1, "removed": 1, "binary": False,
                  "patch": f"--- a/src/m{n}.py\n+++ b/src/m{n}.py\n@@ -1 +1 @@\n-old\n+new\n",
                  "turn": 1, "commit": "c1"})
        for n in range(turn_files)
    ]  # fmt: skip
    verify = [
        ("command", {"command": "pytest -q", "phase": "verify", "exit_code": 0, "ok": True,
                     "duration_ms": 12, "limit_hit": False, "turn": 1, "output_head": "ok"})
    ]  # fmt: skip
    state = [("state", {"from": "running", "to": "idle"})]
    return [out, diff, diff[:1], verify, out, state]


async def test_n_viewers_cause_one_render_per_batch_and_get_identical_bytes(
    team, watched_session, monkeypatch
):
    from sessions.events import append_events

    rendered: list[int] = []
    real_render = rendering.render_event

    def counting_render(event):
        rendered.append(event.seq)
        return real_render(event)

    monkeypatch.setattr(rendering, "render_event", counting_render)
    viewers = [await viewer(team, watched_session.pk, role) for role in ROLES]
    received: list[list[str]] = [[] for _ in viewers]
    high = 0
    plan = batches()
    for batch in plan:
        high = await in_thread(append_events, watched_session.pk, batch)
        for i, communicator in enumerate(viewers):
            received[i] += await frames_until(communicator, high)

    tail = tail_of(watched_session.pk, html_tail.HtmlTail)
    assert tail is not None and tail.viewers == len(viewers)
    assert tail.renders == len(plan)  # one render per batch, not one per viewer
    assert tail.rendered_events == high
    assert sorted(rendered) == list(range(1, high + 1))  # every event rendered exactly once
    assert all(frames == received[0] for frames in received)  # the same bytes, whoever watches
    assert [s for frame in received[0] for s in seqs(frame)] == list(range(1, high + 1))

    # The panels the stream kept up from the events are the ones the page renders.
    everything = "".join(received[0])
    assert "csrfmiddlewaretoken" not in everything
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in everything and "<b>&</b>" not in everything
    last_diff = everything[everything.rindex('<div id="diff"') :]
    diff = await in_thread(rendering.latest_diff, watched_session.pk)
    page_diff = render_to_string(
        "sessions/panels/diff.html", {"diff": diff, "oob": True, "session": watched_session}
    )
    assert last_diff.startswith(page_diff)
    assert page_diff.count('class="file"') == 4  # three files, then a fourth of the same turn
    # The risk summary follows the same diff, from the events, as the page renders it.
    last_changes = everything[everything.rindex('<div id="changes"') :]
    page_changes = render_to_string(
        "sessions/panels/changes.html", {"changes": change_summary(diff), "oob": True}
    )
    assert last_changes.startswith(page_changes) and "4 files" in page_changes
    assert 'id="verification"' in everything and 'id="session-state"' in everything

    for communicator in viewers:
        await communicator.disconnect()
    assert tail_of(watched_session.pk, html_tail.HtmlTail) is None


async def test_a_viewer_joining_later_catches_up_then_shares_the_frames(team, watched_session):
    from sessions.events import append_events

    first = await viewer(team, watched_session.pk, "engineer")
    high = await in_thread(append_events, watched_session.pk, batches()[0])
    await frames_until(first, high)
    late = await viewer(team, watched_session.pk, "reviewer")  # from after=0: history first
    history = await frames_until(late, high)
    assert [s for frame in history for s in seqs(frame)] == list(range(1, high + 1))
    high = await in_thread(append_events, watched_session.pk, batches()[3])
    assert await frames_until(first, high) == await frames_until(late, high)
    for communicator in (first, late):
        await communicator.disconnect()
