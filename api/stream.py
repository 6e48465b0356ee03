"""A session's events as Server-Sent Events, for clients without websockets (the CLI, curl).

`GET /api/sessions/<id>/events/stream/` with `Authorization: Bearer …` (or a single-use
`?ticket=` from `POST /api/stream-tickets/`, or the browser's session cookie). A token is never
taken from the address: addresses end up in access logs. Each event is one SSE message: `id:`
is its seq, `data:` the same JSON object as the events endpoint's. Resume with the standard
`Last-Event-ID` header (or `?after=`): the stream starts after that seq, so a reconnecting
client gets every event once.
Like the websocket, the channel layer only wakes the stream; the rows come from the Event table
(DESIGN.md invariant 1), and without wake-ups the table is re-read every POLL_SECONDS.
A comment line (`: keepalive`) goes out when nothing happened for KEEPALIVE_SECONDS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from api.tokens import bearer_token, stream_ticket_redeem, token_authenticate
from sessions import live_access
from sessions.events import group_name
from sessions.stream.read import PAGE_SIZE, parse_after, read_events

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0
KEEPALIVE_SECONDS = 15.0


def _token_user(raw: str):
    token = token_authenticate(raw)
    return token.user if token else None


async def stream_user(request: HttpRequest):
    """The user of a request: its API token (header) or stream ticket (`?ticket=`), else its
    session cookie."""
    raw = bearer_token(request.headers.get("Authorization", ""))
    if raw:
        return await sync_to_async(_token_user)(raw)
    if request.GET.get("ticket"):
        return await sync_to_async(stream_ticket_redeem)(request.GET["ticket"])
    user = await request.auser()
    return user if user.is_authenticated else None


def _start_after(request: HttpRequest) -> int:
    """ValueError says what is wrong with the seq the client says it has."""
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or "0"
    return parse_after(raw.strip())  # a header's surrounding blanks are not part of it


@require_GET
async def session_event_stream(request: HttpRequest, pk: int) -> HttpResponse:
    user = await stream_user(request)
    if user is None:
        return JsonResponse(
            {
                "detail": "send an API token as `Authorization: Bearer insp_…` (tokens in the "
                "address are refused), or a ticket from POST /api/stream-tickets/ as `?ticket=`"
            },
            status=401,
        )
    try:
        after = _start_after(request)
    except ValueError as exc:
        return JsonResponse({"detail": f"`Last-Event-ID` / `after` {exc}"}, status=400)
    if await sync_to_async(live_access.visible_session)(user, pk) is None:
        return JsonResponse(
            {"detail": "This session does not exist or you are not a member of its repository."},
            status=404,
        )
    response = StreamingHttpResponse(_events(pk, after, user.pk), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each message on at once
    return response


async def _events(session_id: int, after: int, user_id: int) -> AsyncIterator[str]:
    layer = get_channel_layer()
    channel = None
    group = group_name(session_id)
    # Access is re-checked while the stream lasts (sessions.live_access): at once when told a
    # membership changed, else every recheck_seconds(); the stream ends when it is gone.
    user_group = live_access.user_group(user_id)
    checked = time.monotonic()
    try:
        if layer is not None:
            try:  # join before the first read, so nothing appended meanwhile goes unnoticed
                channel = await layer.new_channel()
                await layer.group_add(group, channel)
                await layer.group_add(user_group, channel)
            except Exception as exc:  # no wake-ups: polling still delivers everything
                log.warning("event stream of session %s polls only: %s", session_id, exc)
                channel = None
        yield "retry: 2000\n\n"
        quiet = 0.0
        while True:
            if time.monotonic() - checked >= live_access.recheck_seconds():
                checked = time.monotonic()
                if not await sync_to_async(live_access.still_sees_session)(user_id, session_id):
                    yield ": no longer a member of this session's repository\n\n"
                    return
            rows = await sync_to_async(read_events)(session_id, after)
            for seq, text in rows:
                yield f"id: {seq}\ndata: {text}\n\n"
                after = seq
            if len(rows) == PAGE_SIZE:
                continue
            if rows:
                quiet = 0.0
            waited = await _wait(layer, channel)
            if waited == live_access.ACCESS_CHANGED:
                checked = 0.0  # re-check before anything more is sent
            quiet = 0.0 if waited else quiet + POLL_SECONDS
            if quiet >= KEEPALIVE_SECONDS:
                quiet = 0.0
                yield ": keepalive\n\n"
    finally:
        if channel is not None:
            for name in (group, user_group):
                with contextlib.suppress(Exception):
                    await layer.group_discard(name, channel)


async def _wait(layer, channel) -> str:
    """Until a wake-up (the message's type) or POLL_SECONDS pass ("")."""
    if channel is None:
        await asyncio.sleep(POLL_SECONDS)
        return ""
    try:
        message = await asyncio.wait_for(layer.receive(channel), timeout=POLL_SECONDS)
        return str(message.get("type") or "wake-up")
    except TimeoutError:
        return ""
    except Exception:  # the layer failed: fall back to polling for this wait
        await asyncio.sleep(POLL_SECONDS)
        return ""


def scope_token_user(scope: dict):
    """The user of a websocket's API token (`Authorization: Bearer …`) or single-use stream
    ticket (`?ticket=`), or None. The session stream's websocket asks it through
    sessions.stream.base's registry (api.apps registers it): sessions sit below the API."""
    headers = dict(scope.get("headers") or [])
    raw = bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
    if raw:
        return _token_user(raw)
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    ticket = (query.get("ticket") or [""])[-1]
    return stream_ticket_redeem(ticket) if ticket else None
