"""Celery tasks of the model gateway: thin wrappers (scheduled by the beat in settings)."""

from __future__ import annotations

from celery import shared_task

from gateway import retention


@shared_task
def delete_expired_model_bodies() -> int:
    """Hourly: the bodies kept for replay whose INSPECT_GATEWAY_BODY_DAYS have passed."""
    return retention.delete_expired_bodies()
