"""A review session is read-only whatever its agent does: an agent that edits files and commits
in one gets nothing pushed, no pull request opened, and no write-scoped token minted."""

import pytest

from integrations.github.codehost import GitHubHost
from integrations.github.models import GitHubLink
from sessions.agents import AgentError
from sessions.children import SessionChildren
from sessions.codehosts import ReadOnlySession, code_host_for, publish_ref
from sessions.models import Event, PullRequest, Session
from sessions.review_agent import review_session_start
from sessions.runner import drive_session
from sessions.terminal import _open_pty
from snapshots import mirror
from snapshots.sandbox import SandboxError

pytestmark = pytest.mark.django_db

# Asked for a review, the agent edits a file and commits it itself, as an attacker would.
AGENT = (
    'case "$INSPECT_PROMPT" in Review*) echo pwned > evil.txt; git add evil.txt; '
    "git -c user.name=x -c user.email=x@x commit -qm evil;; "
    '*) printf "hello\\n" > greeting.txt;; esac'
)


def test_a_review_session_that_edits_and_commits_publishes_nothing(
    publishing, create_session, team
):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    branches_before = publishing.upstream.git("branch", "--list").split()

    review = review_session_start(pull_request=pr, user=team.reviewer)
    drive_session(review.pk)

    review.refresh_from_db()
    assert review.purpose == "review" and review.state == "idle"
    assert review.diff_stats.get("files")  # the agent did change and commit something
    assert not PullRequest.objects.filter(session=review).exists()
    assert publishing.upstream.git("branch", "--list").split() == branches_before
    assert "evil.txt" not in publishing.upstream.git("log", "--all", "--name-only")
    mirror_dir = mirror.mirror_path(publishing.name)
    refs = mirror.git("for-each-ref", "--format=%(refname)", cwd=mirror_dir)
    assert publish_ref(review.pk) not in refs
    note = Event.objects.get(session=review, kind="publish_note")
    assert "read-only review session" in note.payload["message"]


def test_a_review_sessions_code_host_pushes_nothing_and_mints_no_write_token(team, publishing):
    with pytest.raises(ReadOnlySession):
        code_host_for(publishing, read_only=True).push(1, "inspect/anything")
    GitHubLink.objects.create(repository=team.repository, full_name="o/r", installation_id=1)
    host = GitHubHost(team.repository)
    host.read_only = True
    GitHubHost._tokens.clear()
    with pytest.raises(ReadOnlySession):  # refused before GitHub is asked for anything
        host.token()
    with pytest.raises(ReadOnlySession):
        host.token(permissions={"contents": "write"})
    assert not GitHubHost._tokens


def test_the_terminal_of_a_review_session_cannot_be_typed_in(publishing, create_session, team):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    pr = PullRequest.objects.get(session_id=summary["id"])
    review = review_session_start(pull_request=pr, user=team.engineer)
    Session.objects.filter(pk=review.pk).update(sandbox_id="")
    with pytest.raises(SandboxError, match="read-only"):
        _open_pty(review.pk, team.engineer, True, 80, 24)


def test_a_review_session_cannot_start_a_work_session_that_would_publish(
    publishing, create_session, team
):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    pr = PullRequest.objects.get(session_id=summary["id"])
    review = review_session_start(pull_request=pr, user=team.engineer)
    children = SessionChildren(review, user=team.engineer, max_depth=3, max_per_repository=3)
    with pytest.raises(AgentError, match="read-only"):
        children.create_child(publishing.name, "push this for me")
    assert not Session.objects.filter(parent=review).exists()
