"""Prompt to merged change on a local repository, through the dashboard: the engineer asks for
the merge on the session page, a reviewer approves it in Approvals, a Celery worker merges."""

import time

import pytest

from approvals.models import ApprovalRequest
from sessions.models import PullRequest, Session

AGENT = 'printf "hello from $INSPECT_AUTHOR\\n" > greeting.txt'


@pytest.mark.django_db(transaction=True)
def test_a_change_is_merged_after_a_reviewer_approves_it_in_the_dashboard(
    settings, ready_repo, create_session, client, team, celery_worker_process
):
    settings.AUTO_PULL_REQUEST = True
    upstream = ready_repo.upstream
    upstream.git("config", "receive.denyCurrentBranch", "updateInstead")
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    session = Session.objects.get(pk=summary["id"])

    client.force_login(team.engineer)
    asked = client.post(f"/sessions/{session.pk}/merge/", follow=True).content.decode()
    assert "Merge requested" in asked
    approval = ApprovalRequest.objects.get(session=session, action="merge_pr")

    client.force_login(team.reviewer)
    inbox = client.get("/approvals/").content.decode()
    assert f"/approvals/{approval.pk}/" in inbox
    client.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "reason": "ok"})

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        approval.refresh_from_db()
        if approval.state not in (ApprovalRequest.State.APPROVED, ApprovalRequest.State.PENDING):
            break
        time.sleep(0.2)
    assert approval.state == ApprovalRequest.State.EXECUTED, approval.result
    assert upstream.git("show", "main:greeting.txt") == "hello from engineer\n"
    assert upstream.git("log", "-1", "--format=%an", "main").strip() == "reviewer"
    pr = PullRequest.objects.get(session=session)
    assert pr.state == "merged" and pr.merged_by == team.reviewer
    page = client.get(session.get_absolute_url()).content.decode()
    assert "Request merge" not in page and "state-merged" in page
