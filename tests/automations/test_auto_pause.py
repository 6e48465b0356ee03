"""Three failed runs in a row pause an automation (and its beat entry); a success resets it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django_celery_beat.models import PeriodicTask

from accounts.models import Membership
from automations.models import AutomationRun
from automations.services import automation_create, automation_fire, automation_resume
from sessions import services

pytestmark = pytest.mark.django_db

START = datetime(2030, 1, 1, 0, 0, tzinfo=UTC)


@pytest.fixture
def hourly(team):
    return automation_create(
        repository=team.repository, creator=team.engineer, name="hourly", prompt="check",
        cron="0 * * * *", agent_command="true",
    )  # fmt: skip


def test_three_failures_to_start_pause_it(team, hourly):
    Membership.objects.filter(user=team.engineer).delete()  # the creator lost access
    for hour in range(3):
        run = automation_fire(automation_id=hourly.pk, now=START + timedelta(hours=hour))
        assert run.state == "failed" and "does not allow this" in run.error
    hourly.refresh_from_db()
    assert hourly.paused and "3 failed runs in a row" in hourly.paused_reason
    assert not PeriodicTask.objects.get(pk=hourly.periodic_task_id).enabled
    assert automation_fire(automation_id=hourly.pk, now=START + timedelta(hours=4)) is None
    assert AutomationRun.objects.count() == 3


def test_sessions_that_end_failed_count_and_a_success_resets(
    team, hourly, django_capture_on_commit_callbacks
):
    def run_ending(hour: int, state: str):
        with django_capture_on_commit_callbacks(execute=True):
            run = automation_fire(automation_id=hourly.pk, now=START + timedelta(hours=hour))
            services.session_transition(run.session, state)
        run.refresh_from_db()
        return run

    assert run_ending(0, "failed").state == "failed"
    assert run_ending(1, "cancelled").state == "failed"
    hourly.refresh_from_db()
    assert hourly.consecutive_failures == 2 and not hourly.paused
    assert run_ending(2, "provisioning").state == "started"  # not an outcome yet
    hourly.refresh_from_db()
    assert hourly.consecutive_failures == 2
    assert run_ending(3, "failed").state == "failed"
    hourly.refresh_from_db()
    assert hourly.paused

    automation_resume(automation=hourly, user=team.engineer)
    assert PeriodicTask.objects.get(pk=hourly.periodic_task_id).enabled
    hourly.refresh_from_db()
    assert hourly.consecutive_failures == 0 and not hourly.paused
