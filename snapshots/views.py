from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from approvals.egress import describe, egress_in_force, widening_requests
from inspect_web import access, roles
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
    return render(request, "snapshots/list.html", {"rows": rows})


@login_required
def snapshot_detail(request: HttpRequest, pk: int) -> HttpResponse:
    snapshot = access.get_visible_or_404(
        request.user, Snapshot.objects.select_related("repository"), pk=pk
    )
    return render(request, "snapshots/detail.html", {"snapshot": snapshot})


@login_required
@require_POST
def snapshot_refresh(request: HttpRequest, repository: str) -> HttpResponse:
    from snapshots.tasks import refresh_snapshot

    repo = get_object_or_404(access.repositories_for(request.user), name=repository)
    access.require_repo_permission(request.user, repo, roles.REFRESH_SNAPSHOT)
    transaction.on_commit(lambda: refresh_snapshot.delay(repo.pk))
    messages.success(request, f"A fresh snapshot of {repo.name} is being built.")
    return redirect("snapshots:list")
