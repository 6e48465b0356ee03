"""Settings › People and `inspect member …`: one set of actions (snapshots.members) that
validates, saves atomically and audits; the last admin stays; an invitation link signs up its
holder even with open sign-up off, once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.utils import timezone

from accounts.models import Invitation, Membership
from approvals.models import AuditEntry
from snapshots.members import (
    MemberRefused,
    invitation_accept,
    invite,
    member_remove,
    member_set_role,
)

pytestmark = pytest.mark.django_db
PEOPLE = "/settings/repositories/widgets/people/"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _role(team, username: str) -> str | None:
    return (
        Membership.objects.filter(repository=team.repository, user__username=username)
        .values_list("role", flat=True)
        .first()
    )


def test_the_page_lists_members_with_their_roles(team):
    page = _client(team.admin).get(PEOPLE)
    assert page.status_code == 200
    text = page.content.decode()
    for name in ("engineer", "reviewer", "manager", "admin"):
        assert f'data-member="{name}"' in text
    assert 'data-member="outsider"' not in text


def test_invite_by_username_makes_a_member_at_once_and_is_audited(team):
    newcomer = get_user_model().objects.create_user("newcomer", password="x" * 12)
    response = _client(team.admin).post(PEOPLE, {"who": "newcomer", "role": "reviewer"})
    assert response.status_code == 302
    assert _role(team, "newcomer") == "reviewer"
    entry = AuditEntry.objects.get(action="membership.add", data__user="newcomer")
    assert entry.actor == team.admin and entry.data["role"] == "reviewer"
    assert newcomer.memberships.count() == 1


def test_invite_by_a_verified_address_makes_that_account_a_member(team):
    user = get_user_model().objects.create_user("verified", password="x" * 12)
    EmailAddress.objects.create(user=user, email="v@example.org", verified=True, primary=True)
    invited = invite(team.repository, "V@example.org", "engineer", by=team.admin)
    assert invited.membership.user == user and invited.invitation is None
    assert not Invitation.objects.exists() and not mail.outbox


def test_an_unverified_address_gets_an_invitation_not_the_account(team):
    typed = get_user_model().objects.create_user("typed", password="x" * 12)
    EmailAddress.objects.create(user=typed, email="t@example.org", verified=False, primary=True)
    invited = invite(team.repository, "t@example.org", "engineer", by=team.admin)
    assert invited.membership is None and invited.invitation is not None
    assert not Membership.objects.filter(user=typed).exists()


def test_invite_by_email_sends_a_link_and_stores_only_its_hash(
    team, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # the mail leaves after commit
        response = _client(team.admin).post(PEOPLE, {"who": "new@example.org", "role": "reviewer"})
    assert response.status_code == 200
    link = re.search(r'value="(http://testserver/invitations/[^"]+/)"', response.content.decode())
    assert link, "the link is shown to the admin"
    token = link.group(1).rstrip("/").rsplit("/", 1)[1]
    invitation = Invitation.objects.get()
    assert invitation.email == "new@example.org" and invitation.role == "reviewer"
    assert token not in invitation.token_hash and len(invitation.token_hash) == 64
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["new@example.org"]
    assert link.group(1) in mail.outbox[0].body
    entry = AuditEntry.objects.get(action="invitation.create")
    assert token not in str(entry.data) and entry.data["email"] == "new@example.org"
    # Pending invitations are listed; the link is not shown again.
    again = _client(team.admin).get(PEOPLE).content.decode()
    assert "new@example.org" in again and token not in again


def test_inviting_a_member_says_so_and_changes_nothing(team):
    response = _client(team.admin).post(PEOPLE, {"who": "engineer", "role": "admin"})
    assert response.status_code == 400
    assert "engineer is already a member of widgets (engineer)" in response.content.decode()
    assert _role(team, "engineer") == "engineer"
    EmailAddress.objects.create(user=team.reviewer, email="r@example.org", verified=True)
    with pytest.raises(MemberRefused, match="already a member"):
        invite(team.repository, "r@example.org", "admin", by=team.admin)
    assert not AuditEntry.objects.filter(action__startswith="membership.", actor=team.admin)


def test_bad_invitations_are_refused_on_the_form(team):
    client = _client(team.admin)
    nobody = client.post(PEOPLE, {"who": "nobody", "role": "engineer"})
    assert nobody.status_code == 400 and "no user named" in nobody.content.decode()
    bad = client.post(PEOPLE, {"who": "not@an@address", "role": "engineer"})
    assert bad.status_code == 400 and "is not an e-mail address" in bad.content.decode()
    role = client.post(PEOPLE, {"who": "x@example.org", "role": "owner"})
    assert role.status_code == 400
    assert not Invitation.objects.exists()


def test_change_a_role_and_remove_a_member(team):
    client = _client(team.admin)
    client.post(f"{PEOPLE}{team.engineer.pk}/role/", {"role": "manager"})
    assert _role(team, "engineer") == "manager"
    entry = AuditEntry.objects.get(action="membership.role")
    assert entry.actor == team.admin
    assert entry.data == {"user": "engineer", "before": "engineer", "role": "manager"}
    client.post(f"{PEOPLE}{team.engineer.pk}/remove/")
    assert _role(team, "engineer") is None
    removal = AuditEntry.objects.get(action="membership.remove")
    assert removal.actor == team.admin and removal.data["user"] == "engineer"


def test_the_last_admin_cannot_be_removed_or_demoted(team):
    client = _client(team.admin)
    removed = client.post(f"{PEOPLE}{team.admin.pk}/remove/", follow=True)
    assert "admin is the last admin of widgets" in removed.content.decode()
    demoted = client.post(f"{PEOPLE}{team.admin.pk}/role/", {"role": "engineer"}, follow=True)
    assert "last admin" in demoted.content.decode()
    assert _role(team, "admin") == "admin"
    # With a second admin, the first may step down.
    member_set_role(team.repository, team.manager, "admin", by=team.admin)
    member_set_role(team.repository, team.admin, "engineer", by=team.admin)
    with pytest.raises(MemberRefused, match="last admin"):
        member_remove(team.repository, team.manager, by=team.admin)
    assert not AuditEntry.objects.filter(action="membership.remove").exists()


def test_people_pages_refuse_engineers_and_non_members(team):
    engineer = _client(team.engineer)
    assert engineer.get(PEOPLE).status_code == 403
    assert engineer.post(PEOPLE, {"who": "outsider", "role": "admin"}).status_code == 403
    assert engineer.post(f"{PEOPLE}{team.admin.pk}/remove/").status_code == 403
    outsider = _client(team.outsider)  # admin of gadgets, not a member of widgets
    assert outsider.get(PEOPLE).status_code == 404
    assert outsider.post(f"{PEOPLE}{team.engineer.pk}/remove/").status_code == 404
    assert outsider.post(f"{PEOPLE}{team.engineer.pk}/role/", {"role": "admin"}).status_code == 404
    # A member of another repository cannot be changed through this one's address.
    gadgets = _client(team.outsider).post(
        f"/settings/repositories/gadgets/people/{team.engineer.pk}/remove/"
    )
    assert gadgets.status_code == 404
    assert _role(team, "engineer") == "engineer"


def _invitation_link(team, email: str = "joiner@example.org", role: str = "reviewer") -> str:
    return invite(team.repository, email, role, by=team.admin).link


def test_an_invitation_opens_sign_up_for_its_holder_only(team, settings):
    settings.OPEN_SIGNUP = False
    closed_page = Client().get("/accounts/signup/")
    assert "account/signup_closed.html" in [t.name for t in closed_page.templates]
    path = _invitation_link(team).removeprefix("http://localhost:8000")
    visitor = Client()
    page = visitor.get(path)
    assert page.status_code == 200 and b"Create an account" in page.content
    signup = visitor.post(
        f"/accounts/signup/?next={path}",
        {
            "username": "joiner",
            "email": "someone-else@example.org",
            "password1": "a long enough passphrase 42",
            "password2": "a long enough passphrase 42",
        },
    )
    assert signup.status_code == 302 and signup["Location"] == path
    user = get_user_model().objects.get(username="joiner")
    assert user.email == "joiner@example.org"  # the invited address, verified
    assert EmailAddress.objects.filter(user=user, email="joiner@example.org", verified=True)
    joined = visitor.post(path)
    assert joined.status_code == 302
    assert _role(team, "joiner") == "reviewer"
    entry = AuditEntry.objects.get(action="invitation.accept")
    assert entry.actor == user and entry.data["joined"]
    # Used: the link says so, and no longer opens sign-up.
    again = Client()
    used = again.get(path)
    assert used.status_code == 410 and b"already been used" in used.content
    passphrase = "another passphrase 42"
    closed = again.post(
        "/accounts/signup/",
        {"username": "second", "password1": passphrase, "password2": passphrase},
    )
    assert "account/signup_closed.html" in [t.name for t in closed.templates]
    assert not get_user_model().objects.filter(username="second").exists()


def test_a_logged_in_user_accepts_and_expired_or_unknown_links_say_so(team):
    newcomer = get_user_model().objects.create_user("newcomer", password="x" * 12)
    path = _invitation_link(team, "n@example.org", "engineer").removeprefix("http://localhost:8000")
    client = _client(newcomer)
    assert b"Join widgets" in client.get(path).content
    assert client.post(path).status_code == 302
    assert _role(team, "newcomer") == "engineer"

    expired = _invitation_link(team, "late@example.org")
    Invitation.objects.filter(email="late@example.org").update(
        expires=timezone.now() - timedelta(minutes=1)
    )
    late = client.get(expired.removeprefix("http://localhost:8000"))
    assert late.status_code == 410 and b"has expired" in late.content
    with pytest.raises(MemberRefused, match="expired"):
        invitation_accept(expired.rsplit("/", 2)[1], newcomer)
    unknown = client.get("/invitations/not-a-token/")
    assert unknown.status_code == 404 and b"not valid" in unknown.content


def test_a_new_invitation_replaces_the_pending_one(team):
    first = _invitation_link(team, "twice@example.org")
    second = _invitation_link(team, "twice@example.org", "admin")
    assert Invitation.objects.filter(email="twice@example.org").count() == 1
    assert Client().get(first.removeprefix("http://localhost:8000")).status_code == 404
    assert Client().get(second.removeprefix("http://localhost:8000")).status_code == 200


def test_the_cli_uses_the_same_actions(team, inspect_cli):
    get_user_model().objects.create_user("cli-user", password="x" * 12)
    assert inspect_cli("member", "add", "widgets", "cli-user", "--role", "reviewer")[0] == 0
    assert _role(team, "cli-user") == "reviewer"
    assert inspect_cli("member", "role", "widgets", "cli-user", "manager")[0] == 0
    assert _role(team, "cli-user") == "manager"
    code, out, err = inspect_cli("member", "remove", "widgets", "admin")
    assert code == 1 and "last admin" in err and _role(team, "admin") == "admin"
    code, out, _ = inspect_cli("member", "invite", "widgets", "cli@example.org")
    assert code == 0 and "/invitations/" in out
    code, out, _ = inspect_cli("member", "list", "widgets", "--json")
    assert '"cli-user"' in out and "cli@example.org" in out
    assert inspect_cli("member", "remove", "widgets", "cli-user")[0] == 0
    assert _role(team, "cli-user") is None
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {
        "membership.add",
        "membership.role",
        "membership.remove",
        "invitation.create",
    } <= actions
    cli_entries = AuditEntry.objects.filter(action__startswith="membership.", actor=team.admin)
    assert cli_entries.count() == 3  # the CLI acts as the first site admin unless --as
