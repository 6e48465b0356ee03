"""The approval pages: the reviewer inbox, one request's page (with its session's diff and
verification) and the decision POST. Thin: the rules live in approvals.gate and
approvals.four_eyes. Above sessions because a request's page shows its session's work; the
audit log pages are the controls' own (approvals.views)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts import access, roles
from approvals import audit, four_eyes, gate
from approvals.models import ApprovalRequest
from sessions import rendering


def _pending_for(user):
    return access.visible_to(
        user,
        ApprovalRequest.objects.filter(state=ApprovalRequest.State.PENDING).select_related(
            "session", "repository", "requested_by", "prompt_author"
        ),
    )


def _rows(user, approvals) -> list[dict]:
    deciding = set(
        access.repositories_for(user, permission=roles.DECIDE_APPROVAL).values_list("pk", flat=True)
    )
    approvals = list(approvals)
    # The gate's own rule, so the page never offers a decision the gate would refuse.
    conflicts = four_eyes.contributions(user, approvals)
    return [
        {
            "approval": a,
            "summary": gate.summary(a),
            "can_decide": a.repository_id in deciding and a.pk not in conflicts,
            "conflict": conflicts.get(a.pk, ""),
        }
        for a in approvals
    ]


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    rows = _rows(request.user, _pending_for(request.user)[:200])
    # htmx polls the list so every reviewer sees requests arrive and leave.
    template = "approvals/_pending.html" if request.htmx else "approvals/inbox.html"
    return render(request, template, {"rows": rows})


@login_required
def approval_detail(request: HttpRequest, pk: int) -> HttpResponse:
    approval = access.get_visible_or_404(
        request.user,
        ApprovalRequest.objects.select_related(
            "session", "repository", "requested_by", "prompt_author", "decided_by"
        ),
        pk=pk,
    )
    session = approval.session
    context = {
        "row": _rows(request.user, [approval])[0],
        "approval": approval,
        "verification": rendering.latest_verification(session) if session else [],
        "diff": rendering.latest_diff(session) if session else [],
        "entries": audit.entries_visible_to(request.user).filter(
            object_type="approval", object_id=str(approval.pk)
        ),
    }
    return render(request, "approvals/detail.html", context)


@login_required
@require_POST
def approval_decide(request: HttpRequest, pk: int) -> HttpResponse:
    approval = access.get_visible_or_404(
        request.user, ApprovalRequest.objects.select_related("session", "repository"), pk=pk
    )
    decision = request.POST.get("decision")
    if decision not in ("approve", "reject"):
        messages.error(request, "Choose approve or reject.")
        return redirect("approvals:detail", pk=pk)
    try:
        gate.approval_decide(
            approval=approval,
            user=request.user,
            approve=decision == "approve",
            reason=request.POST.get("reason", "").strip()[:2000],
        )
    except PermissionDenied as exc:
        messages.error(request, str(exc))
        return redirect("approvals:detail", pk=pk)
    except gate.ApprovalError as exc:
        messages.error(request, str(exc))
        return redirect("approvals:detail", pk=pk)
    messages.success(request, f"{gate.summary(approval)}: {decision}d.")
    return redirect("approvals:inbox")
