"""A session started by an automation reports back: done (idle, PR open) is a success,
failed or cancelled a failure (towards the auto-pause)."""

from __future__ import annotations

import logging

from django.db import transaction

from automations.models import AutomationRun
from automations.services import run_finish
from sessions.models import State

log = logging.getLogger(__name__)

SUCCEEDED = {State.IDLE, State.PR_OPEN, State.MERGED}
FAILED = {State.FAILED, State.CANCELLED}


def on_session_state(sender, *, session, previous: str, state: str, **kwargs) -> None:
    if state not in SUCCEEDED | FAILED:
        return
    session_id = session.pk
    transaction.on_commit(lambda: record_outcome(session_id, state), robust=True)


def record_outcome(session_id: int, state: str) -> None:
    run = AutomationRun.objects.filter(
        session_id=session_id, state=AutomationRun.State.STARTED
    ).first()
    if run is None:
        return
    error = "" if state in SUCCEEDED else f"the session ended {state}"
    run_finish(run=run, succeeded=state in SUCCEEDED, error=error)
