"""Celery tasks: thin wrappers over the snapshot services."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.db.models import Max
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from snapshots.build import snapshot_build
from snapshots.garbage import collect_snapshot_garbage as collect
from snapshots.incremental import flatten_stack
from snapshots.models import Repository, Snapshot
from snapshots.prewarm import prewarm_sandbox
from snapshots.prewarm import reap_prewarmed_sandboxes as reap
from snapshots.restore import NoSnapshot


@shared_task(acks_late=True)
def refresh_snapshot(repository_id: int) -> int | None:
    repository = Repository.objects.filter(pk=repository_id).first()
    if repository is None:
        return None
    return snapshot_build(repository).pk


@shared_task
def refresh_due_snapshots() -> list[int]:
    """Queue a build for every repository whose newest snapshot is older than its interval
    (archived repositories are not refreshed)."""
    due = []
    now = timezone.now()
    repositories = Repository.objects.filter(archived_at__isnull=True).annotate(
        # A refresh that found nothing new built no snapshot: its check counts as one.
        last=Max(
            Greatest(
                "snapshots__created_at",
                Coalesce("snapshots__checked_at", "snapshots__created_at"),
            )
        )
    )
    building = set(
        Snapshot.objects.filter(state=Snapshot.State.BUILDING).values_list(
            "repository_id", flat=True
        )
    )
    for repository in repositories:
        if repository.pk in building:
            continue
        if repository.last is None or now - repository.last >= timedelta(
            minutes=repository.refresh_minutes
        ):
            refresh_snapshot.delay(repository.pk)
            due.append(repository.pk)
    return due


@shared_task(acks_late=True)
def flatten_snapshot(snapshot_id: int) -> bool:
    """Flatten a deep snapshot's layer stack into one layer (queued by a refresh)."""
    return flatten_stack(snapshot_id)


@shared_task
def collect_snapshot_garbage() -> list[int]:
    return collect()


@shared_task
def reap_prewarmed_sandboxes() -> int:
    return reap()


@shared_task
def prewarm(user_id: int, repository_id: int) -> str | None:
    repository = Repository.objects.filter(pk=repository_id).first()
    if repository is None:
        return None
    try:
        return prewarm_sandbox(user_id, repository)
    except NoSnapshot:
        return None
