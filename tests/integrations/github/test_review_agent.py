"""The review agent on GitHub (the stand-in): "Review this PR" runs a read-only review session
whose answer is posted as one COMMENT review with its line comments on the PR's head, with a
token scoped to pull_requests:write; nothing of the review session is pushed."""

import pytest

from sessions.models import Event, PullRequest, ReviewFeedback, Session
from sessions.runner import drive_session
from tests.integrations.github.conftest import REPO
from tests.integrations.github.github_fake import WANTED_PERMISSIONS, _git
from tests.integrations.github.github_fake_reviews import REVIEWS_PERMISSIONS
from tests.sessions.review_agent_fixtures import agent

# Committed: a first turn fetches the mirror on a thread of its own (its own connection).
pytestmark = pytest.mark.django_db(transaction=True)


def test_review_this_pr_posts_a_review_with_two_line_comments(github, create_session, client, team):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command",
                                        agent(), "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    branches = _git(github.repo(REPO).path, "branch", "--list")
    write_tokens = sum(t.permissions == WANTED_PERMISSIONS for t in github.tokens.values())

    client.force_login(team.reviewer)
    response = client.post(f"/sessions/{pr.session_id}/review-agent/")
    review = Session.objects.get(purpose="review")
    assert response["Location"] == f"/sessions/{review.pk}/"
    drive_session(review.pk)

    [posted] = github.reviews_of(REPO, pr.number)
    assert (posted["state"], posted["user"]["type"]) == ("COMMENTED", "Bot")
    assert posted["commit_id"] == pr.head_sha
    assert posted["body"] == "Two things to fix before merging."
    assert [(c["path"], c["line"], c["side"], c["body"]) for c in posted["comments"]] == [
        ("greeting.txt", 1, "RIGHT", "Say hello to the reader by name."),
        ("greeting.txt", 3, "RIGHT", "This line is a typo."),
    ]
    # Posted with a pull_requests-only token; the review session pushed and opened nothing.
    assert any(t.permissions == REVIEWS_PERMISSIONS for t in github.tokens.values())
    assert sum(t.permissions == WANTED_PERMISSIONS for t in github.tokens.values()) == write_tokens
    assert _git(github.repo(REPO).path, "branch", "--list") == branches
    assert len(github.repo(REPO).pulls) == 1 and not github.problems
    feedback = ReviewFeedback.objects.get(session=pr.session)
    assert feedback.url == posted["html_url"] and feedback.prompt is None
    review.refresh_from_db()
    assert review.state == "idle"


def test_every_pr_on_github_one_review_however_often_opened_is_delivered(
    github, create_session, deliver, team
):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command",
                                        agent(), "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    # Set after the turn, so the webhook is what starts the review here.
    team.repository.review_agent = "every"
    team.repository.save()
    opened = {"action": "opened", "number": pr.number,
              "pull_request": {"number": pr.number, "html_url": pr.url},
              "repository": {"full_name": REPO}, "sender": {"login": "octocat"}}  # fmt: skip
    for _ in range(2):  # the opening, then GitHub's redelivery
        assert deliver("pull_request", opened).status_code in (200, 202)
    [review] = Session.objects.filter(purpose="review")
    drive_session(review.pk)
    assert len(github.reviews_of(REPO, pr.number)) == 1


def test_a_review_github_refuses_is_kept_on_the_page_with_the_reason(
    github, create_session, client, team
):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command",
                                        agent(), "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    client.force_login(team.engineer)
    client.post(f"/sessions/{pr.session_id}/review-agent/")
    review = Session.objects.get(purpose="review")
    github.mint_invalid = True  # the App's new tokens are refused (401 Bad credentials)
    drive_session(review.pk)

    assert github.reviews_of(REPO, pr.number) == []
    feedback = ReviewFeedback.objects.get(session=pr.session)
    assert feedback.refusal.startswith("not posted: GitHub refused the App's installation token")
    assert feedback.comments.count() == 2
    error = Event.objects.get(session=review, kind="error", payload__phase="review")
    assert f"it is kept on the page of session {pr.session_id}" in error.payload["message"]
    review.refresh_from_db()
    assert review.state == "idle"
    page = client.get(f"/sessions/{pr.session_id}/").content.decode()
    assert "This line is a typo." in page
