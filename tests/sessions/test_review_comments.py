"""The dashboard's own review, for a repository with no code host: line comments on the
session's diff, submitted as a review, become one follow-up prompt; the next turn answers each
and the page shows which commit resolved it. Bad input is refused with the reason, in the form
it came from."""

import pytest

from sessions.models import Event, Prompt, PullRequest, ReviewComment, ReviewEvent
from sessions.runner import drive_session
from tests.sessions.pulls.conftest import publishing  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

# First turn: three lines. Later turns: rewrite the first, drop the third, and say so.
AGENT = (
    "if [ -f greeting.txt ]; then printf 'hi\\nworld\\n' > greeting.txt; "
    'echo \'{"kind": "message", "data": {"text": "Now it says hi."}}\'; '
    "else printf 'hello\\nworld\\nfriend\\n' > greeting.txt; fi"
)


@pytest.fixture
def session_id(ready_repo, create_session):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    return summary["id"]


def comment(client, session_id, **form):
    return client.post(f"/sessions/{session_id}/review/comments/", form)


def test_a_local_review_comment_becomes_a_prompt_answered_by_the_next_turn(
    session_id, client, team
):
    client.force_login(team.admin)
    added = comment(client, session_id, path="greeting.txt", line="1", body="Say hi instead.")
    assert added.status_code == 302 and added["Location"].endswith("#review")
    [draft] = ReviewComment.objects.filter(session=session_id)
    assert (draft.state, draft.line, draft.quoted) == ("draft", 1, "+hello")
    assert Prompt.objects.filter(session=session_id).count() == 1  # a draft asks nothing yet

    review = {"body": "One thing.", "changes_requested": "1"}
    submitted = client.post(f"/sessions/{session_id}/review/", review)
    assert submitted.status_code == 302
    prompt = Prompt.objects.get(session=session_id, order=2)
    assert prompt.author == team.admin
    assert prompt.text.startswith("@admin requested changes in a review in the dashboard.")
    assert "1. `greeting.txt` line 1:" in prompt.text and "+hello" in prompt.text
    assert "Say hi instead." in prompt.text and "One thing." in prompt.text

    drive_session(session_id)
    prompt.refresh_from_db()
    draft.refresh_from_db()
    assert prompt.state == "done" and prompt.commit
    assert (draft.state, draft.resolved_commit) == ("answered", prompt.commit)
    assert draft.reply.startswith("Now it says hi.")
    page = client.get(f"/sessions/{session_id}/").content.decode()
    assert f"Resolved by <code>{prompt.commit[:12]}</code>" in page and "Now it says hi." in page
    assert Event.objects.filter(session=session_id, kind="review_answered").count() == 1


def test_bad_comments_are_refused_with_the_reason_and_the_text_kept(session_id, client, team):
    client.force_login(team.engineer)
    for form, reason in [
        ({"path": "nope.txt", "line": "1"}, "nope.txt is not in this session"),
        ({"path": "greeting.txt", "line": "9"}, "line 9 of greeting.txt is not shown"),
        ({"path": "greeting.txt", "line": "one"}, "is not a number"),
        ({"path": "greeting.txt", "line": "0"}, "lines are numbered from 1"),
    ]:
        answer = comment(client, session_id, body="Keep this text, please.", **form)
        assert answer.status_code == 400
        page = answer.content.decode()
        assert reason in page, reason
        assert "Keep this text, please.</textarea>" in page  # nothing typed is lost
    empty = comment(client, session_id, path="greeting.txt", line="1", body="  ")
    assert empty.status_code == 400 and "the comment is empty" in empty.content.decode()
    nothing = client.post(f"/sessions/{session_id}/review/", {"body": ""})
    assert nothing.status_code == 400 and "nothing to submit" in nothing.content.decode()
    assert not ReviewComment.objects.exists()
    assert Prompt.objects.filter(session=session_id).count() == 1


def test_a_draft_whose_line_a_later_turn_removed_goes_on_its_file(
    session_id, client, team, inspect_cli
):
    client.force_login(team.engineer)
    comment(client, session_id, path="greeting.txt", line="3", body="Friends, plural.")
    code, out, err = inspect_cli("session", "prompt", str(session_id), "shorter, please",
                                 "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    client.post(f"/sessions/{session_id}/review/", {})
    [draft] = ReviewComment.objects.filter(session=session_id)
    assert draft.line is None and draft.state == "queued"
    assert draft.note == "line 3 no longer exists after a later change; the comment is on the file"
    prompt = Prompt.objects.get(session=session_id, order=3)
    assert "1. `greeting.txt` (line 3 no longer exists after a later change" in prompt.text
    assert "+friend" in prompt.text  # the code it was on, as it was


@pytest.mark.usefixtures("publishing")
def test_a_local_pull_requests_review_counts_and_its_answer_is_pushed(
    ready_repo, create_session, client, team
):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0 and summary["state"] == "pr_open", err
    pr = PullRequest.objects.get(session_id=summary["id"])
    first_head = pr.head_sha
    client.force_login(team.admin)
    comment(client, pr.session_id, path="greeting.txt", line="1", body="Say hi instead.")
    client.post(f"/sessions/{pr.session_id}/review/", {"changes_requested": "1"})
    review = ReviewEvent.objects.get(pull_request=pr)
    assert (review.kind, review.reviewer) == ("changes_requested", team.admin)
    pr.refresh_from_db()
    assert pr.first_review_at is not None and pr.review_rounds == 1

    drive_session(pr.session_id)
    pr.refresh_from_db()
    assert pr.head_sha != first_head  # the answer was pushed to the pull request's branch
    assert ready_repo.upstream.git("show", f"{pr.branch}:greeting.txt") == "hi\nworld\n"
    [answered] = ReviewComment.objects.filter(session=pr.session_id)
    assert (answered.state, answered.resolved_commit) == ("answered", pr.head_sha)
