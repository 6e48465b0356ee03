"""Events as Server-Sent Events and over the websocket, authenticated by API token, from a live
daphne: resume after `Last-Event-ID`, live events as they are appended, membership rules."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from tests.sessions.stream.conftest import append, in_thread, running_daphne

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker, tmp_path_factory):
    with running_daphne(tmp_path_factory.mktemp("daphne") / "daphne.log") as server:
        yield server


@pytest.fixture
def session(transactional_db, team):
    from sessions.models import Session

    return Session.objects.create(repository=team.repository, creator=team.engineer, title="t")


def read_sse(lines, count: int) -> list[dict]:
    """The next `count` SSE messages with data, as (id, decoded data) dicts."""
    messages, current = [], {}
    for line in lines:
        if line.startswith("id:"):
            current["id"] = int(line[3:])
        elif line.startswith("data:"):
            current["data"] = json.loads(line[5:])
        elif line == "" and "data" in current:
            messages.append(current)
            current = {}
            if len(messages) == count:
                return messages
    raise AssertionError(f"the stream ended after {len(messages)} messages")


def test_sse_resumes_after_last_event_id_and_streams_live_events(daphne, session, team, token_for):
    append(session.pk, 3)
    headers = {"Authorization": f"Bearer {token_for(team.reviewer)}", "Last-Event-ID": "1"}
    url = f"{daphne.http_url}api/sessions/{session.pk}/events/stream/"
    with httpx.stream("GET", url, headers=headers, timeout=20) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        replayed = read_sse(lines, 2)
        assert [m["id"] for m in replayed] == [2, 3]
        assert replayed[0]["data"]["kind"] == "output" and replayed[0]["data"]["seq"] == 2
        append(session.pk, 2, start=3)  # appended while the client is connected
        live = read_sse(lines, 2)
        assert [m["id"] for m in live] == [4, 5]
        assert [m["data"]["payload"]["n"] for m in live] == [3, 4]


def test_sse_refuses_no_token_a_non_member_and_a_bad_last_event_id(
    daphne, session, team, token_for
):
    url = f"{daphne.http_url}api/sessions/{session.pk}/events/stream/"
    assert httpx.get(url, timeout=10).status_code == 401
    outsider = {"Authorization": f"Bearer {token_for(team.outsider)}"}
    refused = httpx.get(url, headers=outsider, timeout=10)
    assert refused.status_code == 404 and "not a member" in refused.json()["detail"]
    member = {"Authorization": f"Bearer {token_for(team.engineer)}", "Last-Event-ID": "x"}
    bad = httpx.get(url, headers=member, timeout=10)
    assert bad.status_code == 400 and "whole number" in bad.json()["detail"]


async def test_the_websocket_accepts_an_api_token_in_the_header_or_a_ticket_in_the_query(
    daphne, session, team, token_for
):
    from api.tokens import stream_ticket_create

    token = await in_thread(token_for, team.engineer)
    ticket = await in_thread(lambda: stream_ticket_create(user=team.engineer))
    await in_thread(append, session.pk, 2)
    origin = f"http://127.0.0.1:{daphne.port}"
    for url, headers in [
        (daphne.ws_url(session.pk, "after=1"), {"Authorization": f"Bearer {token}"}),
        (daphne.ws_url(session.pk, f"after=1&ticket={ticket}"), {}),
    ]:
        async with websockets.connect(url, origin=origin, additional_headers=headers) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert hello["type"] == "hello" and hello["last_seq"] == 2
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if frame["type"] == "events":
                    break
            assert [e["seq"] for e in frame["events"]] == [2]

    # A token in the address, a wrong ticket and a spent one are all refused.
    for query in (f"token={token}", "ticket=inspt_wrong", f"ticket={ticket}"):
        async with websockets.connect(daphne.ws_url(session.pk, query), origin=origin) as ws:
            error = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert error == {
                "type": "error",
                "code": 4401,
                "message": "Log in to watch this session.",
            }


def test_sse_takes_a_single_use_ticket_but_never_a_token_in_the_address(
    daphne, session, team, token_for
):
    token = token_for(team.reviewer)
    url = f"{daphne.http_url}api/sessions/{session.pk}/events/stream/"
    refused = httpx.get(f"{url}?token={token}", timeout=10)
    assert refused.status_code == 401 and "stream-tickets" in refused.json()["detail"]
    answer = httpx.post(
        f"{daphne.http_url}api/stream-tickets/",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 201 and answer.json()["expires_in"] == 60
    ticket = answer.json()["ticket"]
    with httpx.stream("GET", f"{url}?ticket={ticket}", timeout=10) as response:
        assert response.status_code == 200
    assert httpx.get(f"{url}?ticket={ticket}", timeout=10).status_code == 401  # spent
