"""Settings pages: the site's model provider accounts (site admins). Thin: each form calls an
action of `gateway.provider_accounts`, as `manage.py inspect models provider` does."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods

from gateway import provider_accounts as actions
from inspect_web import site_settings
from sessions.agents import provider_accounts as accounts
from settings_area.access import require_site_admin

SAVED = {
    "set": "Saved. The gateway uses it from its next request (within a few seconds).",
    "remove": "Removed.",
    "default_model": "Saved.",
}


def _page(
    request: HttpRequest,
    status: int = 200,
    *,
    errors: dict | None = None,
    results: dict | None = None,
    notice: dict | None = None,
    typed: dict | None = None,
) -> HttpResponse:
    """The page; `errors`, `results` (a Test's) and `notice` are keyed by account kind."""
    errors, results, notice, typed = errors or {}, results or {}, notice or {}, typed or {}
    cards = [
        {
            "account": account,
            "errors": errors.get(account.kind, {}),
            "result": results.get(account.kind),
            "notice": notice.get(account.kind, ""),
            "base_url": typed.get("base_url", "") if account.kind in errors else "",
            "needs_key": account.kind != accounts.COMPATIBLE,
            "has_url": account.kind != accounts.OPENAI,
        }
        for account in actions.provider_list()
    ]
    context = {
        "cards": cards,
        "default_model": site_settings.in_force(accounts.LLM_MODEL.name),
        "model_errors": errors.get("default_model", {}),
        "model_notice": notice.get("default_model", ""),
        "typed_model": typed.get("model"),
        "form_errors": {
            f: m
            for k, e in errors.items()
            if k not in accounts.KINDS and k != "default_model"
            for f, m in e.items()
        },
        "openai_default": accounts.OPENAI_BASE_URL,
        "anthropic_default": accounts.ANTHROPIC_BASE_URL,
    }
    return render(request, "settings_area/providers.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def providers(request: HttpRequest) -> HttpResponse:
    """GET: each account with where its values come from; POST: set, remove or test one
    (`action`, `kind`), or set the built-in agent's default model."""
    require_site_admin(request.user)
    if request.method == "GET":
        done = request.GET.get("done", "")
        kind = request.GET.get("kind", "")
        notice = {kind: SAVED[done]} if done in SAVED else {}
        return _page(request, notice=notice)
    action = request.POST.get("action", "")
    kind = request.POST.get("kind", "")
    try:
        if action == "set":
            actions.provider_set(
                kind=kind,
                by=request.user,
                key=request.POST.get("key", ""),
                base_url=request.POST.get("base_url"),  # absent: kept
            )
        elif action == "remove":
            actions.provider_remove(kind=kind, by=request.user)
        elif action == "test":
            result = actions.provider_test(kind=kind, by=request.user)
            return _page(request, results={kind: result})
        elif action == "default_model":
            kind = "default_model"
            actions.site_model_set(model=request.POST.get("model", ""), by=request.user)
        else:
            return _page(request, status=400, errors={"": {"form": f"Unknown action {action!r}."}})
    except actions.ProviderError as exc:
        typed = {"base_url": request.POST.get("base_url", ""), "model": request.POST.get("model")}
        return _page(
            request, status=400, errors={kind: {exc.field or "form": str(exc)}}, typed=typed
        )
    response = redirect("settings_area:providers")
    response["Location"] += f"?done={action}&kind={kind}#{kind}"
    return response


urlpatterns = [path("models/", providers, name="providers")]
