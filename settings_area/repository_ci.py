"""Settings page: what a failed CI check on a session's pull request does in a repository (its
admins). Thin: the action is sessions.ci_fixes.ci_fix_policy_set, as for
`manage.py inspect github ci-fix`."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods

from sessions.ci_fixes import MAX_ATTEMPTS, ci_fix_policy_set
from settings_area.access import repository_for_settings
from snapshots.models import Repository

POLICY_CHOICES = Repository._meta.get_field("ci_fix_policy").choices


@login_required
@require_http_methods(["GET", "POST"])
def repository_ci(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the page; POST: the policy and the attempts per pull request."""
    repository = repository_for_settings(request.user, name)
    error, notice = "", "Saved." if request.GET.get("done") else ""
    if request.method == "POST":
        try:
            attempts = int(request.POST.get("attempts", "").strip())
        except ValueError:
            error = "Attempts must be a whole number."
        else:
            try:
                ci_fix_policy_set(repository=repository, policy=request.POST.get("policy", ""),
                                  attempts=attempts, by=request.user)  # fmt: skip
            except ValueError as exc:
                error = str(exc)
        if not error:
            response = redirect("settings_area:repository_ci", name=repository.name)
            response["Location"] += "?done=1"
            return response
        repository.refresh_from_db()
    context = {
        "repository": repository, "error": error, "notice": notice,
        "policies": POLICY_CHOICES, "max_attempts": MAX_ATTEMPTS,
    }  # fmt: skip
    return render(
        request, "settings_area/repository_ci.html", context, status=400 if error else 200
    )


urlpatterns = [
    path("repositories/<slug:name>/ci/", repository_ci, name="repository_ci"),
]
