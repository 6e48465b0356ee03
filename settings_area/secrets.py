"""Settings page: a repository's secrets — added, replaced and deleted through the same actions
as `inspect secret` (approvals.secrets, which validate and audit). Values are write-only: the
page never renders one back, not even its length."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from approvals.models import RepositorySecret
from approvals.secrets import SecretsUnavailable, secret_delete, secret_set
from settings_area.access import repository_for_settings


class SecretForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="An environment variable name, e.g. NPM_TOKEN. An existing name is replaced.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    scope = forms.ChoiceField(
        choices=RepositorySecret.Scope.choices, initial=RepositorySecret.Scope.SETUP_START
    )
    value = forms.CharField(
        strip=False,
        help_text="Write-only: it is never shown again.",
        # Never rendered back, even after an error; never offered by the browser's autofill.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )


def _page(request: HttpRequest, repository, form: SecretForm, status: int = 200) -> HttpResponse:
    secrets = RepositorySecret.objects.filter(repository=repository).order_by("name")
    context = {"repository": repository, "form": form, "secrets": secrets}
    return render(request, "settings_area/secrets.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def secrets_page(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    if request.method == "GET":
        replacing = RepositorySecret.objects.filter(
            repository=repository, name=request.GET.get("name", "")
        ).first()
        initial = {"name": replacing.name, "scope": replacing.scope} if replacing else {}
        return _page(request, repository, SecretForm(initial=initial))
    form = SecretForm(request.POST)
    if not form.is_valid():
        return _page(request, repository, form, status=400)
    try:
        secret_set(
            repository=repository,
            name=form.cleaned_data["name"],
            value=form.cleaned_data["value"],
            scope=form.cleaned_data["scope"],
            by=request.user,
        )
    except SecretsUnavailable as exc:
        form.add_error(None, str(exc))
        return _page(request, repository, form, status=400)
    except ValidationError as exc:
        if hasattr(exc, "error_dict"):
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            form.add_error("value", exc.messages)
        return _page(request, repository, form, status=400)
    messages.success(
        request, f"Secret {form.cleaned_data['name']} of {repository.name} saved (write-only)."
    )
    return redirect("settings_area:secrets", repository.name)


@login_required
@require_POST
def secret_remove(request: HttpRequest, name: str, secret: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    if secret_delete(repository=repository, name=secret, by=request.user):
        messages.success(request, f"Secret {secret} of {repository.name} deleted.")
    else:
        messages.error(request, f"{repository.name} has no secret named {secret}.")
    return redirect("settings_area:secrets", repository.name)


urlpatterns = [
    path("repositories/<slug:name>/secrets/", secrets_page, name="secrets"),
    path(
        "repositories/<slug:name>/secrets/<str:secret>/delete/",
        secret_remove,
        name="secret_delete",
    ),
]
