"""Garbage collection of snapshots: keep the newest N ready per repository and any a live
session still uses; delete the rest from the backend and mark them deleted."""

from __future__ import annotations

import logging

from django.conf import settings

from snapshots.backends import sandbox_backend
from snapshots.models import Snapshot
from snapshots.sandbox import SandboxError, SnapshotRef

log = logging.getLogger(__name__)

LIVE_SESSION_STATES = [
    "queued",
    "provisioning",
    "syncing",
    "running",
    "verifying",
    "idle",
    "pr_open",
]


def collect_snapshot_garbage(*, keep: int | None = None) -> list[int]:
    """Delete snapshots nobody needs; returns the ids deleted."""
    keep = keep or settings.SNAPSHOT_KEEP
    in_use = set(
        Snapshot.objects.filter(sessions__state__in=LIVE_SESSION_STATES).values_list(
            "pk", flat=True
        )
    )
    deleted: list[int] = []
    kept_per_repository: dict[int, int] = {}
    candidates = Snapshot.objects.exclude(
        state__in=[Snapshot.State.DELETED, Snapshot.State.BUILDING]
    ).order_by("repository_id", "-created_at")
    for snapshot in candidates:
        if snapshot.state == Snapshot.State.READY:
            kept = kept_per_repository.get(snapshot.repository_id, 0)
            if kept < keep:
                kept_per_repository[snapshot.repository_id] = kept + 1
                continue
        if snapshot.pk in in_use or snapshot.state == Snapshot.State.FAILED:
            continue  # failed builds keep their log; they hold no backend data
        if snapshot.backend_ref:
            try:
                sandbox_backend(snapshot.backend).delete_snapshot(
                    SnapshotRef.parse(snapshot.backend_ref)
                )
            except SandboxError as exc:
                log.warning("could not delete snapshot %s: %s", snapshot.pk, exc)
                continue
        Snapshot.objects.filter(pk=snapshot.pk).update(state=Snapshot.State.DELETED)
        deleted.append(snapshot.pk)
    return deleted
