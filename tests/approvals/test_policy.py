"""Per-repository approval policy: defaults, strict parsing at save, audited changes."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from approvals import gate
from approvals.models import ApprovalPolicy, AuditEntry
from approvals.policy import policy_for
from approvals.policy_change import policy_set
from approvals.policy_rules import PolicyError, parse_policy


def test_the_default_gates_merges_protected_pushes_egress_and_branch_deletion(team):
    policy = policy_for(team.repository)
    for action in ("merge_pr", "push_protected", "widen_egress", "delete_branch"):
        assert policy.requires(action)
    assert not policy.requires("open_pr")
    assert policy.is_protected("main") and not policy.is_protected("inspect/1")


def test_an_admin_sets_a_policy_and_the_change_is_audited(team):
    text = 'require = ["merge_pr"]\nirreversible_commands = ["deploy*"]\nwait_seconds = 30\n'
    # Dropping push_protected, widen_egress and delete_branch loosens it: applied once another
    # reviewer approves (tests/security/test_policy_loosening_needs_approval.py).
    change = policy_set(repository=team.repository, text=text, by=team.admin)
    gate.approval_decide(approval=change.approval, user=team.reviewer, approve=True)
    gate.execute_approval(change.approval.pk)
    policy = policy_for(team.repository)
    assert policy.requires("merge_pr") and not policy.requires("delete_branch")
    assert policy.is_irreversible("deploy  --prod") and not policy.is_irreversible("pytest -q")
    entry = AuditEntry.objects.get(action="policy.change")
    assert entry.actor_name == "admin" and entry.repository_name == "widgets"
    assert entry.data["after"] == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("require = [", "does not parse"),
        ("requires = []", "unknown key 'requires'"),
        ('require = ["Merge PR"]', "is not a name like merge_pr"),
        ("wait_seconds = 0", "'wait_seconds' must be a whole number"),
        ("irreversible_commands = 'deploy'", "'irreversible_commands' must be a list"),
    ],
)
def test_a_policy_that_does_not_parse_is_refused_at_save_time(team, text, message):
    with pytest.raises(PolicyError, match=message):
        policy_set(repository=team.repository, text=text, by=team.admin)
    with pytest.raises(PolicyError):
        ApprovalPolicy(repository=team.repository, text=text).save()
    assert not ApprovalPolicy.objects.exists()
    assert not AuditEntry.objects.filter(action="policy.change").exists()


def test_only_repository_admins_change_the_policy(team):
    for user in (team.engineer, team.reviewer, team.outsider):
        with pytest.raises(PermissionDenied):
            policy_set(repository=team.repository, text='require = ["merge_pr"]', by=user)
    assert policy_for(team.repository) == parse_policy("")
