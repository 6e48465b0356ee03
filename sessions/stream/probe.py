"""Whether a daphne socket's output is backed up: what ASGI does not tell a consumer."""

from __future__ import annotations

import functools


class SocketProbe:
    """What ASGI does not tell a consumer: whether this connection's output is backed up.

    ASGI has no backpressure: daphne's `send` hands the frame to Twisted, which buffers without
    limit. Daphne's `send` is `partial(server.handle_reply, protocol)` (behind Channels' session
    middleware, at `send.__self__.real_send`); the protocol's transport has a streaming producer
    registered (the HTTP channel it was upgraded from), so Twisted keeps
    `transport.producerPaused` true while more than its bufferSize (64 KiB) waits to be
    written. `find` returns None on another server; the lag check then relies on `send`
    itself blocking (uvicorn's does).
    """

    def __init__(self, protocol) -> None:
        self.protocol = protocol
        self.transport = protocol.transport

    @classmethod
    def find(cls, send) -> SocketProbe | None:
        for _ in range(8):
            if isinstance(send, functools.partial):
                for arg in send.args:
                    transport = getattr(arg, "transport", None)
                    if (
                        transport is not None
                        and hasattr(transport, "producerPaused")
                        and getattr(transport, "producer", None) is not None
                    ):
                        return cls(arg)
                send = send.func
            elif hasattr(getattr(send, "__self__", None), "real_send"):
                send = send.__self__.real_send
            else:
                return None
        return None

    def full(self) -> bool:
        return bool(self.transport.producerPaused)

    def allow_slow_close(self, seconds: float) -> None:
        """Give the peer `seconds` (autobahn's default: 1) to answer our close frame, so a slow
        reader gets through what is queued, our resync included, before the socket drops."""
        if hasattr(self.protocol, "closeHandshakeTimeout"):
            self.protocol.closeHandshakeTimeout = seconds
