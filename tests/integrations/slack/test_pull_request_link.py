"""When the session's pull request opens, the thread's status shows it and the link is posted in
the thread once, however many status updates run."""

import pytest

from integrations.models import SlackThread
from integrations.slack.progress import status_update
from sessions.events import append_event
from sessions.models import Session

pytestmark = pytest.mark.django_db

PR = "https://github.example.test/acme/widgets/pull/7"


def published(pr_url: str, host: str = "github") -> dict:
    """The payload of a `pull_request_published` event that links `pr_url`."""
    return {"pull_request": 1, "pr_url": pr_url, "branch": "inspect/t", "head": "abc",
            "opened": True, "host": host, "opened_as_app": False}  # fmt: skip


def test_the_pr_link_reaches_the_thread_once(team, fake_slack):
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    SlackThread.objects.create(
        session=session, channel_id="C1", thread_ts="100.1", status_ts="100.2"
    )
    status_update(session.pk)
    assert [c["method"] for c in fake_slack.calls] == ["chat.update"]
    assert PR not in str(fake_slack.calls)

    append_event(session.pk, "pull_request_published", published(PR))
    status_update(session.pk)
    status_update(session.pk)  # a second update (another state change) posts nothing new
    updated = fake_slack.of("chat.update")[-1]["body"]
    assert updated["ts"] == "100.2" and f"Pull request: <{PR}>" in str(updated["blocks"])
    posted = fake_slack.of("chat.postMessage")
    assert len(posted) == 1
    assert posted[0]["body"]["thread_ts"] == "100.1"
    assert posted[0]["body"]["text"] == f"Pull request opened: {PR}"


def test_a_pull_request_reviewed_here_is_linked_absolutely(team, fake_slack):
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    SlackThread.objects.create(session=session, channel_id="C1", thread_ts="9.1", status_ts="9.2")
    append_event(
        session.pk,
        "pull_request_published",
        published(f"/sessions/{session.pk}/#pull-request", host="local"),
    )
    status_update(session.pk)
    link = f"https://inspect.example.test/sessions/{session.pk}/#pull-request"
    assert fake_slack.of("chat.postMessage")[0]["body"]["text"] == f"Pull request opened: {link}"
