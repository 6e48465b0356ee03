"""Attack: a repository admin drops a gated action from the approval policy (or a protected
branch, or an irreversible-command pattern), then does that action alone — the four-eyes control
bypassed by one person in two audited steps. A policy change that gates less anywhere is held
back as a `loosen_policy` request (through `policy_set`, the settings page and the CLI alike),
the requester cannot approve it, another reviewer's approval applies it; a tightening applies at
once."""

from __future__ import annotations

import time

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from approvals import gate
from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEntry
from approvals.policy import policy_for
from approvals.policy_change import policy_set
from snapshots.egress import recipe_override_set

pytestmark = pytest.mark.django_db

URL = "/settings/repositories/widgets/controls/policy/"
NO_EGRESS_GATE = 'require = ["merge_pr", "push_protected", "delete_branch"]\n'
NO_MERGE_GATE = 'require = ["push_protected", "widen_egress", "delete_branch"]\n'
EXFIL = 'setup = ["make"]\negress = { mode = "allowlist", domains = ["exfil.example.org"] }\n'


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _drop_through(team, how: str, text: str) -> None:
    if how == "policy_set":
        policy_set(repository=team.repository, text=text, by=team.admin)
    else:
        response = _as(team.admin).post(URL, {"text": text})
        assert response.status_code == 302
        page = _as(team.admin).get("/settings/repositories/widgets/controls/").content.decode()
        assert "waiting for a reviewer" in page and 'id="policy-requests"' in page


@pytest.mark.parametrize("how", ["policy_set", "settings page"])
def test_dropping_widen_egress_then_widening_needs_a_reviewer(team, how):
    _drop_through(team, how, NO_EGRESS_GATE)
    assert policy_for(team.repository).requires("widen_egress"), "loosened without approval"
    assert not ApprovalPolicy.objects.exists()

    # The second step of the attack: widen egress. Still held back as a request.
    pending = recipe_override_set(repository=team.repository, text=EXFIL, by=team.admin)
    team.repository.refresh_from_db()
    assert pending is not None and pending.action == "widen_egress"
    assert team.repository.approved_network.mode == "none", "egress widened without approval"

    loosen = ApprovalRequest.objects.get(action="loosen_policy")
    assert loosen.state == "pending" and loosen.requested_by == team.admin
    assert "widen_egress would no longer wait for approval" in loosen.payload["summary"]
    assert AuditEntry.objects.filter(action="approval.request", object_id=loosen.pk).exists()
    assert not AuditEntry.objects.filter(action="policy.change").exists()


@pytest.mark.parametrize("how", ["policy_set", "settings page"])
def test_dropping_merge_pr_needs_a_reviewer(team, how):
    _drop_through(team, how, NO_MERGE_GATE)
    assert policy_for(team.repository).requires("merge_pr"), "loosened without approval"
    assert ApprovalRequest.objects.get(action="loosen_policy").state == "pending"


@pytest.mark.parametrize(
    "text",
    [
        'protected_branches = ["release/*"]\n',  # main, master no longer protected
        'irreversible_commands = ["deploy*"]\n',  # after a policy with two patterns
        'require = []\nirreversible_commands = ["deploy*", "rm -rf*", "x*"]\n',  # mixed
    ],
)
def test_every_loosening_waits_even_mixed_with_a_tightening(team, text):
    start = 'irreversible_commands = ["deploy*", "rm -rf*"]\n'
    assert policy_set(repository=team.repository, text=start, by=team.admin).applied
    change = policy_set(repository=team.repository, text=text, by=team.admin)
    assert not change.applied and change.approval.action == "loosen_policy"
    assert ApprovalPolicy.objects.get().text == start, "applied in part"


def test_the_requester_cannot_approve_their_own_loosening_another_reviewer_can(team):
    change = policy_set(repository=team.repository, text=NO_EGRESS_GATE, by=team.admin)
    approval = change.approval
    with pytest.raises(PermissionDenied):
        gate.approval_decide(approval=approval, user=team.admin, approve=True)
    _as(team.admin).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve"})
    approval.refresh_from_db()
    assert approval.state == "pending" and approval.decided_by is None
    assert policy_for(team.repository).requires("widen_egress")

    # Asking again does not file a second request.
    again = policy_set(repository=team.repository, text=NO_EGRESS_GATE, by=team.admin)
    assert again.approval.pk == approval.pk

    _as(team.reviewer).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve"})
    assert gate.execute_approval(approval.pk) == "executed"  # the worker's step, run here
    assert not policy_for(team.repository).requires("widen_egress")
    entry = AuditEntry.objects.get(action="policy.change")
    assert entry.actor_name == "admin" and entry.data["after"] == NO_EGRESS_GATE
    assert entry.data["approval"] == approval.pk and entry.data["approved_by"] == "reviewer"


def test_an_approved_loosening_does_not_undo_a_later_change(team):
    change = policy_set(repository=team.repository, text=NO_EGRESS_GATE, by=team.admin)
    tighter = 'irreversible_commands = ["deploy*"]\n'
    assert policy_set(repository=team.repository, text=tighter, by=team.admin).applied
    gate.approval_decide(approval=change.approval, user=team.reviewer, approve=True)
    assert gate.execute_approval(change.approval.pk) == "failed"
    change.approval.refresh_from_db()
    assert "policy changed after this loosening was asked for" in change.approval.result["error"]
    assert ApprovalPolicy.objects.get().text == tighter


def test_loosen_policy_itself_cannot_be_dropped(team):
    assert policy_set(repository=team.repository, text="", by=team.admin).applied  # the default
    change = policy_set(repository=team.repository, text="require = []\n", by=team.admin)
    assert not change.applied
    gate.approval_decide(approval=change.approval, user=team.reviewer, approve=True)
    gate.execute_approval(change.approval.pk)
    assert policy_for(team.repository).require == ()
    assert policy_for(team.repository).requires("loosen_policy")
    # Even with nothing in `require`, adding it back is at once, dropping again waits.
    assert policy_set(repository=team.repository, text=NO_MERGE_GATE, by=team.admin).applied
    assert not policy_set(repository=team.repository, text="require = []\n", by=team.admin).applied


def test_a_tightening_applies_at_once(team):
    text = (
        'require = ["merge_pr", "push_protected", "widen_egress", "delete_branch", "open_pr"]\n'
        'protected_branches = ["main", "master", "release/*"]\n'
    )
    change = policy_set(repository=team.repository, text=text, by=team.admin)
    assert change.applied and change.approval is None
    assert policy_for(team.repository).requires("open_pr")
    assert not ApprovalRequest.objects.exists()
    assert AuditEntry.objects.get(action="policy.change").data["after"] == text


def test_the_cli_says_it_waits_for_a_reviewer_and_links_the_request(team, inspect_cli, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(NO_EGRESS_GATE)
    code, out, err = inspect_cli("policy", "set", "widgets", "--file", str(policy))
    assert code == 0, err
    approval = ApprovalRequest.objects.get(action="loosen_policy")
    assert "waiting for a reviewer other than you" in out
    assert f"/approvals/{approval.pk}/" in out
    assert not ApprovalPolicy.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_applies_an_approved_loosening(team, celery_worker_process):
    response = _as(team.admin).post(URL, {"text": NO_EGRESS_GATE})
    assert response.status_code == 302
    pending = ApprovalRequest.objects.get(action="loosen_policy")
    _as(team.reviewer).post(f"/approvals/{pending.pk}/decide/", {"decision": "approve"})
    deadline = time.monotonic() + 30
    while ApprovalRequest.objects.get(pk=pending.pk).state in ("pending", "approved"):
        assert time.monotonic() < deadline, "the worker did not execute the approval"
        time.sleep(0.2)
    done = ApprovalRequest.objects.get(pk=pending.pk)
    assert done.state == "executed", done.result
    assert not policy_for(team.repository).requires("widen_egress")
    assert AuditEntry.objects.get(action="policy.change").data["approval"] == pending.pk
