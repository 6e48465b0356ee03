"""Bodies are kept INSPECT_GATEWAY_BODY_DAYS: the hourly task deletes the expired ones only, and
the request rows, their hashes and audit entries stay (and still verify)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from approvals import audit
from gateway.metering import record
from gateway.models import ModelRequest, ModelRequestBody
from gateway.retention import delete_expired_bodies
from inspect_web.celery import app


def _age(row: ModelRequest, expires_in: timedelta) -> None:
    ModelRequestBody.objects.filter(request=row).update(expires_at=timezone.now() + expires_in)


@pytest.mark.django_db
def test_only_expired_bodies_are_deleted(anthropic_exchange, record_committed, settings):
    settings.GATEWAY_BODY_DAYS = 30
    old, due, fresh = (record_committed(anthropic_exchange()) for _ in range(3))
    _age(old, -timedelta(days=2))
    _age(due, -timedelta(seconds=1))
    _age(fresh, timedelta(minutes=1))

    assert delete_expired_bodies() == 2
    assert list(ModelRequestBody.objects.values_list("request_id", flat=True)) == [fresh.pk]
    assert ModelRequest.objects.count() == 3
    assert delete_expired_bodies() == 0
    # Later, the last one's time has come too.
    assert delete_expired_bodies(now=timezone.now() + timedelta(minutes=2)) == 1
    assert not ModelRequestBody.objects.exists() and ModelRequest.objects.count() == 3
    report = audit.verify()
    assert report.ok, report.problems


def test_the_beat_runs_the_task_hourly():
    entry = settings.CELERY_BEAT_SCHEDULE["delete-expired-model-bodies"]
    assert entry["task"] == "gateway.tasks.delete_expired_model_bodies"
    assert entry["schedule"] == 3600.0


def test_a_real_worker_deletes_the_expired_bodies(anthropic_exchange, celery_worker_process):
    expired, kept = record(anthropic_exchange()), record(anthropic_exchange())
    _age(expired, -timedelta(hours=1))

    app.send_task("gateway.tasks.delete_expired_model_bodies")

    deadline = time.monotonic() + 60
    while ModelRequestBody.objects.filter(request=expired).exists():
        assert time.monotonic() < deadline, "the worker did not delete the expired body"
        time.sleep(0.2)
    assert ModelRequestBody.objects.filter(request=kept).exists()
    assert ModelRequest.objects.filter(pk=expired.pk).exists()
