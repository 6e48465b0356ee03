"""Four eyes: nobody who contributed to a change decides its merge.

The attack: bob writes a follow-up prompt in alice's session (or types in its terminal), then,
as a reviewer, approves the merge alice asks for. Every door is tried: the Approvals page, the
API and the CLI. A reviewer who contributed nothing still approves.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from approvals.models import ApprovalRequest
from sessions import pulls
from sessions.models import PullRequest, Session
from sessions.services import prompt_queue, session_create
from snapshots.models import Membership, Role
from tests.streaming.conftest import in_thread
from tests.terminal.conftest import TerminalClient

State = ApprovalRequest.State


def member(team, name: str, role: str):
    user = get_user_model().objects.create_user(name, password="correct horse battery staple")
    Membership.objects.create(user=user, repository=team.repository, role=role)
    return user


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
    from django.conf import settings
    from django.test import Client

    def make_carol() -> str:
        carol = member(team, "carol", Role.ENGINEER)
        client = Client()
        client.force_login(carol)
        return (
            f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        )

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
