"""Celery tasks for sessions: thin wrappers that call the runner."""

from __future__ import annotations

import contextlib
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from sessions import model_access, warm_pool
from sessions.lease import DriverLease, is_driven
from sessions.models import Prompt, Session, State
from sessions.runner import drive_session
from sessions.states import ACTIVE
from snapshots.backends import sandbox_backend
from snapshots.sandbox import SandboxGone


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_session(session_id: int) -> str:
    return drive_session(session_id)


@shared_task
def watch_sessions() -> list[int]:
    """Requeue sessions whose driver died (busy state, lease lapsed) or whose queued prompt
    was never picked up."""
    requeued = []
    busy = Session.objects.filter(state__in=ACTIVE).values_list("pk", flat=True)
    waiting = (
        Prompt.objects.filter(
            state=Prompt.State.QUEUED, created_at__lt=timezone.now() - timedelta(seconds=15)
        )
        .values_list("session_id", flat=True)
        .distinct()
    )
    for session_id in {*busy, *waiting}:
        if not is_driven(session_id):
            model_access.revoke(session_id)  # the dead driver's turn held a token
            run_session.delay(session_id)
            requeued.append(session_id)
    return requeued


@shared_task
def reap_idle_sandboxes() -> list[int]:
    """Terminate sandboxes of sessions idle longer than INSPECT_SANDBOX_IDLE_SECONDS; the
    session's own snapshot keeps its state for the next prompt."""
    cutoff = timezone.now() - timedelta(seconds=settings.SANDBOX_IDLE_SECONDS)
    reaped = []
    for session in Session.objects.filter(
        state__in=[State.IDLE, State.PR_OPEN, State.FAILED, State.MERGED, State.CLOSED],
        updated_at__lt=cutoff,
    ).exclude(sandbox_id=""):
        lease = DriverLease(session.pk)
        if not lease.acquire():
            continue  # a turn is starting; leave its sandbox alone
        try:
            backend = sandbox_backend(session.sandbox_backend or None)
            with contextlib.suppress(SandboxGone):
                backend.attach(session.sandbox_id).terminate()
            Session.objects.filter(pk=session.pk).update(sandbox_id="")
            model_access.revoke(session.pk)  # nothing of the sandbox keeps model access
            reaped.append(session.pk)
        finally:
            lease.release()
    return reaped


@shared_task
def fill_sandbox_pools() -> dict[int, int]:
    """Top up every repository's warm pool to its target (sessions/warm_pool.py)."""
    return warm_pool.fill_pools()
