"""Server-sent events and the reply shape both providers' wire formats share."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class Reply:
    """One answer: a JSON body, or a list of SSE chunks."""

    def __init__(self, status: int, body: Any = None, events: list[bytes] | None = None):
        self.status, self.body, self.events = status, body, events


def halves(text: str) -> list[str]:
    """Split in two so clients must really join deltas."""
    if len(text) < 2:
        return [text]
    mid = len(text) // 2
    return [text[:mid], text[mid:]]


def iter_sse(raw: bytes) -> Iterator[tuple[str | None, str]]:
    """(event, data) pairs of an SSE body (for tests)."""
    for block in raw.decode().split("\n\n"):
        event, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            yield event, "\n".join(data)
