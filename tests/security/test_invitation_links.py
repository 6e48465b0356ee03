"""Invitation links with open sign-up off. The attacks: reuse one link to sign up several
accounts (logging out between them); use a used link; guess a token; read a working link out of
the database or the audit log."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import Invitation
from approvals.models import AuditEntry
from snapshots.members import invitation_accept, invite

pytestmark = pytest.mark.django_db
PASSPHRASE = "a long enough passphrase 42"


def _path(link: str) -> str:
    return "/" + link.split("/", 3)[3]


def _sign_up(path: str, username: str) -> Client:
    visitor = Client()
    visitor.get(path)
    visitor.post(
        "/accounts/signup/",
        {"username": username, "password1": PASSPHRASE, "password2": PASSPHRASE},
    )
    return visitor


def test_one_invitation_signs_up_one_account(team, settings):
    settings.OPEN_SIGNUP = False
    path = _path(invite(team.repository, "once@example.org", "engineer", by=team.admin).link)
    _sign_up(path, "first")
    _sign_up(path, "second")  # a fresh browser with the same, not yet accepted, link
    users = get_user_model().objects
    assert users.filter(username="first", email="once@example.org").exists()
    assert not users.filter(username="second").exists()


def test_a_used_link_opens_nothing(team, settings):
    settings.OPEN_SIGNUP = False
    link = invite(team.repository, "used@example.org", "admin", by=team.admin).link
    invitation_accept(link.rstrip("/").rsplit("/", 1)[1], team.outsider)
    _sign_up(_path(link), "latecomer")
    assert not get_user_model().objects.filter(username="latecomer").exists()
    assert team.repository.memberships.filter(user=team.outsider, role="admin").exists()


def test_a_guessed_token_opens_nothing(team, settings):
    settings.OPEN_SIGNUP = False
    invite(team.repository, "real@example.org", "engineer", by=team.admin)
    visitor = _sign_up("/invitations/" + "A" * 43 + "/", "guesser")
    assert visitor.get("/invitations/" + "A" * 43 + "/").status_code == 404
    assert not get_user_model().objects.filter(username="guesser").exists()


def test_neither_the_database_nor_the_audit_log_holds_a_working_link(team):
    link = invite(team.repository, "kept@example.org", "engineer", by=team.admin).link
    token = link.rstrip("/").rsplit("/", 1)[1]
    stored = Invitation.objects.get()
    assert token not in stored.token_hash
    assert Client().get(f"/invitations/{stored.token_hash}/").status_code == 404
    for entry in AuditEntry.objects.all():
        assert token not in str(entry.data)
