"""Four eyes: nobody who contributed to a change decides its merge.

The attack: bob writes a follow-up prompt in alice's session (or types in its terminal), then,
as a reviewer, approves the merge alice asks for. Every door is tried: the Approvals page, the
API and the CLI. A reviewer who contributed nothing still approves.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.urls import reverse

from accounts.models import Membership, Role
from approvals import gate
from approvals.models import ApprovalRequest, AuditEntry
from sessions import pulls
from sessions.models import PullRequest, Session
from sessions.services import prompt_queue, session_create
from tests.sessions.stream.conftest import in_thread
from tests.sessions.terminal.conftest import TerminalClient

State = ApprovalRequest.State


def member(team, name: str, role: str):
    user = get_user_model().objects.create_user(name, password="correct horse battery staple")
    Membership.objects.create(user=user, repository=team.repository, role=role)
    return user


def login_cookie(user) -> str:
    """The Cookie header of a browser logged in as `user`."""
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def open_pull_request(session: Session) -> PullRequest:
    return PullRequest.objects.create(
        session=session,
        repository=session.repository,
        branch=f"inspect/{session.pk}",
        base="main",
        title=session.title,
        head_sha="a" * 40,
    )


@pytest.fixture
def bobs_follow_up(team):
    """Alice (engineer) starts a session; bob, an engineer then, writes its second prompt and is
    made a reviewer; alice asks to merge. Returns (approval, bob)."""
    alice = team.engineer
    bob = member(team, "bob", Role.ENGINEER)
    session = session_create(
        repository=team.repository, creator=alice, prompt="add a flag", agent_command="true"
    )
    prompt_queue(session=session, author=bob, text="and turn the flag on by default")
    Membership.objects.filter(user=bob).update(role=Role.REVIEWER)
    approval = pulls.request_merge(open_pull_request(session), alice)
    return approval, bob


def still_pending(approval) -> bool:
    return ApprovalRequest.objects.get(pk=approval.pk).state == State.PENDING


@pytest.mark.django_db
def test_a_follow_up_prompts_author_cannot_approve_on_the_page(bobs_follow_up, client_for):
    approval, bob = bobs_follow_up
    page = client_for(bob)
    detail = page.get(reverse("approvals:detail", args=[approval.pk]))
    assert b'value="approve"' not in detail.content
    assert b"You contributed to this change (prompt #2)" in detail.content
    response = page.post(
        reverse("approvals:decide", args=[approval.pk]), {"decision": "approve"}, follow=True
    )
    assert "You contributed to this change (prompt #2)" in response.content.decode()
    assert still_pending(approval)


@pytest.mark.django_db
def test_a_follow_up_prompts_author_cannot_approve_through_the_api(bobs_follow_up, api):
    approval, bob = bobs_follow_up
    response = api(bob).post(f"/api/approvals/{approval.pk}/decide/", {"decision": "approve"})
    assert response.status_code == 403
    assert "You contributed to this change (prompt #2)" in response.json()["detail"]
    assert still_pending(approval)


@pytest.mark.django_db
def test_a_follow_up_prompts_author_cannot_approve_from_the_cli(bobs_follow_up, inspect_cli):
    approval, bob = bobs_follow_up
    code, _, err = inspect_cli("approval", "decide", str(approval.pk), "approve", "--as", "bob")
    assert code == 1
    assert "You contributed to this change (prompt #2)" in err
    assert still_pending(approval)


@pytest.mark.django_db
def test_the_inbox_offers_the_decision_only_to_reviewers_who_did_not_contribute(
    bobs_follow_up, team, client_for
):
    approval, bob = bobs_follow_up
    assert b"another reviewer decides" in client_for(bob).get(reverse("approvals:inbox")).content
    detail = reverse("approvals:detail", args=[approval.pk])
    assert reverse("approvals:detail", args=[approval.pk]).encode() in (
        client_for(team.reviewer).get(reverse("approvals:inbox")).content
    )
    assert b'value="approve"' in client_for(team.reviewer).get(detail).content


@pytest.mark.django_db
def test_a_reviewer_who_contributed_nothing_approves(bobs_follow_up, team, api):
    approval, _ = bobs_follow_up
    response = api(team.reviewer).post(
        f"/api/approvals/{approval.pk}/decide/", {"decision": "approve"}
    )
    assert response.status_code == 200, response.json()
    assert response.json()["state"] == State.APPROVED


@pytest.mark.django_db(transaction=True)
async def test_a_terminal_typist_whose_hand_edit_was_committed_cannot_approve(
    terminal_daphne, live_session, team, inspect_cli
):
    """Carol (an engineer then) edits a file by hand in the terminal; the edit is committed as
    her. Made a reviewer, she tries to approve the merge the session's engineer asks for."""

    def make_carol() -> str:
        return login_cookie(member(team, "carol", Role.ENGINEER))

    term = await TerminalClient.open(terminal_daphne, live_session.pk, await in_thread(make_carol))
    assert (await term.until_message("hello"))["can_type"] is True
    await term.type("echo 'tuned by hand' >> README.md && echo carol-$((2*21))\r")
    await term.until_output(b"carol-42")
    await term.send(type="commit")
    assert (await term.until_message("recorded"))["files"] >= 1
    await term.close()

    def request_and_try() -> tuple[int, str, bool]:
        Membership.objects.filter(user__username="carol").update(role=Role.REVIEWER)
        session = Session.objects.get(pk=live_session.pk)
        approval = pulls.request_merge(open_pull_request(session), team.engineer)
        code, _, err = inspect_cli(
            "approval", "decide", str(approval.pk), "approve", "--as", "carol"
        )
        return code, err, still_pending(approval)

    code, err, pending = await in_thread(request_and_try)
    assert code == 1 and pending
    assert "You contributed to this change" in err


@pytest.mark.django_db
def test_the_django_admin_cannot_decide_around_the_gate(bobs_follow_up, team, client_for):
    approval, _ = bobs_follow_up
    page = client_for(team.admin)  # the site's superuser
    url = reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
    response = page.post(url, {"state": "approved", "action": "merge_pr", "payload": "{}"})
    assert response.status_code == 403
    assert still_pending(approval)


@pytest.mark.django_db(transaction=True)
async def test_a_co_author_of_a_hand_edit_cannot_approve_even_without_an_audited_line(
    terminal_daphne, live_session, team
):
    """Dave runs a command with readline's Ctrl-O (accept-line without Enter), so no typed line
    is audited while the terminal is open; his edit is committed as his, and that is enough."""

    def make_dave() -> str:
        return login_cookie(member(team, "dave", Role.ENGINEER))

    term = await TerminalClient.open(terminal_daphne, live_session.pk, await in_thread(make_dave))
    await term.until_message("hello")
    await term.type("echo by-$((1+1))-hands > dave.txt; echo dave-$((3*3))\x0f")
    await term.until_output(b"dave-9")
    await term.send(type="commit")
    assert (await term.until_message("recorded"))["files"] >= 1

    def request_and_try() -> tuple[bool, str, bool]:
        audited = AuditEntry.objects.filter(
            action="terminal.input", actor_name="dave", session_id=live_session.pk
        ).exists()
        Membership.objects.filter(user__username="dave").update(role=Role.REVIEWER)
        session = Session.objects.get(pk=live_session.pk)
        approval = pulls.request_merge(open_pull_request(session), team.engineer)
        dave = get_user_model().objects.get(username="dave")

        try:
            gate.approval_decide(approval=approval, user=dave, approve=True)
        except PermissionDenied as exc:
            return audited, str(exc), still_pending(approval)
        return audited, "", still_pending(approval)

    audited, refusal, pending = await in_thread(request_and_try)
    await term.close()
    assert not audited  # the commit, not the audit of typed lines, is what names him here
    assert pending and "You contributed to this change (authored one of its commits)" in refusal
