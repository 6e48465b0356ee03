from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from inspect_web import access
from sessions.models import Session


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    sessions = access.visible_to(
        request.user, Session.objects.select_related("repository", "creator")
    )
    return render(request, "sessions/list.html", {"sessions": sessions[:200]})


@login_required
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = access.get_visible_or_404(
        request.user, Session.objects.select_related("repository", "creator"), pk=pk
    )
    prompts = session.prompts.select_related("author")
    events = session.events.order_by("-seq")[:300]
    return render(
        request,
        "sessions/detail.html",
        {"session": session, "prompts": prompts, "events": reversed(list(events))},
    )
