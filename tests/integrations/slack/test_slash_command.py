"""`/inspect repo:NAME …`: answered at once (ephemeral), the session starts in the thread of the
bot's own message, and the thread shows its status. Real worker, fake Slack Web API."""

import json
from urllib.parse import urlencode

import pytest

from integrations.models import SlackThread, SlackUser
from tests.integrations.slack.conftest import BOT_TOKEN, signed

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_slash_command_starts_a_session_in_a_thread(client, team, fake_slack, slack_worker):
    SlackUser.objects.create(slack_user_id="UENG", user=team.engineer)
    body = urlencode(
        {"command": "/inspect", "text": "repo:widgets add a changelog",
         "channel_id": "CGENERAL", "user_id": "UENG"}
    ).encode()  # fmt: skip
    response = client.post(
        "/slack/commands/", body, content_type="application/x-www-form-urlencoded", **signed(body)
    )
    assert response.status_code == 200
    assert response.json() == {
        "response_type": "ephemeral",
        "text": "On it — follow along in the thread.",
    }
    asked = fake_slack.of("chat.postMessage")[0]
    assert asked["auth"] == f"Bearer {BOT_TOKEN}"
    assert asked["body"]["text"] == "<@UENG> asked: repo:widgets add a changelog"

    thread = fake_slack.wait_for(lambda: SlackThread.objects.filter(status_ts__gt="").first())
    assert thread.channel_id == "CGENERAL"
    assert thread.session.creator == team.engineer
    assert thread.session.prompts.get().text == "add a changelog"
    status = fake_slack.of("chat.postMessage")[1]["body"]
    assert status["thread_ts"] == thread.thread_ts  # the thread of the bot's own message
    assert "*Repository*\nwidgets" in json.dumps(status["blocks"]).replace("\\n", "\n")


def test_an_empty_slash_command_gets_the_usage(client, fake_slack):
    body = b"command=%2Finspect&text=&channel_id=C1&user_id=U1"
    response = client.post(
        "/slack/commands/", body, content_type="application/x-www-form-urlencoded", **signed(body)
    )
    assert response.json()["text"].startswith("Usage: `/inspect repo:NAME")
    assert fake_slack.calls == []
