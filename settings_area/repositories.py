"""Settings pages: the repositories an admin manages. Site admins add repositories here; a
repository's admins change its default branch and archive it. Every change goes through
snapshots.repositories, as `inspect repo …` does, and is audited there."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from settings_area.access import (
    administered,
    is_site_admin,
    may_open_settings,
    repository_for_settings,
    require_site_admin,
)
from snapshots.repositories import (
    RepositoryRefused,
    repository_add,
    repository_archive,
    repository_set_branch,
)


class AddRepositoryForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="Short name used in URLs, the CLI and Slack (a-z, 0-9, . _ -)."
    )
    url = forms.CharField(
        label="URL or path", max_length=500, help_text="Any git URL, or a path on this server."
    )
    branch = forms.CharField(
        required=False,
        max_length=200,
        help_text="Empty: the repository's own default branch, detected.",
    )


class BranchForm(forms.Form):
    branch = forms.CharField(
        label="Default branch",
        max_length=200,
        help_text="Where new sessions and snapshot builds start; it must exist.",
    )


def _refused(form: forms.Form, exc: RepositoryRefused) -> None:
    form.add_error(exc.field if exc.field in form.fields else None, str(exc))


@login_required
def repository_list(request: HttpRequest) -> HttpResponse:
    if not may_open_settings(request.user):
        raise PermissionDenied("Settings are for repository and site admins.")
    site_admin = is_site_admin(request.user)
    form = None
    if site_admin:
        # Prefilled from ?name=&url= (the GitHub page links here with a repository picked).
        initial = {key: request.GET.get(key, "") for key in ("name", "url")}
        form = AddRepositoryForm(request.POST or None, initial=initial)
    if request.method == "POST":
        require_site_admin(request.user)
        if form.is_valid():
            data = form.cleaned_data
            try:
                repository = repository_add(
                    name=data["name"],
                    url=data["url"],
                    branch=data["branch"].strip() or None,
                    by=request.user,
                )
            except RepositoryRefused as exc:
                _refused(form, exc)
            else:
                messages.success(
                    request,
                    f"Added {repository.name} (default branch {repository.default_branch}).",
                )
                return redirect("settings_area:repository", repository.name)
    return render(
        request,
        "settings_area/repositories.html",
        {
            "repositories": administered(request.user),
            "site_admin": site_admin,
            "form": form,
        },
        status=400 if form is not None and form.errors else 200,
    )


@login_required
def repository_general(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    form = BranchForm(request.POST or None, initial={"branch": repository.default_branch})
    if request.method == "POST" and form.is_valid():
        try:
            repository_set_branch(repository, form.cleaned_data["branch"], by=request.user)
        except RepositoryRefused as exc:
            _refused(form, exc)
        else:
            messages.success(request, f"New sessions start from {repository.default_branch}.")
            return redirect("settings_area:repository", repository.name)
    return render(
        request,
        "settings_area/repository.html",
        {"repository": repository, "branch_form": form},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def repository_archive_view(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    undo = request.POST.get("undo") == "1"
    repository_archive(repository, by=request.user, undo=undo)
    if undo:
        messages.success(request, f"{repository.name} is active again.")
    else:
        messages.success(
            request,
            f"{repository.name} is archived: no new sessions or scheduled refreshes; its "
            "history stays.",
        )
    return redirect("settings_area:repository", repository.name)


urlpatterns = [
    path("repositories/", repository_list, name="repositories"),
    path("repositories/<slug:name>/", repository_general, name="repository"),
    path(
        "repositories/<slug:name>/archive/",
        repository_archive_view,
        name="repository_archive",
    ),
]
