from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from approvals.models import ApprovalRequest
from inspect_web import access


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    pending = access.visible_to(
        request.user,
        ApprovalRequest.objects.filter(state=ApprovalRequest.State.PENDING).select_related(
            "session", "session__repository", "requested_by"
        ),
    )
    return render(request, "approvals/inbox.html", {"pending": pending[:200]})
