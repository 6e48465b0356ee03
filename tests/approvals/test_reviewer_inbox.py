"""The reviewer inbox: pending requests with context, decisions by POST, live by polling."""

from __future__ import annotations

from django.urls import reverse

from approvals.models import ApprovalRequest


def test_the_inbox_lists_pending_requests_with_their_context(
    agent_request, agent_session, team, client_for
):
    agent_session.diff_stats = {"files": 2, "added": 10, "removed": 3, "paths": []}
    agent_session.verify_ok = True
    agent_session.save()
    page = client_for(team.reviewer).get(reverse("approvals:inbox")).content.decode()
    assert "merge_pr: merge #1 into main" in page
    assert agent_session.get_absolute_url() in page
    assert "+10" in page and "passed" in page
    assert 'hx-trigger="every 5s"' in page  # every reviewer's list refreshes itself


def test_the_polled_fragment_drops_a_request_once_decided(agent_request, team, client_for):
    client = client_for(team.reviewer)
    fragment = client.get(reverse("approvals:inbox"), HTTP_HX_REQUEST="true").content.decode()
    assert "merge #1" in fragment and "<html" not in fragment
    client.post(reverse("approvals:decide", args=[agent_request.pk]), {"decision": "approve"})
    fragment = client.get(reverse("approvals:inbox"), HTTP_HX_REQUEST="true").content.decode()
    assert "merge #1" not in fragment


def test_a_reviewer_approves_with_a_reason_from_the_page(agent_request, team, client_for):
    client = client_for(team.reviewer)
    detail = client.get(reverse("approvals:detail", args=[agent_request.pk])).content.decode()
    assert 'value="approve"' in detail
    response = client.post(
        reverse("approvals:decide", args=[agent_request.pk]),
        {"decision": "approve", "reason": "tests pass"},
    )
    assert response.status_code == 302
    agent_request.refresh_from_db()
    assert (agent_request.state, agent_request.reason) == ("approved", "tests pass")


def test_the_prompts_author_sees_no_buttons_and_a_post_is_refused(agent_session, team, client_for):
    from approvals import gate

    # The reviewer wrote the prompt, so even their reviewer role does not let them decide.
    approval = gate.request_approval(
        action="merge_pr", payload={}, session=agent_session, prompt_author=team.reviewer
    )
    client = client_for(team.reviewer)
    detail = client.get(reverse("approvals:detail", args=[approval.pk])).content.decode()
    assert 'value="approve"' not in detail
    response = client.post(
        reverse("approvals:decide", args=[approval.pk]), {"decision": "approve"}, follow=True
    )
    assert "You contributed to this change" in response.content.decode()
    assert ApprovalRequest.objects.get(pk=approval.pk).state == "pending"


def test_a_second_decision_is_refused_with_a_message(agent_request, team, client_for):
    url = reverse("approvals:decide", args=[agent_request.pk])
    client_for(team.reviewer).post(url, {"decision": "reject"})
    response = client_for(team.admin).post(url, {"decision": "approve"}, follow=True)
    assert "already rejected" in response.content.decode()
    assert ApprovalRequest.objects.get(pk=agent_request.pk).state == "rejected"


def test_deciding_only_accepts_post(agent_request, team, client_for):
    response = client_for(team.reviewer).get(reverse("approvals:decide", args=[agent_request.pk]))
    assert response.status_code == 405


def test_a_merge_request_says_which_branch_goes_where(agent_session, team, client_for):
    from approvals import gate

    gate.request_approval(
        action="merge_pr",
        payload={"branch": "inspect/1-ship-it", "base": "main", "title": "ship it"},
        session=agent_session,
        requested_by=team.engineer,
        prompt_author=team.engineer,
    )
    page = client_for(team.reviewer).get(reverse("approvals:inbox")).content.decode()
    assert "merge_pr: inspect/1-ship-it → main (ship it)" in page
