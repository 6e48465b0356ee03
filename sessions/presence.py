"""Who is watching a session: kept in Redis, broadcast to the session's viewers, never stored
as an event.

Each session has one sorted set, `inspect:presence:<session id>`; a member is one open viewer
connection (user id, username, channel name) and its score the time of its last heartbeat. Every
write prunes members whose heartbeat is older than PRESENCE_TTL, so a viewer whose web process
died disappears within that time, and the key itself expires when nobody refreshes it. Nothing
lives in process memory: every web process sees the same list.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from dataclasses import dataclass
from typing import Any

import redis.asyncio
from django.conf import settings

from sessions.events import group_name

HEARTBEAT_SECONDS = 15
PRESENCE_TTL = 3 * HEARTBEAT_SECONDS  # two missed heartbeats and a viewer is gone

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class Viewer:
    """One open connection of one user (a user with two tabs open is two viewers)."""

    user_id: int
    username: str
    connection: str

    def member(self) -> str:
        return json.dumps(
            {"id": self.user_id, "username": self.username, "connection": self.connection},
            sort_keys=True,
        )


def _redis() -> redis.asyncio.Redis:
    # One client per event loop: an asyncio connection cannot move between loops (tests run
    # each test in its own loop; daphne has one).
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = redis.asyncio.Redis.from_url(
            settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=5
        )
        _clients[loop] = client
    return client


def _key(session_id: int) -> str:
    return f"inspect:presence:{session_id}"


def _viewers(members: list[bytes]) -> list[dict[str, Any]]:
    """Distinct users, by username: the list a viewer sees."""
    users: dict[int, str] = {}
    for raw in members:
        entry = json.loads(raw)
        users[entry["id"]] = entry["username"]
    return [{"id": uid, "username": name} for uid, name in sorted(users.items(), key=_by_name)]


def _by_name(item: tuple[int, str]) -> tuple[str, int]:
    return item[1], item[0]


@dataclass(frozen=True)
class Roster:
    """The viewer list after a change. `version` (Redis server time, µs) orders rosters: a
    viewer shows the newest it has seen, whatever order the broadcasts arrive in."""

    viewers: list[dict[str, Any]]
    version: int
    dropped: int = 0  # stale viewers removed by this write


async def _write(session_id: int, *, add: Viewer | None = None, remove: Viewer | None = None):
    now = time.time()
    key = _key(session_id)
    async with _redis().pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(key, "-inf", now - PRESENCE_TTL)
        if add is not None:
            pipe.zadd(key, {add.member(): now})
        if remove is not None:
            pipe.zrem(key, remove.member())
        pipe.expire(key, PRESENCE_TTL)
        pipe.zrange(key, 0, -1)
        pipe.time()  # inside MULTI: the same order as the writes themselves
        results = await pipe.execute()
    seconds, micros = results[-1]
    return Roster(_viewers(results[-2]), int(seconds) * 1_000_000 + int(micros), results[0])


async def presence_join(session_id: int, viewer: Viewer) -> Roster:
    """Record `viewer` as watching; returns the roster (including them).

    Raises redis.RedisError (or OSError) when Redis cannot be reached.
    """
    return await _write(session_id, add=viewer)


async def presence_refresh(session_id: int, viewer: Viewer) -> Roster:
    """The heartbeat: keep `viewer` listed. When the roster's `dropped` is not 0, stale viewers
    were removed just now and it should be broadcast. Raises like presence_join."""
    return await _write(session_id, add=viewer)


async def presence_leave(session_id: int, viewer: Viewer) -> Roster:
    """Drop `viewer`; returns the remaining roster. Raises like presence_join."""
    return await _write(session_id, remove=viewer)


async def presence_viewers(session_id: int) -> list[dict[str, Any]]:
    """The current viewer list, stale entries excluded."""
    members = await _redis().zrangebyscore(_key(session_id), time.time() - PRESENCE_TTL, "+inf")
    return _viewers(members)


def presence_message(roster: Roster, **change: str) -> dict[str, Any]:
    """The wire message: `{"type": "presence", "viewers": [...], "version": n}` plus
    `joined`/`left`."""
    return {"type": "presence", "viewers": roster.viewers, "version": roster.version, **change}


async def presence_announce(layer, session_id: int, message: dict[str, Any]) -> None:
    """Tell every viewer of the session (a group message that is not stored)."""
    await layer.group_send(
        group_name(session_id), {"type": "broadcast.message", "message": message}
    )
