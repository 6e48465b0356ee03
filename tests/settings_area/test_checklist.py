"""The first-run checklist: a new admin sees each step with its state and link; it goes away when
every step is done, and engineers never see it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import Membership, Role
from sessions.models import Session
from snapshots.models import Repository, Snapshot


def _home(user) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def _states(html: str) -> list[str]:
    section = html.split('id="getting-started"', 1)[1].split("</section>", 1)[0]
    return [chunk.split("</span>", 1)[0] for chunk in section.split('<span class="state">')[1:]]


@pytest.mark.django_db
def test_a_new_admin_follows_the_steps(settings):
    settings.LLM_API_KEY = ""
    settings.ANTHROPIC_API_KEY = ""
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    admin = get_user_model().objects.create_user("first", is_staff=True, is_superuser=True)
    html = _home(admin)
    assert _states(html) == ["To do"] * 5
    assert 'href="/settings/repositories/"' in html and "add one in Settings" in html

    repository = Repository.objects.create(name="legacy", url="/srv/git/legacy.git")
    Membership.objects.create(user=admin, repository=repository, role=Role.ADMIN)
    assert _states(_home(admin)) == ["Done", "To do", "To do", "To do", "To do"]

    Snapshot.objects.create(repository=repository, state=Snapshot.State.READY)
    settings.ANTHROPIC_API_KEY = "sk-ant-test"
    engineer = get_user_model().objects.create_user("eng")
    Membership.objects.create(user=engineer, repository=repository, role=Role.ENGINEER)
    assert _states(_home(admin)) == ["Done", "Done", "Done", "Done", "To do"]

    Session.objects.create(
        repository=repository, creator=engineer, title="first task", branch="main"
    )
    assert 'id="getting-started"' not in _home(admin)  # every step done
    assert 'id="getting-started"' not in _home(engineer)
