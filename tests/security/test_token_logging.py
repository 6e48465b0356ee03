"""API tokens never reach daphne's access log: daphne started exactly as the supervisor starts
it (access log on its stdout), then a client that puts its token (or a stream ticket) in the
query string of the SSE stream and the websocket."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
import urllib.request

import httpx
import pytest
import websockets
from django.conf import settings

from inspect_web.supervisor import daphne_command
from tests.conftest import child_env
from tests.sessions.stream.conftest import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def supervised_daphne(log_path):
    port = free_port()
    with log_path.open("ab") as out:
        process = subprocess.Popen(
            daphne_command(sys.executable, "127.0.0.1", port),
            env=child_env(SECRET_KEY=settings.SECRET_KEY, INSPECT_DATA_DIR=str(log_path.parent)),
            cwd=settings.BASE_DIR,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
        yield port
    finally:
        process.terminate()  # flushes its stdout
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def sse_get(url: str, **kwargs) -> int:
    """GET an event stream, read its first bytes, hang up; the status."""
    with httpx.stream("GET", url, timeout=10, **kwargs) as response:
        if response.status_code == 200:
            next(response.iter_bytes())
        return response.status_code


async def ws_hello(url: str, origin: str) -> dict:
    import json

    async with websockets.connect(url, origin=origin) as ws:
        return json.loads(await asyncio.wait_for(ws.recv(), 10))


def test_tokens_and_tickets_in_query_strings_stay_out_of_the_access_log(team, token_for, tmp_path):
    from sessions.models import Session

    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    token = token_for(team.engineer)
    log = tmp_path / "daphne.log"
    with supervised_daphne(log) as port:
        base = f"http://127.0.0.1:{port}"
        stream = f"{base}/api/sessions/{session.pk}/events/stream/"
        # What a careless client does: the token in the address (refused, and still not logged).
        sse_get(f"{stream}?token={token}")
        sse_get(f"{base}/api/sessions/999/events/stream/?after=0&token={token}")
        asyncio.run(ws_hello(f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/?token={token}",
                             origin=base))  # fmt: skip
        # What a client that cannot set headers should do: a single-use ticket in the address.
        tickets = []
        for _ in range(2):
            answer = httpx.post(
                f"{base}/api/stream-tickets/",
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            )
            assert answer.status_code == 201, answer.text
            tickets.append(answer.json()["ticket"])
        assert sse_get(f"{stream}?ticket={tickets[0]}") == 200
        hello = asyncio.run(
            ws_hello(f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/?ticket={tickets[1]}", base)
        )
        assert hello["type"] == "hello"
    text = log.read_text()
    assert f"/api/sessions/{session.pk}/events/stream/" in text  # the access log is on
    assert token not in text
    assert token[:12] not in text
    for ticket in tickets:
        assert ticket not in text


@pytest.mark.parametrize(
    ("address", "logged"),
    [
        ("/api/x/?after=3&token=insp_abc", "/api/x/?after=3&token=[redacted]"),
        ("/api/x/?%74oken=insp_abc", "/api/x/?token=[redacted]"),  # a percent-encoded name
        ("/api/x/?TICKET=inspt_abc", "/api/x/?TICKET=[redacted]"),
        ("/api/x/?t=insp_abc", "/api/x/?t=[redacted]"),  # a token under any name
        ("/s/1/preview/?inspect_preview_entry=inspv_a&q=1",
         "/s/1/preview/?inspect_preview_entry=[redacted]&q=1"),
        ("/sessions/1/screenshots/k.png?s=signature", "/sessions/1/screenshots/k.png?s=[redacted]"),
        ("/api/x/?insp_abc", "/api/x/?[redacted]="),
        ("/api/x/?after=3", "/api/x/?after=3"),
        ("/healthz", "/healthz"),
    ],
)  # fmt: skip
def test_the_access_log_redacts_credentials_however_they_are_spelled(address, logged):
    from inspect_web.web_server import redact_address

    assert redact_address(address) == logged
