"""Settings → GitHub (site admins): the App in force and where each setting comes from,
"Connect GitHub" (GitHub's App manifest flow) and adding repositories the App's installations
can read.

The flow's `state` is bound to the admin's session and used once: the callback pops it before
anything else, so a forged, replayed or stale one (or another user's) stores nothing.
"""

from __future__ import annotations

import json
import secrets
import time

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.validators import URLValidator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from integrations.github import app_settings, installations, manifest
from settings_area.access import require_site_admin
from snapshots.repositories import RepositoryRefused

PENDING = "github_manifest"  # the session key of a Connect GitHub in progress
PENDING_SECONDS = 3600  # GitHub's manifest codes live an hour; a state no longer


class ConnectForm(forms.Form):
    name = forms.CharField(
        label="App name",
        max_length=34,  # GitHub's limit on App names
        initial="Inspect Web",
        help_text="Unique on GitHub; you can change it on GitHub's page.",
    )
    web_url = forms.CharField(
        label="GitHub address",
        initial=app_settings.GITHUB_COM,
        help_text="https://github.com, or your GitHub Enterprise Server (https://HOST; its API "
        "is https://HOST/api/v3).",
    )
    organization = forms.CharField(
        label="Organization (optional)",
        required=False,
        max_length=39,
        help_text="Create the App owned by this organization instead of your own account.",
    )

    def clean_web_url(self) -> str:
        value = self.cleaned_data["web_url"].strip().rstrip("/")
        try:
            URLValidator(schemes=["http", "https"])(value)
        except forms.ValidationError:
            raise forms.ValidationError(
                "Give GitHub's address as https://HOST (for GitHub.com: https://github.com)."
            ) from None
        return value

    def clean_organization(self) -> str:
        value = self.cleaned_data["organization"].strip()
        if value and not all(c.isalnum() or c == "-" for c in value):
            raise forms.ValidationError("An organization's login has letters, digits and '-'.")
        return value


class AddForm(forms.Form):
    installation_id = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    full_name = forms.CharField(max_length=200, widget=forms.HiddenInput)
    name = forms.SlugField(label="Name here", max_length=100)


def _page(request: HttpRequest, *, connect=None, add=None, add_error=None, status=200):
    found, unavailable, app = [], "", None
    if app_settings.app_configured():
        try:
            app = installations.the_app()
            found = installations.installations()
        except installations.InstallationsUnavailable as exc:
            unavailable = str(exc)
    slug = app_settings.app_slug()
    return render(
        request,
        "settings_area/github.html",
        {
            "rows": app_settings.shown(),
            "configured": app_settings.app_configured(),
            "app": app,
            "overridden": manifest.overridden(),
            "install_url": manifest.install_url(web_url=app_settings.web_url(), slug=slug),
            "connect_form": connect or ConnectForm(initial={"web_url": app_settings.web_url()}),
            "installations": found,
            "unavailable": unavailable,
            "add_form": add,
            "add_error": add_error,
        },
        status=status,
    )


@login_required
@require_GET
def github_settings(request: HttpRequest) -> HttpResponse:
    require_site_admin(request.user)
    return _page(request)


@login_required
@require_POST
def github_connect(request: HttpRequest) -> HttpResponse:
    """Start the manifest flow: a page that posts the manifest to GitHub (by itself)."""
    require_site_admin(request.user)
    form = ConnectForm(request.POST)
    if not form.is_valid():
        return _page(request, connect=form, status=400)
    state = secrets.token_urlsafe(32)
    web_url = form.cleaned_data["web_url"]
    request.session[PENDING] = {
        "state": state,
        "web_url": web_url,
        "api_url": app_settings.api_url_to_connect(web_url),
        "user": request.user.pk,
        "started": time.time(),
    }
    app_manifest = manifest.manifest_for(
        name=form.cleaned_data["name"],
        site_url=request.build_absolute_uri("/"),
        redirect_url=request.build_absolute_uri(reverse("settings_area:github_callback")),
        setup_url=request.build_absolute_uri(reverse("settings_area:github")),
    )
    return render(
        request,
        "settings_area/github_manifest.html",
        {
            "action": manifest.new_app_url(
                web_url=web_url, state=state, organization=form.cleaned_data["organization"]
            ),
            "manifest": json.dumps(app_manifest),
            "app_manifest": app_manifest,
        },
    )


def _refuse(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "settings_area/github_refused.html", {"message": message}, status=400)


@login_required
@require_GET
def github_callback(request: HttpRequest) -> HttpResponse:
    """GitHub's redirect after the App was created: check the state, convert, store."""
    require_site_admin(request.user)
    pending = request.session.pop(PENDING, None)  # single use, whatever happens next
    state = request.GET.get("state", "")
    if (
        not isinstance(pending, dict)
        or not state
        or not secrets.compare_digest(str(pending.get("state", "")).encode(), state.encode())
        or pending.get("user") != request.user.pk
    ):
        return _refuse(
            request,
            "This answer from GitHub does not belong to a Connect GitHub started in this browser "
            "session (or it was already used). Nothing was stored; start Connect GitHub again.",
        )
    if time.time() - float(pending.get("started", 0)) > PENDING_SECONDS:
        return _refuse(request, "This Connect GitHub was started over an hour ago; start again.")
    try:
        app = manifest.connect_app(
            request.GET.get("code", ""),
            web_url=pending["web_url"],
            api_url=pending["api_url"],
            by=request.user,
        )
    except manifest.ConnectRefused as exc:
        return _refuse(request, f"{exc}. Nothing was stored.")
    note = f"GitHub App {app.name} ({app.slug}, id {app.id}) connected."
    if app.overridden:
        note += (
            f" The environment still sets {', '.join(app.overridden)}: those values are in "
            "force, not the App's, until they are removed from the environment."
        )
    messages.success(request, note + " Now install it on your repositories.")
    return redirect("settings_area:github")


@login_required
@require_POST
def github_add(request: HttpRequest) -> HttpResponse:
    """Add a repository an installation can read, linked to it."""
    require_site_admin(request.user)
    form = AddForm(request.POST)
    if not form.is_valid():
        return _page(request, add=form, add_error="Choose a repository and a name.", status=400)
    data = form.cleaned_data
    try:
        repository = installations.add_installed_repository(
            installation_id=data["installation_id"],
            full_name=data["full_name"],
            name=data["name"],
            by=request.user,
        )
    except RepositoryRefused as exc:
        return _page(request, add=form, add_error=f"{data['full_name']}: {exc}", status=400)
    messages.success(
        request,
        f"Added {repository.name} from {data['full_name']} (default branch "
        f"{repository.default_branch}), linked to GitHub.",
    )
    return redirect("settings_area:github")


urlpatterns = [
    path("github/", github_settings, name="github"),
    path("github/connect/", github_connect, name="github_connect"),
    path("github/callback/", github_callback, name="github_callback"),
    path("github/add/", github_add, name="github_add"),
]
