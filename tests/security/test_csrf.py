"""State-changing POSTs without a CSRF token are refused."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest


def test_a_decision_without_a_csrf_token_is_refused(agent_request, team):
    client = Client(enforce_csrf_checks=True)
    client.force_login(team.reviewer)
    url = reverse("approvals:decide", args=[agent_request.pk])
    assert client.post(url, {"decision": "approve"}).status_code == 403
    assert ApprovalRequest.objects.get(pk=agent_request.pk).state == "pending"
    # With the token from the page it goes through: the refusal was the token, not the user.
    client.get(reverse("approvals:detail", args=[agent_request.pk]))
    token = client.cookies["csrftoken"].value
    assert (
        client.post(url, {"decision": "approve", "csrfmiddlewaretoken": token}).status_code == 302
    )
    assert ApprovalRequest.objects.get(pk=agent_request.pk).state == "approved"


def test_a_prompt_without_a_csrf_token_is_refused(agent_session, team):
    client = Client(enforce_csrf_checks=True)
    client.force_login(team.engineer)
    response = client.post(reverse("sessions:prompt", args=[agent_session.pk]), {"text": "hi"})
    assert response.status_code == 403
    assert agent_session.prompts.count() == 1
