"""The Celery broker's Redis transport: kombu's, with one defect of its channel close fixed.

When Redis goes away while a worker's event loop waits on a BRPOP, the loss is often noticed on
another socket of the same connection first (the remote-control fanout's subscription). Celery
then closes the connection: kombu's `Channel.close` first reads the pending BRPOP reply, which
raises a connection error on the dead socket, and the close stops there, leaving the channel
half-closed. kombu's `Connection.collect()`, which Celery's consumer calls first, swallows that
error and detaches the transport (`transport.client = None`); the `close()` Celery calls next
closes the channel again, now reaches "restore the unacknowledged deliveries" (every turn in
flight: tasks are acknowledged late) and builds a Redis pool from `transport.client.hostname`:
"Unrecoverable error:
AttributeError: 'NoneType' object has no attribute 'hostname'", and the worker exits (kombu and
celery 5.7.0, redis-py 6.4, TCP and unix socket alike).

Here a connection error while reading that pending reply ends the read (the reply is lost with
the socket; a message BRPOP popped but never delivered is lost as it is on any broker crash),
and the close goes on with the connection still attached: the unacknowledged deliveries are
restored when Redis is reachable, or left to Redis's visibility timeout otherwise (the session
lease makes a second delivery of a turn harmless). The worker then reconnects as usual.

`use_for_redis_urls()` makes kombu resolve `redis://`, `rediss://` and `redis+socket://` broker
URLs to this transport (kombu's documented alias table, so the broker URL keeps its form); the
Celery app calls it before any connection is made.
"""

from __future__ import annotations

import logging

from kombu import transport as kombu_transports
from kombu.transport import redis as kombu_redis
from kombu.transport.virtual import Empty

log = logging.getLogger(__name__)


class Channel(kombu_redis.Channel):
    def close(self) -> None:
        if self._in_poll:
            try:
                self._brpop_read()
            except Empty:
                pass
            except self.connection_errors as exc:  # the socket is dead: nothing left to read
                log.info("broker connection lost with a BRPOP pending (%s); closing", exc)
        super().close()


class Transport(kombu_redis.Transport):
    Channel = Channel


TRANSPORT = f"{__name__}:Transport"


def use_for_redis_urls() -> None:
    """Resolve the Redis URL schemes to this transport in this process."""
    for scheme in ("redis", "rediss"):
        kombu_transports.TRANSPORT_ALIASES[scheme] = TRANSPORT
