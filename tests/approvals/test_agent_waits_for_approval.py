"""An agent command the policy marks irreversible waits for a reviewer, in a real sandbox."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from approvals import gate
from approvals.models import ApprovalRequest
from approvals.policy_change import policy_set
from sessions.agents.approvals import SessionApprovals
from sessions.agents.tools import Toolbox
from sessions.models import Event

State = ApprovalRequest.State
DEPLOY = "sh deploy.sh production"


@pytest.fixture
def sandbox(tmp_path):
    from snapshots.backends import sandbox_backend

    src = tmp_path / "workspace"
    src.mkdir()
    (src / "deploy.sh").write_text('echo "deployed to $1" > deployed.txt\necho done\n')
    backend = sandbox_backend()
    ref = backend.snapshot_from_directory(str(src))
    box = backend.create(snapshot=ref)
    yield box
    box.terminate()
    backend.delete_snapshot(ref)


@pytest.fixture
def gated(team, agent_session):
    policy_set(
        repository=team.repository, text='irreversible_commands = ["sh deploy.sh*"]', by=team.admin
    )
    return agent_session


def _run(toolbox: Toolbox, command: str):
    events, gen = [], toolbox.run("run_command", {"command": command})
    try:
        while True:
            events.append(next(gen))
    except StopIteration as stop:
        return events, stop.value


def _decide_when_asked(user, approve: bool, reason: str = "") -> threading.Thread:
    def decide() -> None:
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                pending = ApprovalRequest.objects.filter(state=State.PENDING).first()
                if pending is not None:
                    gate.approval_decide(
                        approval=pending, user=user, approve=approve, reason=reason
                    )
                    return
                time.sleep(0.05)
        finally:
            connection.close()

    thread = threading.Thread(target=decide)
    thread.start()
    return thread


def _toolbox(sandbox, session, wait_seconds: float = 20) -> Toolbox:
    approvals = SessionApprovals(session, session.prompt, wait_seconds=wait_seconds)
    return Toolbox(sandbox, stopped=threading.Event(), approvals=approvals)


@pytest.mark.django_db(transaction=True)
def test_the_command_runs_after_a_reviewer_approves(sandbox, gated, team):
    reviewer = _decide_when_asked(team.reviewer, approve=True)
    events, outcome = _run(_toolbox(sandbox, gated), DEPLOY)
    reviewer.join()
    assert outcome.ok, outcome.output
    assert sandbox.read_file("deployed.txt") == b"deployed to production\n"
    assert any("waiting for approval" in e.data.get("text", "") for e in events)
    approval = ApprovalRequest.objects.get()
    assert (approval.state, approval.result) == (State.EXECUTED, {"exit_code": 0})
    assert approval.prompt_author == team.engineer and approval.requested_by is None
    states = [e.payload["state"] for e in Event.objects.filter(session=gated, kind="approval")]
    assert states == ["pending", "approved", "executed"]


@pytest.mark.django_db(transaction=True)
def test_a_rejected_command_is_not_run_and_the_agent_is_told_why(sandbox, gated, team):
    reviewer = _decide_when_asked(team.reviewer, approve=False, reason="not on a Friday")
    events, outcome = _run(_toolbox(sandbox, gated), DEPLOY)
    reviewer.join()
    assert not outcome.ok and "rejected it: not on a Friday" in outcome.output
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("deployed.txt")


@pytest.mark.django_db(transaction=True)
def test_an_undecided_command_times_out_and_the_request_expires(sandbox, gated):
    events, outcome = _run(_toolbox(sandbox, gated, wait_seconds=0.5), DEPLOY)
    assert not outcome.ok and "no reviewer decided in time" in outcome.output
    assert ApprovalRequest.objects.get().state == State.EXPIRED


@pytest.mark.django_db(transaction=True)
def test_ordinary_commands_do_not_wait(sandbox, gated):
    events, outcome = _run(_toolbox(sandbox, gated), "echo hello")
    assert outcome.ok and "hello" in outcome.output
    assert not ApprovalRequest.objects.exists()
