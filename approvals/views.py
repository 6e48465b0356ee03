"""The audit log pages: the log a user may read, filtered, and one entry. Thin: the rules live
in approvals.audit. (The approval pages are above sessions: sessions.approval_pages.)"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from accounts import access
from approvals import audit

AUDIT_PAGE = 200
AUDIT_FILTERS = ("session", "user", "repository", "action")


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    entries = audit.entries_visible_to(request.user).order_by("-seq")
    filters = {name: request.GET.get(name, "").strip() for name in AUDIT_FILTERS}
    if filters["session"]:
        if not filters["session"].isdigit():
            raise Http404("No session matches this address.")
        entries = entries.filter(session_id=int(filters["session"]))
    if filters["user"]:
        entries = entries.filter(actor_name=filters["user"])
    if filters["repository"]:
        entries = entries.filter(repository_name=filters["repository"])
    if filters["action"]:
        entries = entries.filter(action=filters["action"])
    context = {
        "entries": entries[:AUDIT_PAGE],
        "filters": filters,
        "repositories": access.repositories_for(request.user),
        "actions": sorted(
            set(audit.entries_visible_to(request.user).values_list("action", flat=True)[:5000])
        ),
    }
    return render(request, "approvals/audit.html", context)


@login_required
def audit_entry(request: HttpRequest, pk: int) -> HttpResponse:
    entry = audit.entries_visible_to(request.user).filter(pk=pk).first()
    if entry is None:
        raise Http404("No audit entry matches this address.")
    return render(
        request, "approvals/audit_entry.html", {"entry": entry, "json": audit.as_json(entry)}
    )
