"""A recipe `verify` command the policy marks irreversible waits for a reviewer like an agent
command: it runs once approved, and is reported as not run when rejected."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.management import call_command
from django.db import connection

from approvals import gate
from approvals.models import ApprovalRequest
from approvals.policy_change import policy_set
from sessions.models import Event

pytestmark = pytest.mark.django_db(transaction=True)
State = ApprovalRequest.State


@pytest.fixture
def deploying_repo(ready_repo, team):
    ready_repo.upstream.commit(
        {".inspect/environment.toml": 'verify = ["echo checked", "echo deploy to staging"]\n'}
    )
    call_command("inspect", "snapshot", "refresh", "widgets", "--json")
    policy_set(repository=ready_repo, text='irreversible_commands = ["echo deploy*"]',
               by=team.admin)  # fmt: skip
    return ready_repo


def _decide_when_asked(user, approve: bool) -> threading.Thread:
    def decide() -> None:
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                pending = ApprovalRequest.objects.filter(state=State.PENDING).first()
                if pending is not None:
                    gate.approval_decide(approval=pending, user=user, approve=approve,
                                         reason="" if approve else "not today")  # fmt: skip
                    return
                time.sleep(0.1)
        finally:
            connection.close()

    thread = threading.Thread(target=decide)
    thread.start()
    return thread


def _verify_events(session_id: int) -> list[dict]:
    events = Event.objects.filter(session_id=session_id, kind="command").order_by("seq")
    return [e.payload for e in events if e.payload.get("phase") == "verify"]


def test_an_approved_recipe_command_runs_once(deploying_repo, team, create_session):
    decider = _decide_when_asked(team.reviewer, approve=True)
    code, summary, err = create_session("--prompt", "ship it", "--agent-command", "true",
                                        "--inline", "--as", "engineer")  # fmt: skip
    decider.join()
    assert code == 0, err
    verify = _verify_events(summary["id"])
    assert [(v["command"], v["ok"]) for v in verify] == [
        ("echo checked", True),
        ("echo deploy to staging", True),
    ]
    assert verify[1]["output_head"] == "deploy to staging\n"
    approval = ApprovalRequest.objects.get()
    assert approval.payload["command"] == "echo deploy to staging"
    assert approval.state == State.EXECUTED


def test_a_rejected_recipe_command_is_not_run_and_verification_fails(
    deploying_repo, team, create_session
):
    decider = _decide_when_asked(team.reviewer, approve=False)
    code, summary, err = create_session("--prompt", "ship it", "--agent-command", "true",
                                        "--inline", "--as", "engineer")  # fmt: skip
    decider.join()
    verify = _verify_events(summary["id"])
    assert verify[1]["ok"] is False and verify[1]["exit_code"] is None
    assert verify[1]["output_head"] == "not run: a reviewer rejected it: not today"
    assert summary["state"] == "idle"
