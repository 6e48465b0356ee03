"""Who opens the settings area: site admins everything, a repository admin their repositories,
an engineer nothing (403 with who to ask), a non-member a 404 (names cannot be probed)."""

from __future__ import annotations

import pytest
from django.test import Client


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_site_admin_sees_every_repository(team):
    page = _client(team.admin).get("/settings/repositories/")
    assert page.status_code == 200
    assert b"widgets" in page.content and b"gadgets" in page.content
    assert b'href="/settings/"' in _client(team.admin).get("/").content


@pytest.mark.django_db
def test_repository_admin_sees_only_their_repositories(team):
    client = _client(team.outsider)  # admin of gadgets only, not a site admin
    listing = client.get("/settings/repositories/")
    assert b"gadgets" in listing.content and b"widgets" not in listing.content
    assert client.get("/settings/repositories/gadgets/").status_code == 200
    assert client.get("/settings/repositories/widgets/").status_code == 404


@pytest.mark.django_db
def test_engineer_sees_no_settings(team):
    client = _client(team.engineer)
    assert b'href="/settings/"' not in client.get("/").content
    assert client.get("/settings/repositories/").status_code == 403
    refused = client.get("/settings/repositories/widgets/")
    assert refused.status_code == 403 and b"ask one of its admins" in refused.content
    assert client.get("/settings/repositories/gadgets/").status_code == 404


@pytest.mark.django_db
def test_anonymous_is_sent_to_log_in(team):
    response = Client().get("/settings/repositories/widgets/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
