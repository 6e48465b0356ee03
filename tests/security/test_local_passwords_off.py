"""Local passwords off (Settings › Sign-in): a correct password logs nobody in, wherever it is
posted (allauth's login, the admin's login, sign-up), except the break-glass superuser when the
deployment set INSPECT_LOCAL_LOGIN=superuser."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from inspect_web import site_settings

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def fresh_settings():
    site_settings.forget()
    yield
    site_settings.forget()


@pytest.fixture
def passwords_off(team):
    site_settings.store("INSPECT_LOCAL_PASSWORDS_OFF", "1", by=team.admin)


def logged_in_as(client: Client):
    return client.get("/").wsgi_request.user


def test_a_correct_password_logs_in_while_passwords_are_on(team):
    client = Client()
    page = client.get("/accounts/login/")
    assert b'name="password"' in page.content and b'href="/accounts/signup/"' in page.content
    response = client.post("/accounts/login/", {"login": "engineer", "password": PASSWORD})
    assert response.status_code == 302
    assert logged_in_as(client) == team.engineer


def test_allauth_login_refuses_a_correct_password(team, passwords_off):
    client = Client()
    response = client.post("/accounts/login/", {"login": "engineer", "password": PASSWORD})
    assert response.status_code == 200
    assert b"Password sign-in is off on this site" in response.content
    assert not logged_in_as(client).is_authenticated


def test_the_login_page_offers_no_password_form(team, passwords_off):
    page = Client().get("/accounts/login/")
    assert b'name="password"' not in page.content and b"/accounts/signup/" not in page.content
    assert b"Password sign-in is off on this site" in page.content


def test_the_admin_login_refuses_a_correct_password(team, passwords_off):
    client = Client()
    client.post("/admin/login/", {"username": "admin", "password": PASSWORD, "next": "/admin/"})
    assert not logged_in_as(client).is_authenticated
    assert not client.login(username="admin", password=PASSWORD)


@override_settings(OPEN_SIGNUP=True)
def test_sign_up_is_closed(team, passwords_off):
    from django.contrib.auth import get_user_model

    client = Client()
    client.post(
        "/accounts/signup/",
        {"username": "newcomer", "email": "", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert not get_user_model().objects.filter(username="newcomer").exists()


@override_settings(LOCAL_LOGIN="superuser")
def test_break_glass_lets_only_the_superuser_use_a_password(team, passwords_off):
    page = Client().get("/accounts/login/")
    assert b"Site administrator" in page.content
    client = Client()
    response = client.post("/accounts/login/", {"login": "admin", "password": PASSWORD})
    assert response.status_code == 302
    assert logged_in_as(client) == team.admin
    # A session made by the break-glass backend stays valid.
    assert client.get("/settings/sign-in/").status_code == 200
    other = Client()
    other.post("/accounts/login/", {"login": "manager", "password": PASSWORD})
    assert not logged_in_as(other).is_authenticated
    wrong = Client()
    wrong.post("/accounts/login/", {"login": "admin", "password": "not the password"})
    assert not logged_in_as(wrong).is_authenticated
