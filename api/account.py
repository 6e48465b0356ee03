"""The account's API tokens page: create (the token is shown once), list, revoke."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from api import tokens
from api.models import ApiToken


def _page(request: HttpRequest, *, new_token: str = "", error: str = "", status: int = 200):
    context = {
        "tokens": ApiToken.objects.filter(user=request.user),
        "expiry_days": tokens.EXPIRY_DAYS,
        "default_days": tokens.DEFAULT_EXPIRY_DAYS,
        "new_token": new_token,
        "error": error,
        "api_base": request.build_absolute_uri("/"),
    }
    template = "api/_tokens.html" if request.htmx else "api/tokens.html"
    return render(request, template, context, status=status)


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request)
    try:
        days = int(request.POST.get("expires_in_days", tokens.DEFAULT_EXPIRY_DAYS))
        _, raw = tokens.token_create(
            user=request.user, name=request.POST.get("name", ""), expires_in_days=days
        )
    except (ValueError, tokens.TokenError) as exc:
        message = str(exc) if isinstance(exc, tokens.TokenError) else "pick an expiry"
        return _page(request, error=message, status=400)
    # Rendered in this response only: the hash is all that is kept.
    return _page(request, new_token=raw)


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    if tokens.token_revoke(token=token, user=request.user):
        messages.success(request, f"Token “{token.name}” is revoked; clients using it are refused.")
    if request.htmx:
        return _page(request)
    return redirect("api-tokens")
