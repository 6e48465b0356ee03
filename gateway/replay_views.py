"""Replay of a session's model requests, for the members of its repository only (404 for
anyone else, as for every object: accounts.access): the list of what every runtime asked of a
model, with its tokens and cost, and each request's bodies (secret-scrubbed) while they are kept
(INSPECT_GATEWAY_BODY_DAYS; gateway.retention deletes them after)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

from accounts import access
from gateway.models import ModelRequest, ModelRequestBody
from sessions.models import Session

PAGE_SIZE = 200


@require_safe
@login_required
def request_list(request: HttpRequest, pk: int) -> HttpResponse:
    session = access.get_visible_or_404(
        request.user, Session.objects.select_related("repository"), pk=pk
    )
    requests = ModelRequest.objects.filter(session=session).select_related("prompt", "user")
    page = Paginator(requests.order_by("created_at", "pk"), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    turns = (
        requests.order_by()
        .values("prompt__order")
        .annotate(
            requests=Count("pk"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cached_tokens=Sum("cached_tokens"),
            cost_usd=Sum("cost_usd"),
        )
        .order_by("prompt__order")
    )
    unpriced = requests.filter(cost_usd__isnull=True).count()
    context = {"session": session, "page": page, "turns": turns, "unpriced": unpriced}
    return render(request, "gateway/model_requests.html", context)


@require_safe
@login_required
def request_detail(request: HttpRequest, pk: int, request_pk: int) -> HttpResponse:
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    try:
        row = ModelRequest.objects.select_related("prompt", "user").get(
            pk=request_pk, session=session
        )
    except ModelRequest.DoesNotExist:
        raise Http404("No model request matches this address.") from None
    body = ModelRequestBody.objects.filter(request=row).first()
    context = {
        "session": session,
        "row": row,
        "expired": _expired_note(row, body),
        "bodies": None,
    }
    if context["expired"] is None:
        context["bodies"] = (
            _shown(body.request_body, row.request_sha256, row.request_bytes),
            _shown(body.response_body, row.response_sha256, row.response_bytes),
        )
    return render(request, "gateway/model_request.html", context)


def _expired_note(row: ModelRequest, body: ModelRequestBody | None) -> str | None:
    """Why the bodies cannot be shown, or None when they can."""
    if body is not None and body.expires_at > timezone.now():
        return None
    if body is not None:
        return f"The bodies expired on {body.expires_at:%Y-%m-%d %H:%M} UTC."
    if settings.GATEWAY_BODY_DAYS == 0:
        return "Bodies are not kept on this site (INSPECT_GATEWAY_BODY_DAYS is 0)."
    expired_on = row.created_at + timedelta(days=settings.GATEWAY_BODY_DAYS)
    if expired_on > timezone.now():  # kept no body when it was recorded (the days were 0)
        return "No bodies were kept for this request."
    return f"The bodies expired on {expired_on:%Y-%m-%d %H:%M} UTC."


@dataclass(frozen=True)
class ShownBody:
    text: str  # pretty JSON where it parses (each event of a stream), else as stored
    kept_bytes: int
    total_bytes: int
    matches_hash: bool | None  # None: only the head was kept, so it cannot be compared

    @property
    def truncated(self) -> bool:
        return self.kept_bytes < self.total_bytes


def _shown(stored: str, sha256: str, size: int) -> ShownBody:
    raw = stored.encode()
    matches = None if len(raw) < size else hashlib.sha256(raw).hexdigest() == sha256
    return ShownBody(pretty(stored), len(raw), size, matches)


def pretty(text: str) -> str:
    """A body for reading: indented JSON, or for a server-sent event stream each `data:` line's
    JSON indented in place; anything else as it is."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    if not text.lstrip().startswith(("event:", "data:")):
        return text
    lines = []
    for line in text.splitlines():
        if line.startswith("data:"):
            try:
                value = json.loads(line[5:])
            except ValueError:
                lines.append(line)
                continue
            lines.append("data: " + json.dumps(value, indent=2, ensure_ascii=False))
        else:
            lines.append(line)
    return "\n".join(lines)
