"""Review comments on GitHub come back to the agent: a submitted review with line comments
becomes one follow-up prompt from the reviewer; after the turn, the agent's answer is posted
under each comment and each shows on the session page as resolved by the turn's commit."""

import pytest
from django.test import Client

from integrations.github.models import WebhookDelivery
from sessions.models import Event, Prompt, PullRequest, ReviewComment, ReviewEvent
from sessions.runner import drive_session
from tests.integrations.github.conftest import CODERTOCAT_ID, REPO, SECRET

# Committed: a first turn fetches the mirror on a thread of its own (its own connection).
pytestmark = pytest.mark.django_db(transaction=True)

# The first turn writes three lines; a follow-up rewrites the first two and says so.
AGENT = (
    "if [ -f greeting.txt ]; then printf 'hi\\nthere\\nfriend\\n' > greeting.txt; "
    'echo \'{"kind": "message", "data": {"text": "Said hi, and there instead of world."}}\'; '
    "else printf 'hello\\nworld\\nfriend\\n' > greeting.txt; fi"
)


@pytest.fixture
def hooked(github, client, settings, team):
    """The stand-in delivers its webhooks here, signed with the secret set up here; Codertocat
    is the admin (a member who may prompt) signed in with GitHub."""
    from allauth.socialaccount.models import SocialAccount

    settings.GITHUB_WEBHOOK_SECRET = SECRET
    github.webhook_secret = SECRET
    answers = []

    def sink(event, body, headers):
        answer = client.post(
            "/webhooks/github/", data=body, content_type="application/json", headers=headers
        )
        answers.append((event, answer.status_code, answer.json()["outcome"]))
        return answer

    github.webhook_sink = sink
    github.answers = answers
    SocialAccount.objects.create(user=team.admin, provider="github", uid=str(CODERTOCAT_ID))
    return github


def start(create_session) -> PullRequest:
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert summary["state"] == "pr_open"
    return PullRequest.objects.get(session_id=summary["id"])


def test_a_review_with_two_line_comments_becomes_one_prompt_and_two_replies(
    hooked, create_session, team, client
):
    pr = start(create_session)
    first_head = pr.head_sha
    review = hooked.submit_review(REPO, 1, state="CHANGES_REQUESTED", body="Two words.",
                                  comments=[{"path": "greeting.txt", "line": 1, "body": "Say hi."},
                                            {"path": "greeting.txt", "line": 2,
                                             "body": "'there' reads better."}])  # fmt: skip
    assert [a[:2] for a in hooked.answers] == [
        ("pull_request_review_comment", 200),
        ("pull_request_review_comment", 200),
        ("pull_request_review", 200),
    ]
    assert hooked.answers[-1][2].endswith("follow-up prompt 2 queued with 2 comments")
    [prompt] = Prompt.objects.filter(session=pr.session_id, order__gt=1)
    assert prompt.author == team.admin and prompt.state == "queued"
    assert "@Codertocat requested changes in a review on octo-org/widgets#1." in prompt.text
    assert "Two words." in prompt.text
    assert "1. `greeting.txt` line 1:" in prompt.text and "+hello" in prompt.text
    assert "2. `greeting.txt` line 2:" in prompt.text and "+world" in prompt.text
    assert "Say hi." in prompt.text and "'there' reads better." in prompt.text
    assert ReviewEvent.objects.get(pull_request=pr).kind == "changes_requested"  # metrics too

    # The turn that answers it: the PR is updated and each comment gets the answer.
    drive_session(pr.session_id)
    pr.refresh_from_db()
    prompt.refresh_from_db()
    assert pr.head_sha != first_head and prompt.state == "done"
    for comment in [c for c in hooked.review_comments.values() if not c.get("in_reply_to_id")]:
        [reply] = hooked.replies_to(comment["id"])
        assert reply["user"]["type"] == "Bot"
        assert reply["body"].startswith("Said hi, and there instead of world.")
        assert f"Addressed in {pr.head_sha[:12]}." in reply["body"]
    comments = ReviewComment.objects.filter(session=pr.session_id).order_by("line")
    assert [(c.line, c.state, c.resolved_commit) for c in comments] == [
        (1, "answered", pr.head_sha),
        (2, "answered", pr.head_sha),
    ]
    answered = Event.objects.get(session=pr.session_id, kind="review_answered")
    assert answered.payload["comments"] == 2 and answered.payload["commit"] == pr.head_sha

    client.force_login(team.engineer)
    page = client.get(f"/sessions/{pr.session_id}/").content.decode()
    assert page.count(f"Resolved by <code>{pr.head_sha[:12]}</code>") == 2
    assert "Say hi." in page

    # GitHub redelivers the review (or someone replays it): nothing new is queued.
    again = hooked.redeliver("pull_request_review")
    assert again.status_code == 200 and "already queued its comments" in again.json()["outcome"]
    assert Prompt.objects.filter(session=pr.session_id).count() == 2
    assert WebhookDelivery.objects.filter(event="pull_request_review").count() == 2
    assert review["id"] and hooked.problems == []


def test_a_comment_whose_line_a_later_push_removed_is_put_on_its_file(hooked, create_session):
    pr = start(create_session)
    deliveries = []
    hooked.webhook_sink = lambda event, body, headers: deliveries.append((body, headers))
    hooked.submit_review(REPO, 1, comments=[
        {"path": "greeting.txt", "line": 3, "body": "Friends, plural."},
    ])  # fmt: skip
    # Someone pushes to the branch on GitHub before the review's webhook arrives.
    hooked.push_to_branch(REPO, pr.branch, {"greeting.txt": "hello\nworld\n"})
    body, headers = deliveries[-1]
    answer = Client().post(
        "/webhooks/github/", data=body, content_type="application/json", headers=headers
    )
    assert answer.status_code == 200, answer.json()
    [comment] = ReviewComment.objects.filter(session=pr.session_id)
    assert comment.line is None and comment.path == "greeting.txt"
    assert comment.note.startswith("line 3 it was on no longer exists after a later push")
    prompt = Prompt.objects.get(session=pr.session_id, order=2)
    assert "1. `greeting.txt` (line 3 it was on no longer exists" in prompt.text
    assert "+friend" in prompt.text and "Friends, plural." in prompt.text
    assert hooked.problems == []


def test_when_github_cannot_be_asked_for_the_comments_nothing_is_recorded(hooked, create_session):
    pr = start(create_session)
    hooked.expire_tokens()  # GitHub refuses the App's tokens, fresh ones too
    hooked.mint_invalid = True
    hooked.submit_review(REPO, 1, comments=[{"path": "greeting.txt", "line": 1, "body": "Hi?"}])
    event, status, outcome = hooked.answers[-1]
    assert (event, status) == ("pull_request_review", 502)
    assert "could not be read" in outcome and "redeliver" in outcome
    assert not ReviewEvent.objects.filter(pull_request=pr).exists()
    assert Prompt.objects.filter(session=pr.session_id).count() == 1

    hooked.mint_invalid = False  # GitHub is back: the redelivery applies it
    assert hooked.redeliver("pull_request_review").status_code == 200
    assert Prompt.objects.filter(session=pr.session_id).count() == 2
