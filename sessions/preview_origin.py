"""The optional separate preview origin (`INSPECT_PREVIEW_ORIGIN`, recommended in production).

Without it, the live preview is served from the dashboard's origin, confined by a CSP sandbox.
With it, the agent-written application never runs on the dashboard's origin at all:

1. On the dashboard, `/sessions/<id>/preview/<path>` checks the viewer's login and membership,
   then redirects to the same path on the preview origin with an entry token in the address
   (`?inspect_preview_entry=`): random, single use, valid ENTRY_SECONDS, kept in Redis as its
   hash with the user and the session.
2. The preview origin spends the token and answers with a cookie scoped to that origin and to
   that session's preview path (signed user and session, HttpOnly, SameSite=Lax, Secure over
   https, PREVIEW_COOKIE_SECONDS), then redirects to the address without the token.
3. Later requests there carry the cookie; the view re-checks membership on every request.

The preview origin answers nothing but preview paths (404 otherwise), and the dashboard's own
login counts for nothing there.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from urllib.parse import parse_qsl, urlencode, urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core import signing
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.encoding import escape_uri_path

from inspect_web.redis_client import get_redis

ENTRY_PARAMETER = "inspect_preview_entry"
ENTRY_PREFIX = "inspv_"
ENTRY_SECONDS = 60
COOKIE = "inspect_preview"
SALT = "inspect.preview-origin"
PREVIEW_PATH = re.compile(r"^/sessions/(?P<pk>\d+)/preview(?:/|$)")
DEFAULT_PORTS = {"http": 80, "https": 443}


def _host_port(netloc: str, scheme: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        return parts.hostname or "", parts.port or DEFAULT_PORTS[scheme]
    except ValueError:  # a port that is not a number
        return None


def host_is_preview_origin(host: str) -> bool:
    """Whether a request's Host header names the preview origin."""
    if not settings.PREVIEW_ORIGIN or not host:
        return False
    origin = urlsplit(settings.PREVIEW_ORIGIN)
    return _host_port(host, origin.scheme) == _host_port(origin.netloc, origin.scheme)


def on_preview_origin(request: HttpRequest) -> bool:
    return host_is_preview_origin(request.get_host())


def _entry_key(raw: str) -> str:
    return f"inspect:preview-entry:{hashlib.sha256(raw.encode()).hexdigest()}"


def _query_without_entry(request: HttpRequest) -> list[tuple[str, str]]:
    pairs = parse_qsl(request.META.get("QUERY_STRING", ""), keep_blank_values=True)
    return [(name, value) for name, value in pairs if name != ENTRY_PARAMETER]


def entry_url(request: HttpRequest, *, user, session_id: int) -> str:
    """The address on the preview origin that signs `user` in to session `session_id`'s
    preview and lands on the same path and query as `request`."""
    raw = ENTRY_PREFIX + secrets.token_urlsafe(32)
    get_redis().set(_entry_key(raw), f"{user.pk}:{session_id}", ex=ENTRY_SECONDS)
    query = _query_without_entry(request)
    query.append((ENTRY_PARAMETER, raw))
    return f"{settings.PREVIEW_ORIGIN}{escape_uri_path(request.path)}?{urlencode(query)}"


def enter(request: HttpRequest, session_id: int) -> HttpResponse:
    """On the preview origin: spend the entry token, set the preview cookie, and go to the same
    address without the token. A spent, expired or foreign token signs nobody in."""
    session_id = int(session_id)  # a URL argument: text
    raw = request.GET.get(ENTRY_PARAMETER, "")
    owner = None
    if raw.startswith(ENTRY_PREFIX) and len(raw) < 200:
        with get_redis().pipeline(transaction=True) as pipe:  # GET + DEL at once: one use
            owner, _ = pipe.get(_entry_key(raw)).delete(_entry_key(raw)).execute()
    user_id, _, entered = (owner or b"").decode().partition(":")
    user = (
        get_user_model().objects.filter(pk=int(user_id), is_active=True).first()
        if user_id.isdigit() and entered == str(session_id)
        else None
    )
    if user is None:
        return not_signed_in()
    query = _query_without_entry(request)
    clean = escape_uri_path(request.path) + (f"?{urlencode(query)}" if query else "")
    response = HttpResponseRedirect(clean)
    response.set_cookie(
        COOKIE,
        signing.dumps({"u": user.pk, "s": session_id, "h": _auth_hash(user)}, salt=SALT),
        max_age=settings.PREVIEW_COOKIE_SECONDS,
        path=f"/sessions/{session_id}/preview/",
        secure=settings.PREVIEW_ORIGIN.startswith("https:"),
        httponly=True,
        samesite="Lax",
    )
    response["Cache-Control"] = "no-store"
    return response


def _auth_hash(user) -> str:
    # Changes with the password: a password change ends every preview cookie of the user.
    return user.get_session_auth_hash()[:20]


def cookie_user(cookies: dict, session_id: int):
    """The active user the preview cookie was given to for this session, or None."""
    session_id = int(session_id)
    try:
        data = signing.loads(
            cookies.get(COOKIE, ""), salt=SALT, max_age=settings.PREVIEW_COOKIE_SECONDS
        )
    except signing.BadSignature:  # includes SignatureExpired
        return None
    if not isinstance(data, dict) or data.get("s") != session_id:
        return None
    user = get_user_model().objects.filter(pk=data.get("u"), is_active=True).first()
    if user is None or not secrets.compare_digest(str(data.get("h", "")), _auth_hash(user)):
        return None
    return user


def not_signed_in() -> HttpResponse:
    return HttpResponse(
        "This preview link has expired or was not opened from the dashboard. Open the live "
        "preview again from the session's page.",
        status=403,
        content_type="text/plain; charset=utf-8",
    )


class PreviewOriginMiddleware:
    """On the preview origin, only preview paths are served (the dashboard, its API, admin and
    static files answer 404 there). Nothing changes when INSPECT_PREVIEW_ORIGIN is unset."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            settings.PREVIEW_ORIGIN
            and not PREVIEW_PATH.match(request.path_info)
            and host_is_preview_origin(request.META.get("HTTP_HOST", ""))
        ):
            return HttpResponse(
                "Not found: this origin serves session previews only.",
                status=404,
                content_type="text/plain; charset=utf-8",
            )
        return self.get_response(request)


class PreviewOriginWebsockets:
    """ASGI middleware (inside AuthMiddlewareStack) for websockets when a preview origin is
    set: on the preview origin, a preview websocket's user is the preview cookie's (never the
    dashboard's login) and nothing else is served; on the dashboard, preview websockets are
    refused (the preview's pages, and so their websockets, live on the preview origin)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket" or not settings.PREVIEW_ORIGIN:
            return await self.inner(scope, receive, send)
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        match = PREVIEW_PATH.match(scope.get("path", ""))
        if host_is_preview_origin(host) != bool(match):
            await send({"type": "websocket.close", "code": 4404})
            return None
        if match:
            user = await sync_to_async(cookie_user)(scope.get("cookies") or {}, int(match["pk"]))
            scope = {**scope, "user": user or AnonymousUser()}
        return await self.inner(scope, receive, send)
