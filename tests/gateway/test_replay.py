"""Replaying a session's model requests: the members of its repository see every request and its
bodies (pretty JSON) while they are kept; anyone else gets 404, as for a request that does not
exist; once the bodies expire the page says when."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from gateway.metering import record
from gateway.models import ModelRequest, ModelRequestBody
from gateway.retention import delete_expired_bodies
from sessions.models import Prompt, Session

pytestmark = pytest.mark.django_db


def test_a_member_replays_what_the_agent_was_told_and_answered(
    anthropic_exchange, agent_session, team, client_for
):
    row = record(anthropic_exchange("create notes.txt with hello"))
    refused = record(
        anthropic_exchange(
            model="gpt-4.1", status=403, outcome="refused_policy", input_tokens=0,
            output_tokens=0, response_body=b'{"error": "not allowed"}',
            message="gpt-4.1 is not allowed in widgets; allowed: claude-sonnet-4-5",
        )
    )  # fmt: skip
    reviewer = client_for(team.reviewer)

    page = reviewer.get(f"/sessions/{agent_session.pk}/model-requests/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "claude-sonnet-4-5" in html and "claude-code" in html
    assert f"${row.cost_usd:.6f}" in html
    assert f"/sessions/{agent_session.pk}/model-requests/{row.pk}/" in html
    assert "403" in html and "the model is not allowed here" in html

    detail = reviewer.get(f"/sessions/{agent_session.pk}/model-requests/{row.pk}/")
    assert detail.status_code == 200
    html = detail.content.decode()
    # The request as sent, indented; the response the stand-in gave, indented.
    assert "create notes.txt with hello" in html
    assert "  &quot;model&quot;: &quot;claude-sonnet-4-5&quot;" in html
    sent = json.loads(ModelRequestBody.objects.get(request=row).response_body)
    assert f"&quot;{sent['id']}&quot;" in html
    assert html.count("matches the recorded SHA-256") == 2
    assert row.request_sha256 in html

    refusal = reviewer.get(f"/sessions/{agent_session.pk}/model-requests/{refused.pk}/")
    assert "allowed: claude-sonnet-4-5" in refusal.content.decode()


def test_the_session_page_links_to_its_model_requests_and_logs_each(
    anthropic_exchange, agent_session, team, client_for
):
    row = record(anthropic_exchange())
    html = client_for(team.engineer).get(f"/sessions/{agent_session.pk}/").content.decode()
    assert f'href="/sessions/{agent_session.pk}/model-requests/"' in html
    # The usage event in the log: model, tokens, cost and a link to its replay.
    assert f"{row.input_tokens} in / {row.output_tokens} out · ${row.cost_usd}" in html
    assert f'href="/sessions/{agent_session.pk}/model-requests/{row.pk}/"' in html


def test_a_non_member_gets_404_and_ids_cannot_be_mixed(
    anthropic_exchange, agent_session, team, client_for
):
    row = record(anthropic_exchange())
    outsider = client_for(team.outsider)
    assert outsider.get(f"/sessions/{agent_session.pk}/model-requests/").status_code == 404
    theirs = outsider.get(f"/sessions/{agent_session.pk}/model-requests/{row.pk}/")
    assert theirs.status_code == 404 and b"create notes" not in theirs.content

    # A session the outsider may see, with another session's request id in the address.
    own = Session.objects.create(
        repository=team.other_repository, creator=team.outsider, title="mine", branch="inspect/9"
    )
    Prompt.objects.create(session=own, author=team.outsider, text="hi", order=1)
    assert outsider.get(f"/sessions/{own.pk}/model-requests/").status_code == 200
    assert outsider.get(f"/sessions/{own.pk}/model-requests/{row.pk}/").status_code == 404
    # Not logged in: to the sign-in page, nothing shown.
    response = Client().get(f"/sessions/{agent_session.pk}/model-requests/{row.pk}/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_expired_bodies_are_not_shown_and_the_page_says_when(
    anthropic_exchange, agent_session, team, client_for, settings
):
    settings.GATEWAY_BODY_DAYS = 3
    row = record(anthropic_exchange("create notes.txt with hello"))
    # Recorded three days and five minutes ago: its bodies expired five minutes ago.
    made = timezone.now() - timedelta(days=3, minutes=5)
    ended = made + timedelta(days=3)
    ModelRequest.objects.filter(pk=row.pk).update(created_at=made)
    ModelRequestBody.objects.filter(request=row).update(expires_at=ended)
    url = f"/sessions/{agent_session.pk}/model-requests/{row.pk}/"
    member = client_for(team.engineer)

    # Past its time but not yet deleted by the hourly task: not shown all the same.
    html = member.get(url).content.decode()
    assert f"The bodies expired on {ended:%Y-%m-%d %H:%M} UTC." in html
    assert "create notes.txt" not in html and row.request_sha256 in html

    assert delete_expired_bodies() == 1
    html = member.get(url).content.decode()
    assert f"The bodies expired on {ended:%Y-%m-%d %H:%M} UTC." in html
    assert "create notes.txt" not in html

    settings.GATEWAY_BODY_DAYS = 0
    assert "Bodies are not kept on this site" in member.get(url).content.decode()
