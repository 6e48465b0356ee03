from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts import access
from sessions.models import Session
from settings_area.access import may_open_settings
from settings_area.checklist import first_run_steps


@login_required
def home(request: HttpRequest) -> HttpResponse:
    repositories = access.repositories_for(request.user).filter(archived_at__isnull=True)
    recent = access.visible_to(request.user, Session.objects.select_related("repository"))[:10]
    return render(
        request,
        "home.html",
        {
            "repositories": repositories,
            "recent": recent,
            "checklist": first_run_steps(request.user),
            "may_open_settings": may_open_settings(request.user),
        },
    )
