"""Turns go to their own queue, served by a threaded worker like the one `make run` starts."""

import os
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings

from sessions import services
from sessions.models import Event, Session
from tests.conftest import child_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_threaded_turn_worker_runs_sessions_side_by_side(ready_repo, team, start_celery):
    # start_celery purges the queues; this worker serves only the turns, as under `make run`.
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "inspect_web", "worker", "-l", "warning",
         "-Q", settings.TURN_QUEUE, "-P", "threads", "--concurrency", "4",
         "--without-mingle", "--without-gossip", "-n", f"turns-{time.monotonic_ns()}@%h"],
        env=child_env(), cwd=settings.BASE_DIR, start_new_session=True,
    )  # fmt: skip
    try:
        sessions = [
            services.session_create(
                repository=ready_repo,
                creator=team.engineer,
                prompt=f"turn {k}",
                agent_command=f"echo begin-{k}; sleep 2; echo end-{k}",
            )
            for k in range(2)
        ]
        deadline = time.monotonic() + 90
        ids = [s.pk for s in sessions]
        while Session.objects.filter(pk__in=ids, state__in=["idle", "failed"]).count() < 2:
            assert time.monotonic() < deadline, "the turns did not finish"
            time.sleep(0.1)
        states = list(Session.objects.filter(pk__in=ids).values_list("state", "error"))
        assert states == [("idle", ""), ("idle", "")], states
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    outputs = {
        s.pk: list(
            Event.objects.filter(session=s, kind="output")
            .order_by("seq")
            .values_list("created_at", flat=True)
        )
        for s in sessions
    }
    first, second = outputs.values()
    # Side by side: each began before the other ended.
    assert first[0] < second[-1] and second[0] < first[-1]
