"""The rollups' Celery tasks (metrics/rollups.py): the refresh queued after changes, and the
rebuild from scratch."""

from __future__ import annotations

from celery import shared_task

from metrics.rollups import rebuild_rollups, refresh_marked


@shared_task(name="metrics.tasks.refresh_rollups", acks_late=True)
def refresh_rollups() -> int:
    """Recompute the marked days; returns how many marks were handled."""
    return refresh_marked()


@shared_task(name="metrics.tasks.rebuild_rollups", acks_late=True)
def rebuild_rollups_task() -> dict:
    """Recompute every rollup (backfill)."""
    return rebuild_rollups()
