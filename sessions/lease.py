"""One driver per session: a Redis lease with a fencing token and heartbeats.

The token comes from a per-session counter, so a newer driver always holds a larger one; the
session row records the largest seen (`driver_fence`) and the driver's writes are filtered on
it, so a driver that lost its lease (paused, partitioned) cannot overwrite its successor. The
counter never goes back below the session's record, also when Redis restarts empty.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from django.db import connection

from inspect_web.redis_client import get_redis
from sessions.models import Session

log = logging.getLogger(__name__)

LEASE_SECONDS = 15
HEARTBEAT_SECONDS = 3

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def lease_key(session_id: int) -> str:
    return f"inspect:driver:{session_id}"


def is_driven(session_id: int) -> bool:
    return bool(get_redis().exists(lease_key(session_id)))


class DriverLease:
    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.fence = 0
        self.lost = threading.Event()
        self._redis = get_redis()

    def acquire(self) -> bool:
        """True if this process now drives the session."""
        counter = f"inspect:driver-fence:{self.session_id}"
        fence = int(self._redis.incr(counter))
        recorded = Session.objects.filter(pk=self.session_id).values_list("driver_fence", flat=True)
        seen = recorded.first() or 0
        if fence <= seen:
            # Redis restarted without the counter: go on past the newest token the session has
            # seen, or this driver would share its token (and its lease's value) with an older one.
            fence = int(self._redis.incrby(counter, seen + 1 - fence))
        if not self._redis.set(lease_key(self.session_id), str(fence), nx=True, ex=LEASE_SECONDS):
            return False
        # The session remembers the newest token; an older driver's fenced writes now miss.
        Session.objects.filter(pk=self.session_id, driver_fence__lt=fence).update(
            driver_fence=fence
        )
        self.fence = fence
        self.lost.clear()
        return True

    def renew(self) -> bool:
        ok = bool(
            self._redis.eval(
                _RENEW, 1, lease_key(self.session_id), str(self.fence), LEASE_SECONDS * 1000
            )
        )
        if not ok:
            self.lost.set()
        return ok

    def release(self) -> None:
        self._redis.eval(_RELEASE, 1, lease_key(self.session_id), str(self.fence))

    @contextlib.contextmanager
    def heartbeat(self) -> Iterator[None]:
        """Renew the lease every few seconds while the body runs; `lost` is set if it lapses."""
        done = threading.Event()

        def beat() -> None:
            try:
                while not done.wait(HEARTBEAT_SECONDS):
                    try:
                        if not self.renew():
                            log.warning("lost the lease on session %s", self.session_id)
                            return
                    except Exception as exc:  # Redis down: keep trying until the lease lapses
                        log.warning("heartbeat for session %s failed: %s", self.session_id, exc)
            finally:
                connection.close()

        thread = threading.Thread(target=beat, daemon=True, name=f"lease-{self.session_id}")
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
