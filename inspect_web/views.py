from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts import access
from sessions.models import Session


@login_required
def home(request: HttpRequest) -> HttpResponse:
    repositories = access.repositories_for(request.user).filter(archived_at__isnull=True)
    recent = access.visible_to(request.user, Session.objects.select_related("repository"))[:10]
    return render(request, "home.html", {"repositories": repositories, "recent": recent})
