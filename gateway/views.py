"""The budgets page (/budgets/, site admins) and a repository's allowed models
(/repositories/<name>/models/, its admins). Thin: the logic is budget_admin and
allowed_models."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts import access, roles
from gateway import budget_admin
from gateway.allowed_models import ModelListError, allowed_models_set
from gateway.models import Budget
from snapshots.models import Repository


def _budgets_page(request: HttpRequest, status: int = 200, **extra) -> HttpResponse:
    context = {
        "rows": budget_admin.budget_rows(),
        "scopes": Budget.Scope.values,
        "periods": Budget.Period.values,
        "form": {"scope": "user", "period": "day", "target": "", "limit_usd": ""},
        "form_errors": {},
        "row_errors": {},
        "repositories": Repository.objects.order_by("name").only("name"),
        "pause_seconds": settings.BUDGET_PAUSE_SECONDS,
        **extra,
    }
    template = "gateway/_budgets.html" if request.htmx else "gateway/budgets.html"
    return render(request, template, context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def budget_list(request: HttpRequest) -> HttpResponse:
    """GET: every budget with this period's spend; POST: create one (or change the limit of the
    one that exists for that scope, target and period)."""
    budget_admin.require_budget_admin(request.user)
    if request.method == "GET":
        return _budgets_page(request)
    form = {k: request.POST.get(k, "").strip() for k in ("scope", "period", "target", "limit_usd")}
    try:
        budget_admin.budget_set(by=request.user, **form)
    except budget_admin.BudgetError as exc:
        return _budgets_page(
            request, status=400, form=form, form_errors={exc.field or "form": str(exc)}
        )
    return _budgets_page(request) if request.htmx else redirect("budgets:list")


def _budget_or_404(request: HttpRequest, pk: int) -> Budget:
    """A budget for a site admin; 404 for anyone else, as for an id that does not exist."""
    if not budget_admin.may_manage_budgets(request.user):
        raise Http404("No budget matches this address.")
    return get_object_or_404(Budget.objects.select_related("user", "repository"), pk=pk)


@login_required
@require_POST
def budget_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Change a budget's limit (raising it resumes the turns it paused)."""
    budget = _budget_or_404(request, pk)
    try:
        budget_admin.budget_change(
            by=request.user, budget=budget, limit_usd=request.POST.get("limit_usd", "")
        )
    except budget_admin.BudgetError as exc:
        return _budgets_page(request, status=400, row_errors={budget.pk: str(exc)})
    return _budgets_page(request) if request.htmx else redirect("budgets:list")


@login_required
@require_POST
def budget_delete(request: HttpRequest, pk: int) -> HttpResponse:
    budget = _budget_or_404(request, pk)
    budget_admin.budget_remove(by=request.user, budget=budget)
    return _budgets_page(request) if request.htmx else redirect("budgets:list")


@login_required
@require_http_methods(["GET", "POST"])
def repository_models(request: HttpRequest, repo: str) -> HttpResponse:
    """The models a repository's agents may use: its members see the list; its admins are sent
    to the settings area's Models tab (a POST here still saves, for older clients). A
    non-member gets 404, as for anything of a repository."""
    repository = access.repositories_for(request.user).filter(name=repo).first()
    if repository is None:
        raise Http404("No repository matches this name.")
    may_edit = access.has_repo_permission(request.user, repository, roles.MANAGE_REPOSITORY)
    if may_edit and request.method == "GET":  # its admins edit it in the settings area now
        return redirect("settings_area:repository_models", name=repository.name)
    context = {"repository": repository, "may_edit": may_edit, "error": "", "text": None}
    status = 200
    if request.method == "POST":
        if not may_edit:
            raise PermissionDenied(
                f"Your role on {repository.name} does not allow this; ask a repository admin."
            )
        text = request.POST.get("models", "")
        try:
            allowed_models_set(repository=repository, models=text, by=request.user)
        except ModelListError as exc:
            context.update(error=str(exc), text=text)
            status = 400
        else:
            context["saved"] = True
    if context["text"] is None:
        context["text"] = "\n".join(repository.allowed_models or [])
    template = "gateway/_models.html" if request.htmx else "gateway/models.html"
    return render(request, template, context, status=status)
