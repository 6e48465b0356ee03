"""Edits made by hand in the terminal are pushed to the session's pull request when recorded, so
a merge carries them."""

import pytest

from sessions.models import PullRequest, Session
from sessions.terminal import record_hand_edits
from snapshots.backends import sandbox_backend

pytestmark = pytest.mark.django_db

AGENT = 'printf "hello\\n" > greeting.txt'


def test_recorded_hand_edits_are_pushed_to_the_open_pull_request(publishing, create_session, team):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    turn_head = pr.head_sha
    session = Session.objects.get(pk=summary["id"])
    sandbox = sandbox_backend().attach(session.sandbox_id)
    assert sandbox.run("printf 'hello, by hand\\n' > greeting.txt", cwd="/workspace").ok

    recorded = record_hand_edits(session.pk, [team.engineer])

    assert recorded["files"] == 1
    pr.refresh_from_db()
    assert pr.head_sha == recorded["commit"] != turn_head
    upstream = publishing.upstream
    assert upstream.git("show", f"{pr.branch}:greeting.txt") == "hello, by hand\n"
    assert upstream.git("log", "-1", "--format=%an|%s", pr.branch).startswith(
        "engineer|Edited by hand in the terminal by engineer"
    )
    assert PullRequest.objects.filter(session_id=session.pk).count() == 1
