"""The Sessions list: its state badges refresh themselves, and the author and repository
filters narrow it."""

import pytest
from django.urls import reverse

from sessions.models import Session

pytestmark = pytest.mark.django_db


def test_the_state_badges_refresh_themselves_with_the_filters_kept(client, team):
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix login", branch="main"
    )
    client.force_login(team.engineer)
    page = client.get(reverse("sessions:list") + "?q=login").content.decode()
    assert 'hx-trigger="change, keyup changed delay:300ms from:#q, every 5s"' in page
    assert 'hx-target="#sessions-table"' in page
    assert '<span class="badge state-queued">Queued</span>' in page

    Session.objects.filter(pk=session.pk).update(state="running")
    fragment = client.get(
        reverse("sessions:list") + "?q=login", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "<html" not in fragment and "Fix login" in fragment
    assert '<span class="badge state-running">Running</span>' in fragment


def test_the_author_and_repository_filters(client, team):
    Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix login", branch="main"
    ).prompts.create(author=team.engineer, text="fix login", order=1)
    Session.objects.create(
        repository=team.repository, creator=team.admin, title="Bump deps", branch="main"
    ).prompts.create(author=team.admin, text="bump", order=1)
    Session.objects.create(
        repository=team.other_repository, creator=team.outsider, title="Secret", branch="main"
    )
    client.force_login(team.engineer)
    page = client.get(reverse("sessions:list") + "?author=admin").content.decode()
    assert "Bump deps" in page and "Fix login" not in page
    page = client.get(reverse("sessions:list") + "?repository=widgets").content.decode()
    assert "Bump deps" in page and "Fix login" in page
    page = client.get(reverse("sessions:list") + "?repository=gadgets").content.decode()
    assert "Secret" not in page  # another team's repository stays invisible, filter or not
