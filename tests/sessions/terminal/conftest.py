"""A session with a live sandbox, a daphne serving its terminal, and a terminal client."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import websockets
from django.conf import settings

from tests.sessions.stream.conftest import running_daphne


@pytest.fixture
def live_session(transactional_db, ready_repo, create_session):
    """An idle session whose sandbox is still running (as after a turn)."""
    from sessions.models import Session

    _, summary, err = create_session(
        "--prompt", "x", "--agent-command", "true", "--inline", "--as", "engineer"
    )
    session = Session.objects.get(pk=summary["id"])
    assert session.sandbox_id, err
    return session


@pytest.fixture
def terminal_daphne(transactional_db, tmp_path):
    with running_daphne(tmp_path / "daphne.log", INSPECT_TERMINAL_IDLE_SECONDS="60") as server:
        yield server


@pytest.fixture
def cookies(transactional_db, team) -> dict[str, str]:
    """The Cookie header of a browser logged in as each member (and the outsider), by role."""
    from django.test import Client

    def cookie(user) -> str:
        client = Client()
        client.force_login(user)
        name = settings.SESSION_COOKIE_NAME
        return f"{name}={client.cookies[name].value}"

    roles = ["engineer", "reviewer", "manager", "admin", "outsider"]
    return {role: cookie(getattr(team, role)) for role in roles}


class TerminalClient:
    """What the page's script does: JSON frames up, raw output bytes down."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.output = b""
        self.messages: list[dict] = []

    @classmethod
    async def open(cls, daphne, session_id: int, cookie: str) -> TerminalClient:
        ws = await websockets.connect(
            f"ws://127.0.0.1:{daphne.port}/ws/sessions/{session_id}/terminal/",
            origin=f"http://127.0.0.1:{daphne.port}",
            additional_headers={"Cookie": cookie},
            open_timeout=10,
        )
        return cls(ws)

    async def send(self, **message) -> None:
        await self.ws.send(json.dumps(message))

    async def type(self, text: str) -> None:
        await self.send(type="input", data=text)

    async def read(self, timeout: float) -> None:
        frame = await asyncio.wait_for(self.ws.recv(), timeout)
        if isinstance(frame, bytes):
            self.output += frame
        else:
            self.messages.append(json.loads(frame))

    async def until_output(self, needle: bytes, timeout: float = 15) -> bytes:
        deadline = time.monotonic() + timeout
        while needle not in self.output:
            await self.read(max(0.01, deadline - time.monotonic()))
        return self.output

    async def until_message(self, kind: str, timeout: float = 15) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for message in self.messages[seen:]:
                if message["type"] == kind:
                    return message
            seen = len(self.messages)
            await self.read(max(0.01, deadline - time.monotonic()))

    async def quiet_for(self, seconds: float) -> None:
        """Read whatever arrives during `seconds`."""
        deadline = time.monotonic() + seconds
        with_timeout = True
        while with_timeout:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                await self.read(left)
            except TimeoutError:
                return

    async def close_code(self, timeout: float = 20) -> int | None:
        try:
            while True:
                await self.read(timeout)
        except websockets.ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None

    async def close(self) -> None:
        await self.ws.close()
