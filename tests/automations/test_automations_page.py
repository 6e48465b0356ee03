"""Members who may start sessions create and pause automations on the page."""

import pytest
from django.test import Client
from django_celery_beat.models import PeriodicTask

from automations.models import Automation

pytestmark = pytest.mark.django_db

FORM = {"name": "deps", "cron": "0 6 * * mon", "prompt": "update dependencies and fix what breaks"}


def test_an_engineer_creates_and_pauses_an_automation(client, team):
    client.force_login(team.engineer)
    response = client.post("/automations/", {**FORM, "repository": team.repository.pk})
    assert response.status_code == 302
    automation = Automation.objects.get()
    assert automation.creator == team.engineer and automation.cron == "0 6 * * mon"
    page = client.get("/automations/").content.decode()
    assert "deps" in page and "0 6 * * mon" in page

    client.post(f"/automations/{automation.pk}/toggle/")
    automation.refresh_from_db()
    assert automation.paused
    assert not PeriodicTask.objects.get(pk=automation.periodic_task_id).enabled


def test_a_bad_schedule_is_refused_with_the_reason(client, team):
    client.force_login(team.engineer)
    response = client.post(
        "/automations/", {**FORM, "cron": "mondays", "repository": team.repository.pk}
    )
    assert response.status_code == 400
    assert "give five fields" in response.content.decode()
    assert not Automation.objects.exists()


def test_a_reviewer_cannot_create_and_an_outsider_cannot_see(client, team):
    client.force_login(team.reviewer)
    response = client.post("/automations/", {**FORM, "repository": team.repository.pk})
    assert response.status_code == 400 and "does not allow this" in response.content.decode()
    client.force_login(team.engineer)
    client.post("/automations/", {**FORM, "repository": team.repository.pk})
    automation = Automation.objects.get()
    outsider = Client()  # a browser of its own (the engineer's flash message stays behind)
    outsider.force_login(team.outsider)
    assert "deps" not in outsider.get("/automations/").content.decode()
    assert outsider.post(f"/automations/{automation.pk}/toggle/").status_code == 404
