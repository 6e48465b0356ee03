"""A schedule fires once per period and never twice; beat fires it on its own."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django_celery_beat.models import PeriodicTask

from automations.models import AutomationRun
from automations.schedule import CronError, parse_cron, period_of
from automations.services import automation_create, automation_fire
from sessions.models import Session

AGENT = 'echo "scheduled: $INSPECT_PROMPT"'


def wait_for(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_a_late_firing_belongs_to_the_period_it_was_scheduled_for():
    at = datetime(2026, 3, 2, 6, 0, tzinfo=UTC)  # a Monday
    assert period_of("0 6 * * mon", at.replace(minute=7, second=31)) == at
    assert period_of("*/15 * * * *", at.replace(minute=29)) == at.replace(minute=15)
    with pytest.raises(CronError, match="five fields"):
        parse_cron("every monday")
    with pytest.raises(CronError, match="not a valid cron schedule"):
        parse_cron("99 * * * *")


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_in_one_period_start_one_session(team, ready_repo, start_celery):
    from automations.tasks import fire_automation

    automation = automation_create(
        repository=ready_repo, creator=team.engineer, name="nightly", prompt="tidy up",
        cron="0 3 * * *", agent_command=AGENT,
    )  # fmt: skip
    task = PeriodicTask.objects.get(pk=automation.periodic_task_id)
    assert task.task == "automations.tasks.fire_automation" and task.enabled
    assert (task.crontab.minute, task.crontab.hour) == ("0", "3")

    start_celery("worker")
    fire_automation.delay(automation.pk)  # e.g. two beats, or a redelivered message
    fire_automation.delay(automation.pk)
    run = wait_for(lambda: AutomationRun.objects.filter(state="succeeded").first(), 90)
    time.sleep(1)  # give the second delivery time to (not) do anything
    assert AutomationRun.objects.count() == 1
    assert Session.objects.count() == 1
    session = run.session
    assert session.creator == team.engineer and session.state == "idle"
    assert "scheduled: tidy up" in str(list(session.events.values_list("payload", flat=True)))

    # The next period is a new run.
    later = automation_fire(
        automation_id=automation.pk, now=datetime(2030, 1, 2, 3, 0, 5, tzinfo=UTC)
    )
    assert later is not None and AutomationRun.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_beat_fires_an_every_minute_schedule_and_the_session_runs(team, ready_repo, start_celery):
    automation_create(
        repository=ready_repo, creator=team.engineer, name="minutely", prompt="ping",
        cron="* * * * *", agent_command=AGENT,
    )  # fmt: skip
    start_celery("worker")
    start_celery("beat")
    run = wait_for(lambda: AutomationRun.objects.filter(state="succeeded").first(), 100)
    assert run.period.second == 0 and run.session.state == "idle"
    assert AutomationRun.objects.filter(period=run.period).count() == 1
