"""A websocket viewer that behaves like the browser page: logged in by cookie, remembers the last
seq it rendered, and (when asked to) reconnects with it after any close."""

from __future__ import annotations

import asyncio
import json
import time

import websockets


class Viewer:
    def __init__(self, daphne, session_id: int, cookie: str | None, *, after: int = 0) -> None:
        self.daphne = daphne
        self.session_id = session_id
        self.cookie = cookie
        self.last = after
        self.seqs: list[int] = []  # every event seq received, across reconnects, in order
        self.messages: list[dict] = []  # everything else (hello, presence, resync, error)
        self.closes: list[int | None] = []
        self.connections = 0
        self.ws = None

    async def connect(self, query: str | None = None, **options):
        headers = {"Cookie": self.cookie} if self.cookie else {}
        self.ws = await websockets.connect(
            self.daphne.ws_url(self.session_id, f"after={self.last}" if query is None else query),
            origin=f"http://127.0.0.1:{self.daphne.port}",
            additional_headers=headers,
            open_timeout=10,
            **options,
        )
        self.connections += 1
        return self.ws

    def take(self, message: dict) -> None:
        if message["type"] == "events":
            for event in message["events"]:
                self.seqs.append(event["seq"])
                self.last = event["seq"]
        else:
            self.messages.append(message)

    async def recv(self, timeout: float = 10) -> dict:
        message = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
        self.take(message)
        return message

    async def next_of(self, kind: str, timeout: float = 10) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            message = await self.recv(max(0.01, deadline - time.monotonic()))
            if message["type"] == kind:
                return message

    async def close_code(self, timeout: float = 10) -> int | None:
        """Read until the server closes; returns its close code."""
        try:
            while True:
                await self.recv(timeout)
        except websockets.ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
            self.closes.append(code)
            return code

    async def until(self, seq: int, timeout: float = 30) -> None:
        """Read until the event `seq` has arrived (on this connection)."""
        deadline = time.monotonic() + timeout
        while self.last < seq:
            await self.recv(max(0.01, deadline - time.monotonic()))

    async def follow(self, seq: int, timeout: float = 60) -> None:
        """Stay subscribed until event `seq` arrived, reconnecting with the last seq after any
        close or failed connect (with a short backoff), as the dashboard does."""
        deadline = time.monotonic() + timeout
        backoff = 0.1
        while self.last < seq:
            if time.monotonic() > deadline:
                raise TimeoutError(f"viewer stopped at seq {self.last}, wanted {seq}")
            try:
                if self.ws is None:
                    await self.connect()
                await self.until(seq, timeout=max(0.01, deadline - time.monotonic()))
            except (websockets.ConnectionClosed, OSError, websockets.InvalidHandshake) as exc:
                if isinstance(exc, websockets.ConnectionClosed):
                    self.closes.append(exc.rcvd.code if exc.rcvd else None)
                self.ws = None
                await asyncio.sleep(backoff)
                backoff = min(1.0, backoff * 2)
            else:
                backoff = 0.1

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None
