"""A local repository has no push webhook: a merged PR that is later reverted on its base branch
is noticed at the next snapshot refresh and counted as an escaped defect."""

import pytest
from django.core.management import call_command

from approvals import gate
from sessions.models import Event, PullRequest
from sessions.pulls import request_merge

pytestmark = pytest.mark.django_db

AGENT = 'printf "hello\\n" > greeting.txt'


@pytest.fixture
def merged(publishing, create_session, team):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    approval = request_merge(pr, team.engineer)
    gate.approval_decide(approval=approval, user=team.reviewer, approve=True)
    assert gate.execute_approval(approval.pk) == "executed"
    pr.refresh_from_db()
    assert pr.state == "merged"
    return pr


def test_a_reverted_merge_is_an_escaped_defect_once(merged, ready_repo):
    upstream = ready_repo.upstream
    upstream.git("reset", "--hard", "main")  # the work tree follows the pushed merge
    upstream.git("-c", "user.name=ops", "-c", "user.email=ops@example.com",
                 "revert", "--no-edit", "-m", "1", merged.merge_sha)  # fmt: skip
    revert = upstream.git("rev-parse", "HEAD").strip()

    call_command("inspect", "snapshot", "refresh", "widgets", "--json")
    merged.refresh_from_db()
    assert merged.revert_sha == revert and merged.reverted_at is not None
    said = Event.objects.filter(session_id=merged.session_id, kind="pull_request_reverted")
    assert [e.payload["message"] for e in said] == [
        f"{merged.branch} was reverted on main by {revert[:12]}"
    ]

    call_command("inspect", "snapshot", "refresh", "widgets", "--json")  # seen once only
    assert (
        Event.objects.filter(session_id=merged.session_id, kind="pull_request_reverted").count()
        == 1
    )


def test_an_unrelated_commit_is_not_a_revert(merged, ready_repo):
    ready_repo.upstream.commit({"NOTES.md": "unrelated\n"})
    call_command("inspect", "snapshot", "refresh", "widgets", "--json")
    merged.refresh_from_db()
    assert merged.reverted_at is None
