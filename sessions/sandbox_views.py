"""Views into a session's sandbox and files: its screenshots, its event artifacts and its live
preview. Members only (404 for everyone else, as for a session that does not exist)."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.csrf import csrf_exempt

from accounts import access
from approvals.audit import record
from sessions import artifacts
from sessions import preview as live
from sessions import preview_origin as origin
from sessions.live_access import visible_session
from sessions.models import Session
from sessions.screenshots import artifact_name, preview_port, screenshot_link_valid

KEY = re.compile(r"^[0-9a-f]{32}$")


def screenshot_image(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    """One screenshot's PNG: for members, or for anyone holding its signed link (the pull
    request body's images, which the code host fetches without a login)."""
    if not screenshot_link_valid(pk, key, request.GET.get("s", "")):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    name = artifact_name(pk, key)
    if not KEY.match(key) or not default_storage.exists(name):
        raise Http404("No such screenshot in this session.")
    response = FileResponse(default_storage.open(name, "rb"), content_type="image/png")
    response["Cache-Control"] = "private, max-age=86400, immutable"
    return response


def event_artifact(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """One artifact of session `pk`, for members of its repository (the live streams' access
    check, sessions.live_access.visible_session)."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if visible_session(request.user, pk) is None:
        raise Http404("No session matches this address.")
    path = artifacts.path_of(pk, name)
    if not artifacts.NAME.match(name) or not default_storage.exists(path):
        raise Http404("No such artifact in this session.")
    response = FileResponse(default_storage.open(path, "rb"), content_type="application/json")
    response["Cache-Control"] = "private, max-age=86400, immutable"
    response["X-Content-Type-Options"] = "nosniff"
    return response


# The previewed application may post forms to itself; the dashboard's CSRF token is not its.
# It is safe to exempt: the request reaches only the sandbox, never the dashboard's state, and
# the viewer's cookies are not forwarded.
@csrf_exempt
def preview_proxy(request: HttpRequest, pk: int, path: str = "") -> HttpResponse:
    """The session's running application, proxied from inside its sandbox. With a separate
    preview origin (INSPECT_PREVIEW_ORIGIN) it is served there only: the dashboard hands a
    member over with an entry token (sessions.preview_origin)."""
    prefix = f"/sessions/{int(pk)}/preview/"
    if settings.PREVIEW_ORIGIN and origin.on_preview_origin(request):
        if not request.path.startswith(prefix):  # the cookie's path is the prefix
            return redirect(prefix)
        if origin.ENTRY_PARAMETER in request.GET:
            return origin.enter(request, pk)
        viewer = origin.cookie_user(request.COOKIES, pk)
        if viewer is None:
            return origin.not_signed_in()
    elif not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    else:
        viewer = request.user
    session = access.get_visible_or_404(
        viewer, Session.objects.select_related("snapshot", "repository"), pk=pk
    )
    if not request.path.startswith(prefix):
        return redirect(prefix)
    if settings.PREVIEW_ORIGIN and not origin.on_preview_origin(request):
        return redirect(origin.entry_url(request, user=viewer, session_id=session.pk))
    try:
        preview = live.session_preview(session)
        sandbox = live.live_sandbox(session)
        try:
            sock = live.open_preview(sandbox, preview, start=False)
        except live.PreviewNotRunning:
            record(
                "preview.start",
                actor=viewer,
                session=session,
                object_type="session",
                object_id=session.pk,
                data={"command": preview.command},
            )
            sock = live.open_preview(sandbox, preview)
        target = "/" + path + (f"?{request.META['QUERY_STRING']}" if request.GET else "")
        proxied = live.forward(
            sock,
            method=request.method or "GET",
            target=target,
            headers=dict(request.headers),
            body=request.body,
            port=preview_port(preview),
            prefix=prefix,
            app_url=preview.url,
        )
    except live.PreviewUnavailable as exc:
        if exc.status == 404:
            raise Http404(str(exc)) from None
        return HttpResponse(str(exc), status=exc.status, content_type="text/plain; charset=utf-8")
    response = HttpResponse(proxied.body, status=proxied.status, reason=proxied.reason)
    for name, value in proxied.headers:
        response[name] = value
    response["Content-Security-Policy"] = live.CONFINE
    response["Cache-Control"] = "private, no-store"
    return response
