"""The automations page: list per repository with run history, create, pause, resume."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts import access, roles
from automations import services
from automations.models import Automation


def _page(request: HttpRequest, *, error: str = "", form: dict | None = None, status: int = 200):
    automations = access.visible_to(
        request.user, Automation.objects.select_related("repository", "creator")
    ).prefetch_related("runs__session")
    rows = [{"automation": a, "runs": list(a.runs.all()[:10])} for a in automations]
    context = {
        "rows": rows,
        "repositories": access.repositories_for(request.user, permission=roles.START_SESSION),
        "error": error,
        "form": form or {},
    }
    return render(request, "automations/list.html", context, status=status)


@login_required
def automation_list(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request)
    data = request.POST
    repository = (
        access.repositories_for(request.user).filter(pk=data.get("repository") or 0).first()
    )
    if repository is None:
        return _page(request, error="pick one of your repositories", form=data, status=400)
    try:
        automation = services.automation_create(
            repository=repository,
            creator=request.user,
            name=data.get("name", ""),
            prompt=data.get("prompt", ""),
            cron=data.get("cron", ""),
            agent_command=data.get("agent_command", ""),
        )
    except (services.AutomationError, PermissionDenied) as exc:
        return _page(request, error=str(exc), form=data, status=400)
    messages.success(request, f"“{automation.name}” runs on “{automation.cron}” (UTC).")
    return redirect("automations:list")


@login_required
@require_POST
def automation_toggle(request: HttpRequest, pk: int) -> HttpResponse:
    automation = access.get_visible_or_404(request.user, Automation.objects.all(), pk=pk)
    try:
        if automation.paused:
            services.automation_resume(automation=automation, user=request.user)
            messages.success(request, f"“{automation.name}” is running on its schedule again.")
        else:
            services.automation_pause(automation=automation, user=request.user)
            messages.success(request, f"“{automation.name}” is paused.")
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    return redirect("automations:list")
