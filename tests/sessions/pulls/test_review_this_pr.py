""" "Review this PR" on the session page starts a read-only review session of the PR's head,
for engineers, reviewers and admins of the repository only (POST, CSRF)."""

import pytest

from approvals.models import AuditEntry
from sessions.models import PullRequest, Session

pytestmark = pytest.mark.django_db

AGENT = 'printf "hello\\n" > greeting.txt'


@pytest.fixture
def pr(publishing, create_session):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    return PullRequest.objects.get(session_id=summary["id"])


def test_a_reviewer_starts_a_review_session_of_the_prs_head(pr, client, team):
    client.force_login(team.reviewer)
    page = client.get(f"/sessions/{pr.session_id}/").content.decode()
    assert "Review this PR" in page
    response = client.post(f"/sessions/{pr.session_id}/review-agent/")
    review = Session.objects.get(purpose="review")
    assert response.status_code == 302 and response["Location"] == f"/sessions/{review.pk}/"
    assert review.reviewed_pull_request == pr and review.reviewed_commit == pr.head_sha
    assert review.creator == team.reviewer
    prompt = review.prompts.get().text
    assert prompt.startswith(f"Review pull request {pr.branch} → main")
    assert "+hello" in prompt and "```json" in prompt and '"comments"' in prompt
    assert AuditEntry.objects.filter(action="review_session.start").count() == 1
    page = client.get(f"/sessions/{review.pk}/").content.decode()
    assert "Read-only review" in page and "A review session opens no pull request" in page


def test_it_only_allows_post(pr, client, team):
    client.force_login(team.engineer)
    assert client.get(f"/sessions/{pr.session_id}/review-agent/").status_code == 405


def test_a_manager_may_not_and_an_outsider_sees_nothing(pr, client, team):
    client.force_login(team.manager)
    response = client.post(f"/sessions/{pr.session_id}/review-agent/", follow=True)
    refused = "No review was started: only engineers, reviewers and admins"
    assert refused in response.content.decode()
    client.force_login(team.outsider)
    assert client.post(f"/sessions/{pr.session_id}/review-agent/").status_code == 404
    assert not Session.objects.filter(purpose="review").exists()


def test_a_closed_pull_request_is_not_reviewed(pr, client, team):
    PullRequest.objects.filter(pk=pr.pk).update(state="closed")
    client.force_login(team.engineer)
    response = client.post(f"/sessions/{pr.session_id}/review-agent/", follow=True)
    assert "the pull request is closed: nothing to review" in response.content.decode()
