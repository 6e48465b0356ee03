"""Automation actions: create, pause, resume, and fire (once per period)."""

from __future__ import annotations

import json
import logging
from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from accounts import access, roles
from automations.models import Automation, AutomationRun
from automations.schedule import CronError, parse_cron, period_of
from sessions import services as sessions
from snapshots.models import Repository

log = logging.getLogger(__name__)

MAX_FAILURES = 3  # consecutive failed runs before the automation pauses itself
EXPIRE_SECONDS = 600  # a firing not picked up within this is dropped (no backlog after outages)


class AutomationError(Exception):
    """An automation request that cannot be honoured; the message says why."""


def automation_create(
    *,
    repository: Repository,
    creator,
    name: str,
    prompt: str,
    cron: str,
    agent: str = "",
    agent_command: str = "",
) -> Automation:
    """A scheduled automation, fired by beat (django-celery-beat's database scheduler)."""
    access.require_repo_permission(creator, repository, roles.START_SESSION)
    name, prompt = (name or "").strip(), (prompt or "").strip()
    if not name:
        raise AutomationError("give the automation a name, e.g. 'weekly dependency update'")
    if not prompt:
        raise AutomationError("the prompt is empty; say what the agent should do on each run")
    try:
        fields = parse_cron(cron)
    except CronError as exc:
        raise AutomationError(str(exc)) from None
    if Automation.objects.filter(repository=repository, name=name).exists():
        raise AutomationError(f"{repository.name} already has an automation named {name!r}")
    with transaction.atomic():
        automation = Automation.objects.create(
            repository=repository,
            creator=creator,
            name=name,
            prompt=prompt,
            cron=" ".join(fields.values()),
            agent=agent,
            agent_command=agent_command,
        )
        schedule, _ = CrontabSchedule.objects.get_or_create(**fields, timezone="UTC")
        automation.periodic_task = PeriodicTask.objects.create(
            name=f"automation-{automation.pk}",
            task="automations.tasks.fire_automation",
            args=json.dumps([automation.pk]),
            crontab=schedule,
            expire_seconds=EXPIRE_SECONDS,
        )
        automation.save(update_fields=["periodic_task"])
    return automation


def _set_enabled(automation: Automation, enabled: bool) -> None:
    if automation.periodic_task_id:
        # .save() (not .update()) so beat's change tracker notices and reloads its schedule.
        task = PeriodicTask.objects.get(pk=automation.periodic_task_id)
        task.enabled = enabled
        task.save()


def automation_pause(*, automation: Automation, user=None, reason: str = "") -> None:
    """Stop firing until resumed; `user` None is the system (auto-pause)."""
    if user is not None:
        access.require_repo_permission(user, automation.repository, roles.START_SESSION)
    reason = reason or (f"paused by {user.get_username()}" if user else "paused")
    Automation.objects.filter(pk=automation.pk).update(paused=True, paused_reason=reason[:300])
    automation.paused, automation.paused_reason = True, reason[:300]
    _set_enabled(automation, False)


def automation_resume(*, automation: Automation, user) -> None:
    access.require_repo_permission(user, automation.repository, roles.START_SESSION)
    Automation.objects.filter(pk=automation.pk).update(
        paused=False, paused_reason="", consecutive_failures=0
    )
    automation.paused, automation.consecutive_failures = False, 0
    _set_enabled(automation, True)


def automation_fire(*, automation_id: int, now: datetime | None = None) -> AutomationRun | None:
    """Start this period's session; None if the period already has a run (or the automation is
    gone or paused). A failure to start counts towards the auto-pause."""
    automation = Automation.objects.select_related("repository", "creator").filter(pk=automation_id)
    automation = automation.first()
    if automation is None or automation.paused:
        return None
    period = period_of(automation.cron, now or timezone.now())
    try:
        with transaction.atomic():
            run = AutomationRun.objects.create(automation=automation, period=period)
    except IntegrityError:
        log.info("automation %s already ran for %s; skipping", automation.pk, period)
        return None
    try:
        session = sessions.session_create(
            repository=automation.repository,
            creator=automation.creator,
            prompt=automation.prompt,
            agent=automation.agent,
            agent_command=automation.agent_command,
            title=f"{automation.name} ({period:%Y-%m-%d %H:%M})",
        )
    except (sessions.SessionError, PermissionDenied) as exc:
        run_finish(run=run, succeeded=False, error=f"could not start the session: {exc}")
        run.refresh_from_db()
        return run
    AutomationRun.objects.filter(pk=run.pk).update(session=session)
    run.session = session
    return run


def run_finish(*, run: AutomationRun, succeeded: bool, error: str = "") -> bool:
    """Record a run's outcome once (compare-and-set on `started`); pauses the automation after
    MAX_FAILURES failures in a row. False if the outcome was already recorded."""
    state = AutomationRun.State.SUCCEEDED if succeeded else AutomationRun.State.FAILED
    with transaction.atomic():
        changed = AutomationRun.objects.filter(pk=run.pk, state=AutomationRun.State.STARTED).update(
            state=state, error=error, finished_at=timezone.now()
        )
        if not changed:
            return False
        automation = Automation.objects.select_for_update().get(pk=run.automation_id)
        automation.consecutive_failures = 0 if succeeded else automation.consecutive_failures + 1
        automation.save(update_fields=["consecutive_failures"])
        if automation.consecutive_failures >= MAX_FAILURES and not automation.paused:
            automation_pause(
                automation=automation,
                reason=f"paused after {MAX_FAILURES} failed runs in a row; "
                "fix the cause, then resume it",
            )
    return True
