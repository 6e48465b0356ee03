"""A snapshot build's log while it runs: each line (already redacted) pushed to a Redis list
that the settings page's "Build now" polls. The Snapshot row keeps the log for good once the
build ends (snapshots.build); this copy is for watching it happen and expires after a day."""

from __future__ import annotations

import logging

import redis

from inspect_web.redis_client import get_redis
from snapshots.models import Snapshot

log = logging.getLogger(__name__)

KEEP_SECONDS = 24 * 3600
MAX_LINES = 5_000  # the rest is in the snapshot's log (head and tail) once the build ends


def _key(snapshot_id: int) -> str:
    return f"inspect:snapshot-build-log:{snapshot_id}"


class LiveLog:
    """The live copy of one build's log. A Redis failure never fails the build: the lines are
    then only in the final log."""

    def __init__(self, snapshot_id: int) -> None:
        self.key = _key(snapshot_id)
        self.count = 0
        self.broken = False

    def append(self, line: str) -> None:
        if self.broken or self.count > MAX_LINES:
            return
        self.count += 1
        if self.count > MAX_LINES:
            line = "… the rest of the log is on the snapshot's page once the build ends"
        try:
            pipeline = get_redis().pipeline()
            if self.count == 1:  # a key left by a row of the same id (a reset database)
                pipeline.delete(self.key)
            pipeline.rpush(self.key, line).expire(self.key, KEEP_SECONDS).execute()
        except redis.RedisError as exc:
            self.broken = True
            log.warning("the live build log stops (Redis: %s); the final log is kept", exc)


def lines_after(snapshot: Snapshot, after: int) -> list[str]:
    """The build's log lines from line `after` (0-based count already shown): the live copy
    while it exists, else the log the finished build stored."""
    try:
        lines = get_redis().lrange(_key(snapshot.pk), after, -1)
        known = lines or get_redis().exists(_key(snapshot.pk))
    except redis.RedisError:
        lines, known = [], False
    if known:
        return [line.decode(errors="replace") for line in lines]
    if snapshot.state == Snapshot.State.BUILDING:
        return []
    return snapshot.log.splitlines()[after:]
