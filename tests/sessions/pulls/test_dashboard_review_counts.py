"""On a local repository the dashboard is where the pull request is reviewed: each merge
decision is a review the metrics count (time to first review, review rounds)."""

import pytest

from approvals import gate
from sessions.models import Event, PullRequest, ReviewEvent
from sessions.pulls import request_merge

pytestmark = pytest.mark.django_db

AGENT = 'printf "hello $INSPECT_PROMPT\\n" > greeting.txt'


@pytest.fixture
def pull_request(publishing, create_session):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    return PullRequest.objects.get(session_id=summary["id"])


def test_a_rejected_merge_then_an_approved_one_are_two_review_rounds(
    pull_request, team, inspect_cli
):
    asked = request_merge(pull_request, team.engineer)
    gate.approval_decide(approval=asked, user=team.reviewer, approve=False, reason="typo")
    pull_request.refresh_from_db()
    assert pull_request.first_review_at is not None and pull_request.review_rounds == 1
    first_review = pull_request.first_review_at

    code, out, err = inspect_cli("session", "prompt", str(pull_request.session_id), "fixed",
                                 "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pull_request.refresh_from_db()
    again = request_merge(pull_request, team.engineer)
    gate.approval_decide(approval=again, user=team.reviewer, approve=True)
    reviews = ReviewEvent.objects.filter(pull_request=pull_request).order_by("created_at")
    assert [(r.kind, r.reviewer) for r in reviews] == [
        ("changes_requested", team.reviewer),
        ("approved", team.reviewer),
    ]
    pull_request.refresh_from_db()
    assert pull_request.first_review_at == first_review
    assert pull_request.review_rounds == 2  # two head commits were reviewed
    said = Event.objects.filter(session_id=pull_request.session_id, kind="review")
    assert [e.payload["message"] for e in said.order_by("seq")] == [
        "reviewer reviewed in the dashboard: changes requested",
        "reviewer reviewed in the dashboard: approved",
    ]


def test_other_decisions_are_not_reviews(pull_request, team):
    from approvals.policy_rules import IRREVERSIBLE_COMMAND

    asked = gate.request_approval(
        action=IRREVERSIBLE_COMMAND, payload={"command": "deploy"}, session=pull_request.session,
        requested_by=None, prompt_author=team.engineer, idempotency_key="deploy-1",
    )  # fmt: skip
    gate.approval_decide(approval=asked, user=team.reviewer, approve=True)
    assert not ReviewEvent.objects.exists()
