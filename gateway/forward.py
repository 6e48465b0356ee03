"""Forwarding to the provider: the platform's key in, the client's credentials out, and the
response streamed back as it arrives (`relay`). At most RELAY_BYTES wait between the two sides,
so a client that reads slowly slows the upstream read instead of growing the gateway's memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from django.conf import settings

from gateway.wire import ANTHROPIC

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


def configured_upstreams() -> dict[str, Upstream]:
    return {
        ANTHROPIC: Upstream(settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_API_KEY, ANTHROPIC),
        "openai": Upstream(settings.LLM_BASE_URL, settings.LLM_API_KEY, "openai"),
    }


# What may wait for a slow client between the provider's socket and the client's.
RELAY_BYTES = 256 * 1024


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

    async def pump() -> None:
        try:
            async for chunk in chunks:
                seen(chunk)
                pending.extend(chunk)
                wake.set()
                if len(pending) >= RELAY_BYTES:
                    room.clear()
                    await room.wait()
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
                await send(data)
            elif ended:
                break
            else:  # nothing to send yet: wait for the pump (no await between check and clear)
                wake.clear()
                await wake.wait()
        if ended[0] is not None:
            raise ended[0]
    finally:
        reader.cancel()


class Unreachable(Exception):
    """The provider could not be reached (or stopped answering)."""


@dataclass
class UpstreamResponse:
    status: int
    headers: list[tuple[str, str]]
    chunks: AsyncIterator[bytes]


class Forwarder:
    """One pooled HTTP client for every upstream request of the process."""

    def __init__(self, upstreams: dict[str, Upstream], *, read_timeout: float = 600) -> None:
        self.upstreams = upstreams
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=10, read=read_timeout, write=60, pool=30),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
            follow_redirects=False,
            trust_env=False,  # the provider is reached directly, never through a proxy variable
        )

    def upstream_headers(self, provider: str, client_headers: dict[str, str]) -> list[tuple]:
        keep = FORWARDED_REQUEST_HEADERS[provider]
        headers = [(name, client_headers[name]) for name in keep if name in client_headers]
        # Identity: the bytes that pass are the bytes metered, hashed and kept.
        headers.append(("accept-encoding", "identity"))
        return headers + self.upstreams[provider].auth_headers()

    @asynccontextmanager
    async def open(
        self, provider: str, method: str, path: str, query: str, headers: list, body: bytes
    ) -> AsyncIterator[UpstreamResponse]:
        upstream = self.upstreams[provider]
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
