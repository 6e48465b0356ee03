"""How long a model request's bodies are kept: each ModelRequestBody expires
INSPECT_GATEWAY_BODY_DAYS days after its request (gateway.metering sets `expires_at`), and the
hourly task deletes the expired ones. The ModelRequest row, its hashes and its audit entry stay:
spend and the audit trail are history; only the replayable text goes."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from gateway.models import ModelRequestBody

BATCH = 1000  # rows per DELETE, so a backlog never holds a long lock


def delete_expired_bodies(now: datetime | None = None) -> int:
    """Delete every body whose time has passed (at `now`, default now); returns how many."""
    now = now or timezone.now()
    deleted = 0
    expired = ModelRequestBody.objects.filter(expires_at__lte=now)
    while True:
        ids = list(expired.order_by("pk").values_list("pk", flat=True)[:BATCH])
        if not ids:
            return deleted
        count, _ = ModelRequestBody.objects.filter(pk__in=ids).delete()
        deleted += count
