"""Deciding a request: a reviewer other than the requester and the prompt's author, once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from approvals import gate
from approvals.models import ApprovalRequest, AuditEntry
from sessions.models import Event

State = ApprovalRequest.State


def test_a_request_is_idempotent_and_shown_to_the_sessions_viewers(agent_request, agent_session):
    again = gate.request_approval(
        action="merge_pr",
        payload={},
        session=agent_session,
        idempotency_key=f"merge:{agent_session.pk}",
    )
    assert again.pk == agent_request.pk
    assert ApprovalRequest.objects.count() == 1
    event = Event.objects.get(session=agent_session, kind="approval")
    assert event.payload["state"] == "pending" and event.payload["approval"] == agent_request.pk
    assert event.payload["requested_by"] == "the agent"
    assert agent_request.expires_at > timezone.now() + timedelta(hours=71)
    entry = AuditEntry.objects.get(action="approval.request")
    assert entry.actor_kind == "agent" and entry.session_id == agent_session.pk


def test_a_reviewer_approves_and_everyone_sees_it(agent_request, team, agent_session):
    decided = gate.approval_decide(
        approval=agent_request, user=team.reviewer, approve=True, reason="looks right"
    )
    assert decided.state == State.APPROVED and decided.decided_by == team.reviewer
    events = Event.objects.filter(session=agent_session, kind="approval").order_by("seq")
    assert [e.payload["state"] for e in events] == ["pending", "approved"]
    assert events.last().payload["decided_by"] == "reviewer"
    entry = AuditEntry.objects.get(action="approval.approve")
    assert entry.actor_name == "reviewer" and entry.data["reason"] == "looks right"


def test_the_prompts_author_may_not_approve(agent_request, team):
    # The engineer wrote the prompt; even as an admin-like role they would be refused.
    from accounts.models import Membership, Role

    Membership.objects.filter(user=team.engineer).update(role=Role.ADMIN)
    with pytest.raises(PermissionDenied, match=r"You contributed to this change \(prompt #1\)"):
        gate.approval_decide(approval=agent_request, user=team.engineer, approve=True)
    agent_request.refresh_from_db()
    assert agent_request.state == State.PENDING


def test_the_requester_may_not_approve_their_own_request(team, agent_session):
    approval = gate.request_approval(
        action="delete_branch",
        payload={"branch": "old"},
        session=agent_session,
        requested_by=team.admin,
        prompt_author=team.engineer,
    )
    with pytest.raises(PermissionDenied, match="You asked for this action"):
        gate.approval_decide(approval=approval, user=team.admin, approve=True)
    assert ApprovalRequest.objects.get(pk=approval.pk).state == State.PENDING


def test_a_role_without_the_right_may_not_decide(agent_request, team):
    for user in (team.manager, team.outsider):
        with pytest.raises(PermissionDenied):
            gate.approval_decide(approval=agent_request, user=user, approve=True)
    assert ApprovalRequest.objects.get(pk=agent_request.pk).state == State.PENDING


def test_a_replayed_decision_is_refused(agent_request, team):
    gate.approval_decide(approval=agent_request, user=team.reviewer, approve=False, reason="no")
    stale = ApprovalRequest.objects.get(pk=agent_request.pk)
    stale.state = State.PENDING  # what a second tab still believes
    with pytest.raises(gate.ApprovalError, match="already rejected"):
        gate.approval_decide(approval=stale, user=team.admin, approve=True)
    fresh = ApprovalRequest.objects.get(pk=agent_request.pk)
    assert (fresh.state, fresh.decided_by) == (State.REJECTED, team.reviewer)
    assert AuditEntry.objects.filter(action__startswith="approval.a").count() == 0


def test_an_expired_request_cannot_be_approved(agent_request, team, agent_session):
    ApprovalRequest.objects.filter(pk=agent_request.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    agent_request.refresh_from_db()
    with pytest.raises(gate.ApprovalError, match="expired"):
        gate.approval_decide(approval=agent_request, user=team.reviewer, approve=True)
    assert ApprovalRequest.objects.get(pk=agent_request.pk).state == State.EXPIRED
    last = Event.objects.filter(session=agent_session, kind="approval").order_by("seq").last()
    assert last.payload["state"] == "expired"


def test_overdue_requests_are_expired_by_the_periodic_task(agent_request):
    ApprovalRequest.objects.filter(pk=agent_request.pk).update(
        expires_at=timezone.now() - timedelta(minutes=5)
    )
    assert gate.expire_overdue() == 1
    assert gate.expire_overdue() == 0
    assert ApprovalRequest.objects.get(pk=agent_request.pk).state == State.EXPIRED
