"""Settings pages: the repositories an admin manages."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from settings_area.access import (
    administered,
    is_site_admin,
    may_open_settings,
    repository_for_settings,
)


@login_required
def repository_list(request: HttpRequest) -> HttpResponse:
    if not may_open_settings(request.user):
        raise PermissionDenied("Settings are for repository and site admins.")
    return render(
        request,
        "settings_area/repositories.html",
        {"repositories": administered(request.user), "site_admin": is_site_admin(request.user)},
    )


@login_required
def repository_general(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    return render(request, "settings_area/repository.html", {"repository": repository})


urlpatterns = [
    path("repositories/", repository_list, name="repositories"),
    path("repositories/<slug:name>/", repository_general, name="repository"),
]
