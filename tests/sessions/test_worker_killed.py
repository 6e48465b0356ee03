"""`kill -9` of the worker mid-turn: another worker resumes the session from its last snapshot."""

import os
import signal
import time

import pytest

from sessions import services
from sessions.models import Event, Prompt, Session

pytestmark = pytest.mark.django_db(transaction=True)

# Counts how many times the turn's work landed in the workspace it finishes in.
AGENT = "echo run >> runs.txt; echo started; sleep 4; echo runs=$(wc -l < runs.txt)"


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


def test_a_killed_worker_is_replaced_and_the_turn_is_not_applied_twice(
    ready_repo, team, start_celery
):
    first = start_celery("worker")
    session = services.session_create(
        repository=ready_repo, creator=team.engineer, prompt="count runs", agent_command=AGENT
    )
    wait_for(
        lambda: Event.objects.filter(session=session, payload__text="started").exists(),
        60,
        "the first worker to start the agent",
    )
    os.killpg(first.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    start_celery("worker")
    start_celery("beat")
    wait_for(
        lambda: Event.objects.filter(
            session=session, kind="state", payload__reason__startswith="resuming"
        ).exists(),
        30,
        "another worker to resume the session",
    )
    resumed_after = time.monotonic() - killed_at
    wait_for(lambda: Session.objects.get(pk=session.pk).state == "idle", 60, "the turn to finish")

    outputs = list(
        Event.objects.filter(session=session, kind="output").values_list("payload__text", flat=True)
    )
    assert outputs[-1] == "runs=1"  # the lost attempt's work was discarded, not applied twice
    seqs = list(Event.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert Event.objects.filter(session=session, kind="prompt").count() == 1
    prompt = Prompt.objects.get(session=session)
    assert (prompt.state, prompt.attempts) == ("done", 2)
    session.refresh_from_db()
    assert session.diff_stats["paths"] == ["runs.txt"]
    assert resumed_after < 30
