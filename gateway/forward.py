"""Forwarding to the provider: the platform's key in, the client's credentials out, and the
response streamed back as it arrives (`relay`). At most RELAY_BYTES wait between the two sides,
so a client that reads slowly slows the upstream read instead of growing the gateway's memory."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpcore
import httpx

from gateway.wire import ANTHROPIC
from sessions.agents import provider_accounts as accounts

# Client headers the provider may see; everything else (its token above all) stays here.
FORWARDED_REQUEST_HEADERS = {
    ANTHROPIC: ("content-type", "accept", "anthropic-version", "anthropic-beta", "user-agent"),
    "openai": ("content-type", "accept", "openai-beta", "user-agent", "openai-organization"),
}
# Provider headers the client may see (content-length is set by the framing).
FORWARDED_RESPONSE_HEADERS = frozenset(
    {"content-type", "content-length", "retry-after", "request-id", "x-request-id",
     "anthropic-organization-id", "openai-processing-ms", "openai-version", "cache-control"}
)  # fmt: skip


@dataclass(frozen=True)
class Upstream:
    """One provider as configured: where it is and the key the platform holds for it."""

    base_url: str
    key: str
    provider: str

    def auth_headers(self) -> list[tuple[str, str]]:
        if not self.key:
            return []
        if self.provider == ANTHROPIC:
            return [("x-api-key", self.key)]
        return [("authorization", f"Bearer {self.key}")]


def configured_upstream(provider: str) -> Upstream:
    """The provider as configured now: the environment's key and URL, else the Models page's
    (sealed in the database, read through a 2-second cache). It may query the database, so the
    gateway calls it in a DB thread, never on its event loop."""
    if provider == ANTHROPIC:
        return Upstream(accounts.anthropic_base_url(), accounts.anthropic_key(), ANTHROPIC)
    return Upstream(accounts.openai_base_url(), accounts.openai_key(), "openai")


# What may wait for a slow client between the provider's socket and the client's.
RELAY_BYTES = 256 * 1024
# How long bytes already read may wait for more before they are written (batching many tokens
# into one write when the provider's stream arrives faster than it can be written).
HOLD_SECONDS = 0.0002


async def relay(
    chunks: AsyncIterator[bytes],
    send: Callable[[bytes], Awaitable[None]],
    seen: Callable[[bytes], None],
) -> None:
    """Copy `chunks` to `send`, each `seen` as it arrives. Chunks that arrive while the client
    is still being written to go out together in one write: a busy gateway then makes one
    system call for many tokens rather than one per token (the first token is never held)."""
    pending = bytearray()
    wake, room = asyncio.Event(), asyncio.Event()
    room.set()
    ended: list[BaseException | None] = []
    writing = False  # the writer is in `send` (it takes everything pending when it is back)

    async def pump() -> None:
        first = True  # the response's first bytes go out at once
        held_since = 0.0  # when the oldest byte still in `pending` arrived
        try:
            async for chunk in chunks:
                seen(chunk)
                now = time.perf_counter()
                if not pending:
                    held_since = now
                pending.extend(chunk)
                wake.set()
                if len(pending) >= RELAY_BYTES:
                    room.clear()
                    await room.wait()
                elif (first or now - held_since >= HOLD_SECONDS) and not writing:
                    # Chunks already buffered from the provider come back without a pause, so
                    # without this the writer would wait for the whole burst to be read.
                    first = False
                    await asyncio.sleep(0)
            ended.append(None)
        except Exception as exc:  # handed to the writer below, which raises it
            ended.append(exc)
        wake.set()

    reader = asyncio.get_running_loop().create_task(pump())
    try:
        while True:
            if pending:
                data = bytes(pending)
                pending.clear()
                room.set()
                writing = True
                await send(data)
                writing = False
            elif ended:
                break
            else:  # nothing to send yet: wait for the pump (no await between check and clear)
                wake.clear()
                await wake.wait()
        if ended[0] is not None:
            raise ended[0]
    finally:
        reader.cancel()


class _Stream(httpcore.AsyncNetworkStream):
    """One upstream connection on plain asyncio streams. httpcore's default (anyio) adds a
    scheduling round per write, which cost the first token milliseconds on a busy machine."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout("the provider sent nothing in time") from None
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError:
            raise httpcore.WriteTimeout("the provider took nothing in time") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from None

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await self._writer.wait_closed()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> _Stream:  # fmt: skip
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError:
            raise httpcore.ConnectTimeout("the provider's TLS handshake took too long") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from None
        return self

    def get_extra_info(self, info: str) -> object:
        if info == "is_readable":  # an idle kept-alive connection the provider closed
            if self._reader.at_eof() or self._writer.is_closing():
                return True
            poll = select.poll()  # what the loop has not yet read (a close just arrived)
            poll.register(self._writer.get_extra_info("socket").fileno(), select.POLLIN)
            return bool(poll.poll(0))
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        return self._writer.get_extra_info(info)


class _Backend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None,
        local_address: str | None = None, socket_options=None,
    ) -> _Stream:  # fmt: skip
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=(local_address, 0) if local_address else None
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} in time") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from None
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option in socket_options or ():
            sock.setsockopt(*option)
        return _Stream(reader, writer)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options=None
    ) -> _Stream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to {path} in time") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from None
        return _Stream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class Unreachable(Exception):
    """The provider could not be reached (or stopped answering)."""


@dataclass
class UpstreamResponse:
    status: int
    headers: list[tuple[str, str]]
    chunks: AsyncIterator[bytes]


class Forwarder:
    """One pooled HTTP client for every upstream request of the process; each request names
    its `Upstream` (read per request, so a key changed on the Models page needs no restart)."""

    def __init__(self, *, read_timeout: float = 600) -> None:
        transport = httpx.AsyncHTTPTransport(trust_env=False)
        # The same pool httpx builds (TLS verified, HTTP/1.1), on plain asyncio streams.
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=1000,
            max_keepalive_connections=200,
            keepalive_expiry=5.0,
            network_backend=_Backend(),
        )
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=10, read=read_timeout, write=60, pool=30),
            transport=transport,
            follow_redirects=False,
            trust_env=False,  # the provider is reached directly, never through a proxy variable
        )

    def upstream_headers(self, upstream: Upstream, client_headers: dict[str, str]) -> list[tuple]:
        keep = FORWARDED_REQUEST_HEADERS[upstream.provider]
        headers = [(name, client_headers[name]) for name in keep if name in client_headers]
        # Identity: the bytes that pass are the bytes metered, hashed and kept.
        headers.append(("accept-encoding", "identity"))
        return headers + upstream.auth_headers()

    @asynccontextmanager
    async def open(
        self, upstream: Upstream, method: str, path: str, query: str, headers: list, body: bytes
    ) -> AsyncIterator[UpstreamResponse]:
        url = upstream.base_url + path + (f"?{query}" if query else "")
        request = self.client.build_request(
            method, url, headers=headers, content=body if method == "POST" else None
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise Unreachable(_why(exc, upstream)) from None
        try:
            kept = [(k, v) for k, v in response.headers.items() if k in FORWARDED_RESPONSE_HEADERS]
            yield UpstreamResponse(response.status_code, kept, _chunks(response, upstream))
        finally:
            await response.aclose()

    async def close(self) -> None:
        await self.client.aclose()


async def _chunks(response: httpx.Response, upstream: Upstream) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    except httpx.HTTPError as exc:
        raise Unreachable(_why(exc, upstream)) from None


def _why(exc: httpx.HTTPError, upstream: Upstream) -> str:
    kind = type(exc).__name__
    detail = str(exc) or kind
    if upstream.key:
        detail = detail.replace(upstream.key, "[redacted]")
    return f"the model provider at {upstream.base_url} could not be reached ({kind}: {detail})"
