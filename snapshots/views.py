from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from inspect_web import access
from snapshots.models import Snapshot


@login_required
def snapshot_list(request: HttpRequest) -> HttpResponse:
    snapshots = access.visible_to(request.user, Snapshot.objects.select_related("repository"))
    repository = request.GET.get("repository")
    if repository:
        snapshots = snapshots.filter(repository__name=repository)
    return render(request, "snapshots/list.html", {"snapshots": snapshots[:200]})
