"""An oversized event's artifact (its whole payload, linked from the capped event) is served to
members of the session's repository only: a non-member gets 404, as for a session that does not
exist, and an anonymous visitor is sent to log in."""

from __future__ import annotations

import json

import pytest

from sessions.events import append_events
from sessions.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def artifact_link(agent_session) -> str:
    text = "begin " + "x" * 100_000 + " end"
    append_events(agent_session.pk, [("output", {"stream": "stdout", "text": text})])
    payload = Event.objects.filter(session=agent_session, kind="output").latest("seq").payload
    return payload["artifact"]


def test_a_member_gets_the_artifacts_bytes(artifact_link, team, client_for):
    response = client_for(team.reviewer).get(artifact_link)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    whole = json.loads(b"".join(response.streaming_content))
    assert whole["text"].startswith("begin x") and whole["text"].endswith("x end")


def test_a_non_member_gets_404_and_an_anonymous_visitor_the_login(
    artifact_link, team, client_for, client
):
    assert client_for(team.outsider).get(artifact_link).status_code == 404
    anonymous = client.get(artifact_link)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]


def test_a_name_that_is_not_an_artifact_of_this_session_gets_404(
    artifact_link, team, client_for, agent_session
):
    member = client_for(team.reviewer)
    name = artifact_link.rsplit("/", 1)[-1]
    for link in (
        f"/sessions/{agent_session.pk}/artifacts/..%2F..%2Fsecret.json",
        f"/sessions/{agent_session.pk}/artifacts/output-{'0' * 32}.json",
        f"/sessions/{agent_session.pk + 1000}/artifacts/{name}",
    ):
        assert member.get(link).status_code == 404, link
