"""Settings pages: a repository's models (its admins): the default model of its new sessions,
the models its agents may use, and its budgets (site admins set budgets, as on /budgets/; a
repository admin sees them). Thin: the actions are gateway.allowed_models and
gateway.budget_admin, as for `manage.py inspect models` and `inspect budget`."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods

from gateway import budget_admin
from gateway.allowed_models import ModelListError, allowed_models_set, default_model_set
from gateway.models import Budget
from sessions.agents import provider_accounts as accounts
from settings_area.access import repository_for_settings
from snapshots.models import Repository

SAVED = {
    "default_model": "Saved. New sessions that name no model use it.",
    "allowed": "Saved. Requests from now on follow this list.",
    "budget_set": "Budget saved.",
    "budget_remove": "Budget removed.",
}
SCOPE = Budget.Scope.REPOSITORY


def _page(
    request: HttpRequest,
    repository: Repository,
    status: int = 200,
    *,
    errors: dict | None = None,
    typed: dict | None = None,
    notice: str = "",
) -> HttpResponse:
    errors, typed = errors or {}, typed or {}
    rows = [r for r in budget_admin.budget_rows() if r.budget.repository_id == repository.pk]
    context = {
        "repository": repository,
        "errors": errors,
        "notice": notice,
        "default_model": typed.get("model", repository.default_model),
        "models_text": typed.get("models", "\n".join(repository.allowed_models or [])),
        "site_default_model": accounts.default_model(),
        "budget_rows": rows,
        "periods": Budget.Period.values,
        "budget_form": {
            "period": typed.get("period", "month"),
            "limit_usd": typed.get("limit_usd", ""),
        },
        "may_set_budgets": budget_admin.may_manage_budgets(request.user),
    }
    return render(request, "settings_area/repository_models.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def repository_models(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the page; POST `action`: default_model, allowed, budget_set, budget_remove."""
    repository = repository_for_settings(request.user, name)
    if request.method == "GET":
        return _page(request, repository, notice=SAVED.get(request.GET.get("done", ""), ""))
    action = request.POST.get("action", "")
    post = {k: request.POST.get(k, "").strip() for k in ("model", "models", "period", "limit_usd")}
    try:
        if action == "default_model":
            default_model_set(repository=repository, model=post["model"], by=request.user)
        elif action == "allowed":
            allowed_models_set(repository=repository, models=post["models"], by=request.user)
        elif action == "budget_set":
            budget_admin.budget_set(
                by=request.user, scope=SCOPE, period=post["period"], target=repository.name,
                limit_usd=post["limit_usd"],
            )  # fmt: skip
        elif action == "budget_remove":
            budget_admin.require_budget_admin(request.user)
            budget = budget_admin.budget_named(SCOPE, post["period"], repository.name)
            budget_admin.budget_remove(by=request.user, budget=budget)
        else:
            return _page(request, repository, 400, errors={"form": f"Unknown action {action!r}."})
    except ModelListError as exc:
        field = "model" if action == "default_model" else "models"
        typed = {field: post[field]}
        return _page(request, repository, 400, errors={action: str(exc)}, typed=typed)
    except budget_admin.BudgetError as exc:
        typed = {"period": post["period"], "limit_usd": post["limit_usd"]}
        return _page(request, repository, 400, errors={"budget": str(exc)}, typed=typed)
    response = redirect("settings_area:repository_models", name=repository.name)
    response["Location"] += f"?done={action}"
    return response


urlpatterns = [
    path("repositories/<slug:name>/models/", repository_models, name="repository_models"),
]
