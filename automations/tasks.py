"""Celery tasks: thin wrappers over the automation services."""

from __future__ import annotations

from celery import shared_task

from automations.services import automation_fire


@shared_task(acks_late=True)
def fire_automation(automation_id: int) -> int | None:
    """Fired by beat; a second delivery for the same period finds its run and does nothing."""
    run = automation_fire(automation_id=automation_id)
    return run.pk if run else None
