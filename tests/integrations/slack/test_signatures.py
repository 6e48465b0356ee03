"""Slack requests are verified with the signing secret (v0, 5-minute replay window)."""

import json

import pytest

from tests.integrations.slack.conftest import signed

pytestmark = pytest.mark.django_db

CHALLENGE = json.dumps({"type": "url_verification", "challenge": "3eZbrw1aBm2rZgRNFdxV"}).encode()


def post(client, path, body, headers, content_type="application/json"):
    return client.post(path, body, content_type=content_type, **headers)


def test_a_signed_url_verification_gets_its_challenge_back(client, fake_slack):
    response = post(client, "/slack/events/", CHALLENGE, signed(CHALLENGE))
    assert response.status_code == 200
    assert response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV"}


@pytest.mark.parametrize(
    "headers",
    [
        signed(CHALLENGE, secret="someone-elses-secret"),
        signed(CHALLENGE, age=6 * 60),  # replayed after the 5-minute window
        {},
    ],
    ids=["wrong secret", "stale timestamp", "unsigned"],
)
def test_wrong_stale_or_missing_signatures_are_401(client, fake_slack, headers):
    response = post(client, "/slack/events/", CHALLENGE, headers)
    assert response.status_code == 401
    assert "signing secret" in response.json()["error"]
    command = b"text=repo%3Awidgets+hi&channel_id=C1&user_id=U1"
    refused = post(client, "/slack/commands/", command, headers,
                   content_type="application/x-www-form-urlencoded")  # fmt: skip
    assert refused.status_code == 401
    assert fake_slack.calls == []


def test_a_tampered_body_is_401(client, fake_slack):
    headers = signed(CHALLENGE)
    tampered = CHALLENGE.replace(b"3eZ", b"4eZ")
    assert post(client, "/slack/events/", tampered, headers).status_code == 401
