"""Attack: keep using a turn's model token after its turn — once the agent stopped, after a user
pressed stop, after the session's sandbox was reaped, or after the worker driving the turn died.
Each of those ends the token (the gateway then answers 401)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions import model_access, services
from sessions.models import Prompt, Session, State

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(team):
    """A session whose turn is running, holding a token."""
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="t", branch="main",
        agent="command", agent_command="true", state=State.RUNNING,
    )  # fmt: skip
    prompt = Prompt.objects.create(
        session=session, author=team.engineer, text="go", order=1, state=Prompt.State.RUNNING
    )
    token = model_access.mint(session, prompt, "command")
    assert model_access.active(token) is not None
    return session, token


def test_the_token_dies_when_the_session_leaves_running(running):
    session, token = running
    services.session_transition(session, State.VERIFYING)
    assert model_access.active(token) is None


def test_a_stop_ends_the_token_at_once(running, team):
    session, token = running
    assert services.session_stop(session=session, user=team.engineer)
    assert model_access.active(token) is None
    services.clear_stop(session.pk)


def test_a_dead_drivers_token_ends_when_the_watcher_finds_it(running, monkeypatch):
    from sessions import tasks

    session, token = running
    requeued = []
    monkeypatch.setattr(tasks.run_session, "delay", requeued.append)  # not under test
    assert session.pk in tasks.watch_sessions()
    assert requeued == [session.pk]
    assert model_access.active(token) is None


def test_a_reaped_sandboxs_session_holds_no_token(running, settings):
    from sessions import tasks

    session, token = running
    # As if the turn had ended without revoking (a crash between the two writes).
    Session.objects.filter(pk=session.pk).update(
        state=State.IDLE, sandbox_id="gone", updated_at=timezone.now() - timedelta(days=1)
    )
    settings.SANDBOX_IDLE_SECONDS = 60
    assert session.pk in tasks.reap_idle_sandboxes()
    assert model_access.active(token) is None
