"""A mention starts a session; its thread gets a Block Kit status kept up to date with
chat.update; a thread reply queues a follow-up prompt. Real worker, fake Slack."""

import json
import uuid

import pytest

from integrations.models import SlackChannelRoute, SlackThread
from sessions.models import Prompt, Session
from tests.integrations.slack.conftest import BOT_TOKEN, signed

pytestmark = pytest.mark.django_db(transaction=True)


def event(text: str, ts: str, *, thread_ts: str = "", event_id: str, kind: str = "app_mention"):
    inner = {"type": kind, "user": "UENG", "text": text, "ts": ts, "channel": "CWIDGETS"}
    if thread_ts:
        inner["thread_ts"] = thread_ts
    # Event ids are unique in Slack; the de-duplication cache (Redis) outlives a test run.
    body = {"type": "event_callback", "event_id": f"{event_id}-{uuid.uuid4().hex}", "event": inner}
    return json.dumps(body).encode()


def test_a_mention_runs_a_session_and_the_thread_follows_it(
    client, team, ready_repo, fake_slack, slack_worker
):
    SlackChannelRoute.objects.create(channel_id="CWIDGETS", repository=ready_repo)
    team.engineer.email = "eng@example.com"
    team.engineer.save()
    fake_slack.emails["UENG"] = "eng@example.com"

    body = event("<@UBOT> add a changelog", "1700000001.000100", event_id="Ev1")
    response = client.post("/slack/events/", body, content_type="application/json", **signed(body))
    assert response.status_code == 200
    again = client.post("/slack/events/", body, content_type="application/json", **signed(body))
    assert again.status_code == 200  # Slack's retry of the same event: handled once

    thread = fake_slack.wait_for(lambda: SlackThread.objects.filter(status_ts__gt="").first())
    session = thread.session
    assert session.repository == ready_repo and session.creator == team.engineer
    assert Prompt.objects.get(session=session).text == "add a changelog"
    status = fake_slack.of("chat.postMessage")[0]
    assert status["auth"] == f"Bearer {BOT_TOKEN}" and "json" in status["content_type"]
    assert status["body"]["thread_ts"] == "1700000001.000100"
    blocks = json.dumps(status["body"]["blocks"])
    assert "*Repository*\\nwidgets" in blocks
    assert f"https://inspect.example.test/sessions/{session.pk}/" in blocks

    # The status message is updated in place as the session moves, ending idle.
    def idle_update():
        return [u for u in fake_slack.of("chat.update") if "Idle" in json.dumps(u["body"])]

    update = fake_slack.wait_for(idle_update, 90)[-1]["body"]
    assert update["ts"] == thread.status_ts and update["channel"] == "CWIDGETS"
    # Every update edits that one message; how many there are depends on how far the turn got
    # before the status message was posted (a fast turn may show only its end).
    assert {u["body"]["ts"] for u in fake_slack.of("chat.update")} == {thread.status_ts}
    assert len(SlackThread.objects.all()) == 1 and Session.objects.count() == 1

    reply = event("also a README line", "1700000002.000200", thread_ts="1700000001.000100",
                  event_id="Ev2", kind="message")  # fmt: skip
    client.post("/slack/events/", reply, content_type="application/json", **signed(reply))
    queued = fake_slack.wait_for(
        lambda: [
            c
            for c in fake_slack.of("chat.postMessage")
            if "Queued as prompt 2" in c["body"]["text"]
        ]
    )
    assert queued[0]["body"]["thread_ts"] == "1700000001.000100"
    fake_slack.wait_for(
        lambda: Prompt.objects.filter(session=session, order=2, state="done").exists(), 90
    )
    assert Session.objects.count() == 1
