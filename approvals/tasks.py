"""Celery tasks of the approval gate: thin wrappers over approvals.gate."""

from __future__ import annotations

from celery import shared_task

from approvals import gate


@shared_task(acks_late=True)
def execute_approval_task(approval_id: int) -> str:
    return gate.execute_approval(approval_id)


@shared_task
def expire_approvals() -> int:
    return gate.expire_overdue()
