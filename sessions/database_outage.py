"""A turn whose database connection is cut (PostgreSQL restarted, failed over, a connection
reaper): the runner waits for the database to answer again and the turn resumes from its last
snapshot, as after a lost worker, instead of failing with an internal error. The event log
loses nothing meanwhile (sessions.events retries its appends)."""

from __future__ import annotations

import contextlib
import logging
import time

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

DATABASE_LOST = (OperationalError, InterfaceError)
WAIT_SECONDS = 60.0  # how long a turn waits for the database to come back
MAX_ATTEMPTS = 3  # a turn cut this many times by outages fails instead


def wait_for_database(timeout: float = WAIT_SECONDS) -> bool:
    """True once a new connection answers; False after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(*DATABASE_LOST):
            connection.close()  # the broken one
        try:
            connection.ensure_connection()
            return True
        except DATABASE_LOST:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)


def resumable(session_id: int, attempt: int, exc: Exception) -> bool:
    """Whether the turn (its `attempt`-th run) should resume after losing the database with
    `exc`: the database is back and the turn has attempts left."""
    said = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    log.warning("session %s lost its database connection mid-turn: %s", session_id, said)
    return wait_for_database() and attempt < MAX_ATTEMPTS


def failure_message(exc: Exception) -> str:
    said = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    return (
        f"the database connection was lost mid-turn {MAX_ATTEMPTS} times ({said}); "
        "check the database server, then send the prompt again"
    )
