"""Settings page: when the review agent reviews a repository's pull requests (its admins).
Thin: the action is sessions.review_agent.review_agent_policy_set."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods

from sessions.review_agent import review_agent_policy_set
from settings_area.access import repository_for_settings
from snapshots.models import Repository

POLICY_CHOICES = Repository._meta.get_field("review_agent").choices


@login_required
@require_http_methods(["GET", "POST"])
def repository_review(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the page; POST: the policy."""
    repository = repository_for_settings(request.user, name)
    error, notice = "", "Saved." if request.GET.get("done") else ""
    if request.method == "POST":
        try:
            review_agent_policy_set(
                repository=repository, policy=request.POST.get("policy", ""), by=request.user
            )
        except ValueError as exc:
            error = str(exc)
            repository.refresh_from_db()
        else:
            response = redirect("settings_area:repository_review", name=repository.name)
            response["Location"] += "?done=1"
            return response
    context = {"repository": repository, "error": error, "notice": notice,
               "policies": POLICY_CHOICES}  # fmt: skip
    return render(
        request, "settings_area/repository_review.html", context, status=400 if error else 200
    )


urlpatterns = [
    path("repositories/<slug:name>/review-agent/", repository_review, name="repository_review"),
]
