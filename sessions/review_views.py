"""The diff panel's per-viewer requests: a changed file read whole, and "viewed" marks.
Members of the session's repository only (404 for everyone else, as for a session that does
not exist); what can be refused is refused with a message the panel shows."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from accounts import access
from sessions import diff_render
from sessions.diff_review import DiffReviewError, diff_file_mark_viewed, whole_file
from sessions.models import Session


@login_required
@require_GET
def diff_file_context(request: HttpRequest, pk: int) -> HttpResponse:
    """One file of the session's diff, whole, with the diff's changes marked (both layouts)."""
    session = access.get_visible_or_404(
        request.user, Session.objects.select_related("repository"), pk=pk
    )
    try:
        path, commit = request.GET.get("path", ""), request.GET.get("commit", "")
        whole = whole_file(session, path, commit, actor=request.user)
    except DiffReviewError as exc:
        return render(
            request, "sessions/_diff_error.html", {"message": exc.message}, status=exc.status
        )
    view = diff_render.render_whole_file(whole.path, whole.patch, whole.content)
    return render(request, "sessions/_diff_whole_file.html", {"whole": whole, "view": view})


@login_required
@require_POST
def diff_file_viewed(request: HttpRequest, pk: int) -> HttpResponse:
    """Mark (viewed=1) or unmark (viewed=0) one file of the diff as viewed by this user."""
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    viewed = request.POST.get("viewed", "1")
    if viewed not in ("0", "1"):
        return JsonResponse({"error": "viewed must be 1 (viewed) or 0 (not viewed)."}, status=400)
    try:
        diff_file_mark_viewed(
            session=session,
            user=request.user,
            path=request.POST.get("path", ""),
            key=request.POST.get("key", ""),
            viewed=viewed == "1",
        )
    except DiffReviewError as exc:
        return JsonResponse({"error": exc.message}, status=exc.status)
    return JsonResponse({"viewed": viewed == "1"})
