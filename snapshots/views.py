from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts import access, roles
from snapshots.actions import snapshot_refresh_request
from snapshots.egress import describe, egress_in_force, widening_requests
from snapshots.egress_settings import egress_settings
from snapshots.models import Snapshot


@login_required
def snapshot_list(request: HttpRequest) -> HttpResponse:
    repositories = access.repositories_for(request.user)
    refreshable = set(
        access.repositories_for(request.user, permission=roles.REFRESH_SNAPSHOT).values_list(
            "pk", flat=True
        )
    )
    history = access.visible_to(request.user, Snapshot.objects.select_related("repository"))
    rows = []
    for repository in repositories:
        builds = [s for s in history.filter(repository=repository)[:20]]
        rows.append(
            {
                "repository": repository,
                "ready": next((s for s in builds if s.state == Snapshot.State.READY), None),
                "building": any(s.state == Snapshot.State.BUILDING for s in builds),
                "history": builds,
                "can_refresh": repository.pk in refreshable,
                "egress": describe(egress_in_force(repository)),
                "egress_requests": widening_requests(repository),
            }
        )
    context = {"rows": rows, "egress_exceptions": egress_settings().exceptions}
    return render(request, "snapshots/list.html", context)


@login_required
def snapshot_detail(request: HttpRequest, pk: int) -> HttpResponse:
    snapshot = access.get_visible_or_404(
        request.user, Snapshot.objects.select_related("repository"), pk=pk
    )
    return render(request, "snapshots/detail.html", {"snapshot": snapshot})


@login_required
@require_POST
def snapshot_refresh(request: HttpRequest, repository: str) -> HttpResponse:
    repo = get_object_or_404(access.repositories_for(request.user), name=repository)
    snapshot_refresh_request(repo, user=request.user)
    messages.success(request, f"A fresh snapshot of {repo.name} is being built.")
    return redirect("snapshots:list")
