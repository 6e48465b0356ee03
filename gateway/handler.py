"""One request through the gateway: route, token, request checks, model policy, budget, the
provider, and the record of it all (every request a token made, refused ones included)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections

from approvals.redaction import Redactor
from gateway import budgets, policy
from gateway.budgets import Refusal
from gateway.connection import ClientGone, Request, Responder
from gateway.forward import Forwarder, Unreachable, Upstream, configured_upstream, relay
from gateway.metering import Exchange, record
from gateway.models import ModelRequest
from gateway.scrub import scrub_bytes, scrubber
from gateway.wire import (
    ANTHROPIC,
    BadRequest,
    Route,
    UsageMeter,
    error_body,
    parse_request,
    provider_of,
    route_for,
)
from sessions import model_access
from sessions.models import ModelAccess

log = logging.getLogger("gateway")

ACCESS_ENDED = "this session's model access ended; start a new turn"
# A revoked token stops working within this long (its lookup is cached no longer).
ACCESS_TTL = 0.5
SCRUB_TTL = 2.0
# A provider key or URL changed on the Models page is used within about this long (plus the
# run-time settings' own 2-second cache): looked up again in a DB thread while requests go on
# with the one they have, so a busy database never holds up a request. Only an upstream older
# than UPSTREAM_STALE_MAX (the lookups keep failing or stalling) makes a request wait.
UPSTREAM_TTL = 1.0
UPSTREAM_STALE_MAX = 15.0
# What is kept of a response for replay; beyond it only its hash and size.
KEPT_RESPONSE_BYTES = 1024 * 1024
# An upstream error body is read whole (to take the key out of it) up to this size.
MAX_ERROR_BODY = 4 * 1024 * 1024
Outcome = ModelRequest.Outcome

# Each provider's error type for what the gateway itself refuses, by status.
_KINDS = {
    ANTHROPIC: {400: "invalid_request_error", 401: "authentication_error",
                404: "not_found_error", 500: "api_error", 502: "api_error"},
    "openai": {400: "invalid_request_error", 401: "invalid_request_error",
               404: "invalid_request_error", 500: "server_error", 502: "server_error"},
}  # fmt: skip


def token_of(headers: dict[str, str]) -> str:
    """The runtime's token: its "API key" header, or a Bearer authorization."""
    key = headers.get("x-api-key", "").strip()
    if key:
        return key
    auth = headers.get("authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else ""


@dataclass
class Passage:
    """A response as it passes: hashed and sized whole, its head kept for replay."""

    digest: Any = field(default_factory=hashlib.sha256)
    size: int = 0
    head: bytearray = field(default_factory=bytearray)
    first_byte_ms: float | None = None

    def add(self, chunk: bytes, started: float) -> None:
        if self.first_byte_ms is None:
            self.first_byte_ms = (time.monotonic() - started) * 1000
        self.digest.update(chunk)
        self.size += len(chunk)
        room = KEPT_RESPONSE_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]


class Gateway:
    """The request handler of the gateway process (one per process)."""

    def __init__(self, forwarder: Forwarder, *, db_threads: int = 8) -> None:
        self.forwarder = forwarder
        # ORM calls run here, off the event loop; each thread keeps its own DB connection.
        self.db = ThreadPoolExecutor(db_threads, thread_name_prefix="gateway-db")
        # Lookups by token and by repository: (until, the lookup's future).
        self._access: dict[str, tuple[float, asyncio.Future]] = {}
        self._scrubbers: dict[int, tuple[float, asyncio.Future]] = {}
        self._upstreams: dict[str, tuple[float, Upstream]] = {}  # (looked up at, upstream)
        self._upstream_lookups: dict[str, asyncio.Future] = {}
        self._refreshing: set[tuple] = set()  # (cache, key) looked up again ahead of expiry
        self._records: set[asyncio.Task] = set()
        self.in_flight = 0  # requests being answered (a stop waits for them a while)

    async def _in_thread(self, fn, *args):
        def run():
            close_old_connections()
            return fn(*args)

        return await asyncio.get_running_loop().run_in_executor(self.db, run)

    async def _cached(self, cache: dict, key, ttl: float, fn, *args):
        """`fn(*args)` in a DB thread, its answer kept `ttl` seconds; requests that arrive
        while it is being looked up wait for that one lookup (no stampede at a burst)."""
        now = time.monotonic()
        cached = cache.get(key)
        if cached and cached[0] > now:
            ahead = (id(cache), key)
            if cached[0] - now < ttl / 2 and cached[1].done() and ahead not in self._refreshing:
                # Looked up again ahead of expiry, so steady traffic never waits on the
                # database; a lookup is used no longer than `ttl` after it was started.
                self._refreshing.add(ahead)
                refresh = asyncio.ensure_future(self._lookup(cache, key, ttl, fn, *args))
                refresh.add_done_callback(lambda task: self._refreshed(ahead, task))
            return await cached[1]
        if len(cache) > 10_000:
            for stale in [k for k, v in cache.items() if v[0] <= now]:
                del cache[stale]
        return await self._lookup(cache, key, ttl, fn, *args)

    def _refreshed(self, ahead: tuple, task: asyncio.Future) -> None:
        self._refreshing.discard(ahead)
        if not task.cancelled() and task.exception() is not None:
            log.warning("gateway: looking up again failed: %s", task.exception())

    async def _lookup(self, cache: dict, key, ttl: float, fn, *args):
        until = time.monotonic() + ttl
        lookup = asyncio.ensure_future(self._in_thread(fn, *args))
        if key not in cache or cache[key][0] <= time.monotonic():
            cache[key] = (until, lookup)  # later requests wait for this one lookup
        try:
            answer = await asyncio.shield(lookup)
        except Exception:
            if cache.get(key, (0, None))[1] is lookup:
                cache.pop(key, None)  # a failed lookup is not remembered
            raise
        cache[key] = (until, lookup)
        return answer

    async def access_for(self, token: str) -> ModelAccess | None:
        return await self._cached(self._access, token, ACCESS_TTL, model_access.active, token)

    async def redactor_for(self, repository_id: int) -> Redactor | None:
        return await self._cached(
            self._scrubbers, repository_id, SCRUB_TTL, scrubber, repository_id
        )

    async def upstream_for(self, provider: str) -> Upstream:
        """The provider's key and address in force (the environment, else the Models page)."""
        now = time.monotonic()
        held = self._upstreams.get(provider)
        if held is not None and now - held[0] < UPSTREAM_STALE_MAX:
            if now - held[0] >= UPSTREAM_TTL:
                self._look_up_upstream(provider)  # in the background; this request goes on
            return held[1]
        return await asyncio.shield(self._look_up_upstream(provider))

    def _look_up_upstream(self, provider: str) -> asyncio.Future:
        """One lookup at a time per provider; its answer is kept for the requests after."""
        lookup = self._upstream_lookups.get(provider)
        if lookup is not None and not lookup.done():
            return lookup
        started = time.monotonic()
        lookup = asyncio.ensure_future(self._in_thread(configured_upstream, provider))
        self._upstream_lookups[provider] = lookup

        def keep(done: asyncio.Future) -> None:
            if done.cancelled():
                return
            if done.exception() is not None:
                log.warning("gateway: reading the %s provider failed: %s", provider,
                            done.exception())  # fmt: skip
                return
            self._upstreams[provider] = (started, done.result())

        lookup.add_done_callback(keep)
        return lookup

    async def __call__(self, request: Request, respond: Responder) -> None:
        if request.path == "/healthz" and request.method in ("GET", "HEAD"):
            await respond.whole(200, "application/json", b'{"status": "ok"}')
            return
        route = route_for(request.method, request.path)
        if route is None:
            provider = provider_of(request.path)
            why = f"the model gateway has no {request.method} {request.path}"
            await _error(respond, provider, 404, why)
            return
        self.in_flight += 1
        try:
            token = token_of(request.headers)
            access = await self.access_for(token) if token else None
            if access is None:
                await _error(respond, route.provider, 401, ACCESS_ENDED, code="invalid_api_key")
                return
            await self._handle(route, request, access, respond)
        except (ClientGone, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("gateway: a %s %s request failed", route.provider, route.endpoint)
            if respond.started:
                raise ClientGone from None  # mid-response: closing the connection says so
            await _error(respond, route.provider, 500, "the model gateway failed; see its log")
        finally:
            self.in_flight -= 1

    async def _handle(
        self, route: Route, request: Request, access: ModelAccess, respond: Responder
    ) -> None:
        started = time.monotonic()
        exchange = Exchange(
            access=access, provider=route.provider, endpoint=route.endpoint, model="",
            stream=False, status=0, outcome=Outcome.OK, request_body=request.body,
            response_body=b"",
        )  # fmt: skip
        redactor = await self.redactor_for(access.repository_id)
        failed_before_provider = False
        try:
            if route.has_body:
                try:
                    info = parse_request(route.endpoint, request.body)
                except BadRequest as exc:
                    body = error_body(route.provider, "invalid_request_error", str(exc))
                    param = exc.field
                    if route.provider != ANTHROPIC:
                        body = _with_param(body, param)
                    await self._refuse(exchange, respond, 400, body, Outcome.BAD_REQUEST, str(exc))
                    return
                exchange.model, exchange.stream = info.model, info.stream
                refusal = policy.check(access, info.model)
                if refusal is None:
                    refusal = await budgets.admit(access, info.model)
                if refusal is not None:
                    await self._refusal(exchange, respond, refusal)
                    return
                if redactor is not None:
                    exchange.request_body = await self._in_thread(
                        scrub_bytes, redactor, request.body
                    )
            await self._forward(route, request, exchange, respond, started)
        except (ClientGone, asyncio.CancelledError):
            raise
        except Exception:
            # A failure of the gateway's own before the provider answered: nothing to meter
            # (the error is logged); after it, what is known is recorded.
            failed_before_provider = exchange.status == 0
            raise
        finally:
            exchange.latency_ms = (time.monotonic() - started) * 1000
            if not failed_before_provider:
                self._record_later(exchange, redactor)

    async def _refusal(self, exchange: Exchange, respond: Responder, refusal: Refusal) -> None:
        body = error_body(exchange.provider, refusal.kind, refusal.message)
        await self._refuse(
            exchange, respond, refusal.status, body, refusal.outcome, refusal.message
        )

    async def _refuse(
        self, exchange: Exchange, respond: Responder, status: int, body: bytes, outcome: str,
        message: str,
    ) -> None:  # fmt: skip
        exchange.status, exchange.outcome, exchange.message = status, outcome, message
        exchange.response_body = body
        await respond.whole(status, "application/json", body)

    async def _forward(
        self, route: Route, request: Request, exchange: Exchange, respond: Responder,
        started: float,
    ) -> None:  # fmt: skip
        provider = await self.upstream_for(route.provider)
        headers = self.forwarder.upstream_headers(provider, request.headers)
        passage = Passage()
        meter = UsageMeter(route.provider, route.endpoint, exchange.stream)
        try:
            async with self.forwarder.open(
                provider, request.method, route.upstream_path, request.query, headers,
                exchange.request_body,
            ) as upstream:  # fmt: skip
                exchange.status = upstream.status
                if upstream.status >= 400:
                    await self._pass_error(provider, upstream, exchange, respond, passage, started)
                    return
                allowed = exchange.access.repository.allowed_models
                if route.endpoint == "models" and allowed:
                    await self._pass_models(upstream, allowed, respond, passage, started)
                    return
                await respond.start(upstream.status, upstream.headers)

                def seen(chunk: bytes) -> None:
                    passage.add(chunk, started)
                    meter.feed(chunk)

                # `send` waits while the client's socket is full; relay then stops reading.
                await relay(upstream.chunks, respond.send, seen)
                await respond.end()
        except Unreachable as exc:
            exchange.outcome, exchange.message = Outcome.UNREACHABLE, str(exc)
            if respond.started:
                raise ClientGone from None  # a broken stream: closing tells the client
            exchange.status = 502
            body = error_body(route.provider, _KINDS[route.provider][502], str(exc))
            passage.add(body, started)
            await respond.whole(502, "application/json", body)
        except ClientGone:
            exchange.outcome = Outcome.CLIENT_GONE
            exchange.message = "the runtime went away mid-response"
            raise
        except asyncio.CancelledError:
            exchange.outcome = Outcome.CLIENT_GONE
            exchange.message = "the gateway stopped mid-response"
            raise
        finally:
            usage = meter.finish()
            exchange.input_tokens = usage.input_tokens
            exchange.output_tokens = usage.output_tokens
            exchange.cached_tokens = usage.cached_tokens
            exchange.first_byte_ms = passage.first_byte_ms
            exchange.response_body = bytes(passage.head)
            exchange.response_sha256 = passage.digest.hexdigest()
            exchange.response_size = passage.size
            exchange.response_truncated = passage.size > len(passage.head)

    async def _pass_error(self, provider, upstream, exchange, respond, passage, started) -> None:
        """The provider's error, status and body as it gave them (its key taken out)."""
        body = bytearray()
        async for chunk in upstream.chunks:
            body += chunk
            if len(body) > MAX_ERROR_BODY:
                break
        clean = bytes(body)
        key = provider.key
        if key:
            clean = clean.replace(key.encode(), b"[redacted]")
        passage.add(clean, started)
        exchange.outcome = Outcome.UPSTREAM_ERROR
        exchange.message = _error_message(clean) or f"the provider answered {upstream.status}"
        headers = [(k, v) for k, v in upstream.headers if k != "content-length"]
        headers.append(("content-length", str(len(clean))))
        await respond.start(upstream.status, headers)
        await respond.send(clean)
        await respond.end()

    async def _pass_models(self, upstream, allowed, respond, passage, started) -> None:
        """The provider's model list, narrowed to the models this repository may use (what a
        runtime offers its user is then what the policy lets through)."""
        body = bytearray()
        async for chunk in upstream.chunks:
            body += chunk
            if len(body) > MAX_ERROR_BODY:
                break
        try:
            listing = json.loads(body)
            listing["data"] = [
                m for m in listing["data"]
                if policy.model_allowed(str(m.get("id", "")), [str(a) for a in allowed])
            ]  # fmt: skip
            narrowed = json.dumps(listing).encode()
        except (ValueError, KeyError, TypeError, AttributeError):
            narrowed = bytes(body)  # not a listing this gateway understands: as it came
        passage.add(narrowed, started)
        headers = [(k, v) for k, v in upstream.headers if k != "content-length"]
        headers.append(("content-length", str(len(narrowed))))
        await respond.start(upstream.status, headers)
        await respond.send(narrowed)
        await respond.end()

    def _record_later(self, exchange: Exchange, redactor: Redactor | None) -> None:
        task = asyncio.get_running_loop().create_task(self._record(exchange, redactor))
        self._records.add(task)
        task.add_done_callback(self._records.discard)

    async def _record(self, exchange: Exchange, redactor: Redactor | None) -> None:
        def scrub_and_record() -> None:
            exchange.response_body = scrub_bytes(redactor, exchange.response_body)
            if exchange.outcome in (Outcome.BAD_REQUEST, Outcome.REFUSED_POLICY,
                                    Outcome.REFUSED_BUDGET):  # fmt: skip
                exchange.request_body = scrub_bytes(redactor, exchange.request_body)
            record(exchange)

        try:
            await self._in_thread(scrub_and_record)
        except Exception:  # a lost record must never take the gateway down
            log.exception(
                "gateway: recording a %s %s request of session %s failed",
                exchange.provider, exchange.endpoint, exchange.access.session_id,
            )  # fmt: skip

    async def drain(self) -> None:
        """Wait for the records still being written (at shutdown)."""
        if self._records:
            await asyncio.gather(*self._records, return_exceptions=True)


async def _error(
    respond: Responder, provider: str, status: int, message: str, code: str | None = None
) -> None:
    body = error_body(provider, _KINDS[provider][status], message, code)
    await respond.whole(status, "application/json", body)


def _with_param(body: bytes, param: str) -> bytes:
    data = json.loads(body)
    data["error"]["param"] = param
    return json.dumps(data).encode()


def _error_message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body[:500].decode("utf-8", "replace")
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")[:500]
    return str(error or "")[:500]
