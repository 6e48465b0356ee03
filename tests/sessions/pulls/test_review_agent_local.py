"""The review agent on a local repository: its review is stored as the PR's review comments,
shown on the reviewed session's page, and never becomes a prompt by itself; bad output still
posts the summary with a note, and a comment off the diff goes on its file."""

import pytest

from sessions.models import Event, Prompt, PullRequest, ReviewComment, ReviewFeedback
from sessions.review_agent import review_post, review_session_start
from sessions.runner import drive_session
from tests.sessions.review_agent_fixtures import agent, review_message

pytestmark = pytest.mark.django_db


def reviewed(create_session, team, message: str | None = None):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command",
                                        agent(message), "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    review = review_session_start(pull_request=pr, user=team.reviewer)
    drive_session(review.pk)
    review.refresh_from_db()
    return pr, review


def test_the_review_appears_on_the_session_page_and_asks_the_agent_nothing(
    publishing, create_session, team, client
):
    pr, review = reviewed(create_session, team)
    assert review.state == "idle"
    feedback = ReviewFeedback.objects.get(session=pr.session)
    assert (feedback.source, feedback.prompt) == ("agent", None)
    assert feedback.body == "Two things to fix before merging."
    comments = list(ReviewComment.objects.filter(session=pr.session).order_by("line"))
    assert [(c.path, c.line, c.state) for c in comments] == [
        ("greeting.txt", 1, "posted"), ("greeting.txt", 3, "posted")
    ]  # fmt: skip
    assert comments[1].quoted.endswith("+helo")
    # Nothing was queued for the work session's agent: it still has its one prompt.
    assert Prompt.objects.filter(session=pr.session).count() == 1
    posted = Event.objects.get(session=pr.session, kind="agent_review_posted")
    assert posted.payload["comments"] == 2 and posted.payload["review_session"] == review.pk
    assert Event.objects.filter(session=review, kind="agent_review_posted").exists()
    client.force_login(team.engineer)
    page = client.get(f"/sessions/{pr.session_id}/").content.decode()
    assert "This line is a typo." in page and "the review agent" in page
    assert "review posted here with 2 line comments" in page

    # The same turn's review is posted once, however often it is asked.
    assert "posted before" in review_post(session=review, prompt=review.prompts.get())
    assert ReviewFeedback.objects.filter(session=pr.session).count() == 1


def test_output_without_a_json_block_posts_the_summary_with_a_note(
    publishing, create_session, team
):
    pr, review = reviewed(create_session, team, "I looked; it is fine.")
    feedback = ReviewFeedback.objects.get(session=pr.session)
    assert feedback.body.startswith("I looked; it is fine.")
    assert "no ```json block" in feedback.body
    assert not ReviewComment.objects.filter(session=pr.session).exists()
    assert not Event.objects.filter(session=review, kind="error").exists()


def test_invalid_json_and_lines_off_the_diff_lose_nothing(publishing, create_session, team):
    pr, review = reviewed(create_session, team, review_message("{not json"))
    assert "is not JSON" in ReviewFeedback.objects.get(session=pr.session).body

    wrong = {"summary": "Look here.", "comments": [
        {"path": "greeting.txt", "line": 40, "body": "Past the end."},
        {"path": "nowhere.py", "line": 1, "body": "No such file."},
        {"path": "greeting.txt", "line": 2, "body": "Fine line."},
    ]}  # fmt: skip
    pr, review = reviewed(create_session, team, review_message(wrong))
    feedback = ReviewFeedback.objects.get(session=pr.session)
    comments = {c.body: c for c in feedback.comments.all()}
    assert comments["Fine line."].line == 2
    assert comments["Past the end."].line is None
    assert "line 40 of greeting.txt is not in the diff" in comments["Past the end."].note
    assert "nowhere.py is not in the change" in comments["No such file."].note
