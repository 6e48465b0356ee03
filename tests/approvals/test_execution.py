"""Execution: once, by the worker, through the action's registered executor; results recorded."""

from __future__ import annotations

import time

import pytest

from approvals import gate
from approvals.models import ApprovalRequest, AuditEntry
from snapshots.egress import recipe_override_set

State = ApprovalRequest.State


@pytest.fixture
def counting_executor():
    calls = []

    def merge(approval):
        calls.append(approval.pk)
        if approval.payload.get("already_merged"):
            raise gate.ActionNoLongerApplies("pull request #1 is already merged")
        return {"merged": True, "sha": "abc123"}

    previous = gate.executor_for("merge_pr")
    gate.register_executor("merge_pr", merge)
    yield calls
    if previous is not None:
        gate.register_executor("merge_pr", previous)
    else:
        gate._executors.pop("merge_pr", None)


def test_an_approved_action_runs_once_and_its_result_is_recorded(
    agent_request, team, counting_executor, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        gate.approval_decide(approval=agent_request, user=team.reviewer, approve=True)
    assert callbacks, "the execution is queued for a worker after commit"
    assert gate.execute_approval(agent_request.pk) == State.EXECUTED
    assert gate.execute_approval(agent_request.pk) == "nothing to execute"  # a redelivery
    assert counting_executor == [agent_request.pk]
    done = ApprovalRequest.objects.get(pk=agent_request.pk)
    assert done.result == {"merged": True, "sha": "abc123"} and done.executed_at
    entry = AuditEntry.objects.get(action="approval.execute")
    assert entry.actor_kind == "system" and entry.data["result"]["sha"] == "abc123"


def test_a_rejected_or_pending_request_is_never_executed(agent_request, team, counting_executor):
    assert gate.execute_approval(agent_request.pk) == "nothing to execute"
    gate.approval_decide(approval=agent_request, user=team.reviewer, approve=False)
    assert gate.execute_approval(agent_request.pk) == "nothing to execute"
    assert counting_executor == []


def test_an_action_that_no_longer_applies_ends_failed_with_the_reason(
    team, agent_session, counting_executor
):
    approval = gate.request_approval(
        action="merge_pr",
        payload={"already_merged": True},
        session=agent_session,
        prompt_author=team.engineer,
    )
    gate.approval_decide(approval=approval, user=team.reviewer, approve=True)
    assert gate.execute_approval(approval.pk) == State.FAILED
    failed = ApprovalRequest.objects.get(pk=approval.pk)
    assert failed.result["error"] == "pull request #1 is already merged"
    assert failed.result["no_longer_applies"] is True
    assert AuditEntry.objects.filter(action="approval.fail").count() == 1


def test_an_action_without_an_executor_fails_saying_so(team, agent_session):
    approval = gate.request_approval(
        action="launch_rocket", payload={}, session=agent_session, prompt_author=team.engineer
    )
    gate.approval_decide(approval=approval, user=team.reviewer, approve=True)
    assert gate.execute_approval(approval.pk) == State.FAILED
    assert (
        "no executor for 'launch_rocket'"
        in ApprovalRequest.objects.get(pk=approval.pk).result["error"]
    )


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_executes_an_approved_egress_widening(team, celery_worker_process):
    pending = recipe_override_set(
        repository=team.repository,
        text='egress = { mode = "allowlist", domains = ["allowed.test"] }\n',
        by=team.admin,
    )
    assert pending is not None and pending.state == State.PENDING
    team.repository.refresh_from_db()
    assert team.repository.recipe_override == ""  # not applied before approval
    gate.approval_decide(approval=pending, user=team.reviewer, approve=True)
    deadline = time.monotonic() + 30
    while ApprovalRequest.objects.get(pk=pending.pk).state == State.APPROVED:
        assert time.monotonic() < deadline, "the worker did not execute the approval"
        time.sleep(0.2)
    done = ApprovalRequest.objects.get(pk=pending.pk)
    assert done.state == State.EXECUTED, done.result
    team.repository.refresh_from_db()
    assert "allowed.test" in team.repository.recipe_override
    assert AuditEntry.objects.filter(action="repository.recipe").count() == 1
