"""A local repository: a turn's change becomes a branch and a pull request reviewed here, and the
merge goes through the approval gate, executed once, into the repository itself."""

import pytest
from django.core.exceptions import PermissionDenied

from approvals import gate
from approvals.models import ApprovalRequest, AuditEntry
from sessions.models import Event, PullRequest, Session

pytestmark = pytest.mark.django_db

AGENT = 'printf "hello from $INSPECT_AUTHOR\\n" > greeting.txt'


def test_a_turn_opens_one_pull_request_and_later_turns_push_to_its_branch(
    publishing, create_session, inspect_cli
):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert summary["state"] == "pr_open"
    pr = PullRequest.objects.get(session_id=summary["id"])
    assert pr.branch == f"inspect/{pr.session_id}-add-a-greeting" and pr.base == "main"
    assert (pr.additions, pr.changed_files, pr.host) == (1, 1, "local")
    upstream = publishing.upstream
    assert upstream.git("show", f"{pr.branch}:greeting.txt") == "hello from engineer\n"
    assert "Co-authored-by: Inspect agent" in upstream.git("log", "-1", "--format=%B", pr.branch)
    assert upstream.git("log", "-1", "--format=%an", pr.branch).strip() == "engineer"
    assert "## Task\n\nadd a greeting" in pr.body and "✅ `echo checked`" in pr.body
    first_head = pr.head_sha

    code, out, err = inspect_cli("session", "prompt", str(pr.session_id), "more, please",
                                 "--inline")  # fmt: skip
    assert code == 0, err
    assert PullRequest.objects.filter(session_id=pr.session_id).count() == 1
    pr.refresh_from_db()
    assert pr.head_sha != first_head
    assert upstream.git("rev-parse", pr.branch).strip() == pr.head_sha
    assert "## Task\n\nadd a greeting\n\nThen:\n\n- more, please\n" in pr.body
    opened = [e.payload["opened"] for e in Event.objects.filter(session_id=pr.session_id,
              kind="pull_request_published")]  # fmt: skip
    assert opened == [True, False]
    assert AuditEntry.objects.filter(action="pull_request.open").count() == 1


def test_merging_waits_for_a_second_person_and_runs_once(publishing, create_session, team, client):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    from sessions.pulls import request_merge

    approval = request_merge(pr, team.engineer)
    assert approval.state == ApprovalRequest.State.PENDING
    assert request_merge(pr, team.engineer).pk == approval.pk  # asking twice: one request
    with pytest.raises(PermissionDenied):  # the prompt's author may not approve their change
        gate.approval_decide(approval=approval, user=team.engineer, approve=True)
    assert "greeting.txt" not in publishing.upstream.git("ls-tree", "--name-only", "main")

    gate.approval_decide(approval=approval, user=team.reviewer, approve=True, reason="looks good")
    assert gate.execute_approval(approval.pk) == "executed"
    assert gate.execute_approval(approval.pk) == "nothing to execute"  # a redelivery
    approval.refresh_from_db()
    assert approval.state == ApprovalRequest.State.EXECUTED
    main_log = publishing.upstream.git("log", "--format=%s %an", "main")
    assert main_log.count(f"Merge {pr.branch}") == 1 and "reviewer" in main_log
    assert publishing.upstream.git("show", "main:greeting.txt") == "hello from engineer\n"
    pr.refresh_from_db()
    assert pr.state == "merged" and pr.merged_by == team.reviewer and pr.merge_sha
    assert Session.objects.get(pk=pr.session_id).state == "merged"
    assert AuditEntry.objects.filter(action__startswith="approval").exists()

    # Asking again after the merge: refused, nothing changes.
    from approvals.gate import ApprovalError

    with pytest.raises(ApprovalError):
        request_merge(pr, team.engineer)

    # The Metrics page counts it: one session, one PR, merged, reviewed once (the approval).
    client.force_login(team.manager)
    page = client.get("/metrics/", {"repository": "widgets", "period": "day"}).content.decode()
    assert "1 → 1 → 1" in page and "100.0%" in page
    assert pr.review_rounds == 1 and pr.first_review_at is not None


def test_a_merge_approved_after_the_pr_was_merged_elsewhere_fails_with_the_reason(
    publishing, create_session, team
):
    from sessions.pulls import mark_merged, request_merge

    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    approval = request_merge(pr, team.engineer)
    gate.approval_decide(approval=approval, user=team.reviewer, approve=True)
    mark_merged(pr, merge_sha="f" * 40)  # e.g. merged on the code host meanwhile
    gate.execute_approval(approval.pk)
    approval.refresh_from_db()
    assert approval.state == ApprovalRequest.State.FAILED
    assert "already merged" in approval.result["error"]
    assert "greeting.txt" not in publishing.upstream.git("ls-tree", "--name-only", "main")


def test_a_branch_merged_by_hand_in_the_repository_is_recorded_when_the_merge_runs(
    publishing, create_session, team
):
    from sessions.pulls import request_merge

    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    approval = request_merge(pr, team.engineer)
    publishing.upstream.git("merge", "--quiet", "--no-ff", "-m", "by hand", pr.branch)
    gate.approval_decide(approval=approval, user=team.reviewer, approve=True)
    gate.execute_approval(approval.pk)
    approval.refresh_from_db()
    assert approval.state == ApprovalRequest.State.FAILED
    assert approval.result["error"] == f"{pr.branch} is already merged: it is part of main"
    pr.refresh_from_db()
    assert pr.state == "merged" and pr.merged_by is None
    assert Session.objects.get(pk=pr.session_id).state == "merged"
    assert publishing.upstream.git("log", "-1", "--format=%s", "main").strip() == "by hand"


def test_the_session_page_shows_the_pull_request_and_a_merge_button(
    publishing, create_session, team, client
):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    session = Session.objects.get(pk=summary["id"])
    client.force_login(team.engineer)
    page = client.get(session.get_absolute_url()).content.decode()
    assert "Request merge" in page and session.pull_request.branch in page
    assert f"pull request opened: <code>{session.pull_request.branch}</code>" in page
    response = client.post(f"/sessions/{session.pk}/merge/", follow=True)
    assert "Merge requested" in response.content.decode()
    assert ApprovalRequest.objects.filter(session=session, action="merge_pr").count() == 1
    client.force_login(team.outsider)
    assert client.post(f"/sessions/{session.pk}/merge/").status_code == 404


def test_a_branch_taken_on_the_remote_is_left_alone_and_another_name_used(
    publishing, create_session, monkeypatch
):
    from sessions import pulls

    monkeypatch.setattr(pulls, "branch_name", lambda session: "inspect/taken")
    upstream = publishing.upstream
    foreign = upstream.git("commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "not ours").strip()
    upstream.git("branch", "inspect/taken", foreign)  # someone else's work under that name
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert summary["state"] == "pr_open"
    pr = PullRequest.objects.get(session_id=summary["id"])
    assert pr.branch == "inspect/taken-2"
    assert upstream.git("rev-parse", "inspect/taken").strip() == foreign
    assert upstream.git("rev-parse", "inspect/taken-2").strip() == pr.head_sha
    notes = Event.objects.filter(session_id=pr.session_id, kind="publish_note")
    assert notes.get().payload["message"] == (
        f"inspect/taken already exists on the remote with commits this session did not make "
        f"(at {foreign[:12]}); nothing was overwritten; pushing to inspect/taken-2 instead"
    )


def test_a_change_made_after_the_pr_was_closed_elsewhere_is_reported_not_lost(
    publishing, create_session, team
):
    from sessions.pulls import mark_closed, publish_turn
    from sessions.turn_changes import commit_author
    from sessions.workspace_git import commit_turn
    from snapshots.backends import sandbox_backend

    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    session = Session.objects.get(pk=summary["id"])
    pr = session.pull_request
    # Closed on the code host while a turn was still working in the sandbox.
    mark_closed(pr)
    sandbox = sandbox_backend().attach(session.sandbox_id)
    assert publish_turn(session, sandbox).state == "closed"
    assert not Event.objects.filter(session=session, kind="error").exists()  # nothing new yet
    sandbox.write_file("/workspace/more.txt", b"more\n")
    commit_turn(sandbox, author=commit_author(team.engineer), message="more")

    assert publish_turn(session, sandbox).state == "closed"
    error = Event.objects.get(session=session, kind="error").payload
    assert error["phase"] == "publish"
    assert error["message"] == (
        f"not pushed: the pull request for {pr.branch} was closed without merging, so this "
        "change is only in the session; reopen it and send another prompt to push it"
    )
    assert publishing.upstream.git("rev-parse", pr.branch).strip() == pr.head_sha  # untouched
