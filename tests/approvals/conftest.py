"""Approval, audit and secrets fixtures: sessions made through the ORM (no turn runs), a
Fernet key, and a logged-in client per role."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.test import Client


@pytest.fixture
def secrets_key(settings):
    settings.SECRETS_KEY = Fernet.generate_key().decode()
    return settings.SECRETS_KEY


@pytest.fixture
def agent_session(team):
    """A session on `widgets` created by the engineer, whose first prompt is the engineer's."""
    from sessions.models import Prompt, Session

    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="ship it", branch="inspect/1"
    )
    session.prompt = Prompt.objects.create(
        session=session, author=team.engineer, text="deploy the thing", order=1
    )
    return session


@pytest.fixture
def client_for():
    def login(user, **kwargs) -> Client:
        client = Client(**kwargs)
        client.force_login(user)
        return client

    return login


@pytest.fixture
def agent_request(agent_session):
    """A pending merge request made by the session's agent after the engineer's prompt."""
    from approvals import gate

    return gate.request_approval(
        action="merge_pr",
        payload={"summary": "merge #1 into main", "number": 1},
        session=agent_session,
        requested_by=None,
        prompt_author=agent_session.prompt.author,
        idempotency_key=f"merge:{agent_session.pk}",
    )
