import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

PAGES = ["home", "sessions:list", "snapshots:list", "approvals:inbox", "metrics"]


@pytest.mark.parametrize("name", PAGES)
def test_every_page_has_an_empty_state_and_the_navigation(client, team, name):
    client.force_login(team.engineer)
    response = client.get(reverse(name))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'class="empty"' in body
    for label in ["Sessions", "Snapshots", "Approvals", "Metrics", "Log out"]:
        assert label in body
    assert "/static/django_htmx/htmx-2.min.js" in body
    assert "cdn" not in body.lower()


@pytest.mark.parametrize("name", PAGES)
def test_pages_need_a_login(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response.url.startswith(reverse("account_login"))


def test_a_local_account_logs_in_and_out(client, team):
    response = client.post(
        reverse("account_login"),
        {"login": "engineer", "password": "correct horse battery staple"},
        follow=True,
    )
    assert response.status_code == 200
    assert b"Welcome, engineer" in response.content
    response = client.post(reverse("account_logout"), follow=True)
    assert client.get(reverse("home")).status_code == 302


def test_a_wrong_password_is_refused_with_a_message(client, team):
    response = client.post(
        reverse("account_login"), {"login": "engineer", "password": "nope"}, follow=True
    )
    assert b"Welcome" not in response.content
    assert b"not correct" in response.content


def test_signup_is_closed_unless_opened(client):
    response = client.get(reverse("account_signup"))
    assert b"Sign Up Closed" in response.content or b"closed" in response.content.lower()


def test_an_unknown_address_gets_the_friendly_404(client, team):
    client.force_login(team.engineer)
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assert b"Back to the dashboard" in response.content


def test_healthz_reports_database_and_redis(client):
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    assert response.json() == {"database": "ok", "redis": "ok"}
