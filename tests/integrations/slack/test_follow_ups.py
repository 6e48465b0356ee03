"""A reply in a session's thread queues a follow-up prompt as its author, and says whether it
runs now or after the turn under way."""

import pytest

from integrations.models import SlackThread, SlackUser
from integrations.slack.conversation import handle_message
from sessions.models import Prompt, Session

pytestmark = pytest.mark.django_db


def test_thread_replies_queue_prompts_and_say_when_they_run(team, fake_slack):
    SlackUser.objects.create(slack_user_id="UENG", user=team.engineer)
    SlackUser.objects.create(slack_user_id="UREV", user=team.reviewer)
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="t", state="idle"
    )
    Prompt.objects.create(session=session, author=team.engineer, text="first", order=1,
                          state=Prompt.State.DONE)  # fmt: skip
    SlackThread.objects.create(session=session, channel_id="C1", thread_ts="5.1", status_ts="5.2")

    handle_message(channel="C1", user="UENG", text="now the docs", ts="5.3", thread_ts="5.1")
    said = fake_slack.of("chat.postMessage")[-1]["body"]
    assert said["thread_ts"] == "5.1" and said["text"] == "Queued as prompt 2; it runs now."
    handle_message(channel="C1", user="UENG", text="and a test", ts="5.4", thread_ts="5.1")
    said = fake_slack.of("chat.postMessage")[-1]["body"]["text"]
    assert said == "Queued as prompt 3; it runs after the current turn."
    assert [p.text for p in session.prompts.order_by("order")] == [
        "first", "now the docs", "and a test"
    ]  # fmt: skip

    handle_message(channel="C1", user="UREV", text="me too", ts="5.5", thread_ts="5.1")
    said = fake_slack.of("chat.postMessage")[-1]["body"]["text"]
    assert said.startswith("Not queued:") and "does not allow this" in said
    assert session.prompts.count() == 3
