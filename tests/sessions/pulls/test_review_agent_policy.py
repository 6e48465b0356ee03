"""The review agent's policy per repository: "every" reviews each local PR once as it opens
(later turns start none); "off" hides the button and refuses a review; "request" waits."""

import pytest

from sessions.models import PullRequest, ReviewFeedback, Session
from sessions.review_agent import review_on_open
from sessions.runner import drive_session
from tests.sessions.review_agent_fixtures import agent

pytestmark = pytest.mark.django_db


def opened(create_session, inspect_cli=None):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", agent(),
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    return PullRequest.objects.get(session_id=summary["id"])


def test_every_pr_gets_one_review_as_it_opens(publishing, create_session, inspect_cli, team):
    publishing.review_agent = "every"
    publishing.save()
    pr = opened(create_session)
    [review] = Session.objects.filter(purpose="review")
    assert review.reviewed_pull_request == pr and review.creator == team.engineer
    drive_session(review.pk)
    assert ReviewFeedback.objects.filter(session=pr.session, source="agent").count() == 1

    # A later turn, and the opening told again: no second review session.
    code, out, err = inspect_cli("session", "prompt", str(pr.session_id), "more", "--inline")
    assert code == 0, err
    assert review_on_open(pr) == "its review session was started before"
    assert Session.objects.filter(purpose="review").count() == 1


def test_on_request_starts_nothing_by_itself(publishing, create_session):
    opened(create_session)
    assert not Session.objects.filter(purpose="review").exists()


def test_off_hides_the_button_and_refuses_a_review(publishing, create_session, client, team):
    publishing.review_agent = "off"
    publishing.save()
    pr = opened(create_session)
    client.force_login(team.engineer)
    assert "Review this PR" not in client.get(f"/sessions/{pr.session_id}/").content.decode()
    response = client.post(f"/sessions/{pr.session_id}/review-agent/", follow=True)
    assert "the review agent is off for widgets" in response.content.decode()
    assert not Session.objects.filter(purpose="review").exists()
