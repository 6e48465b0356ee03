"""A repository's approval policy as stored (`ApprovalPolicy`; absent: the default): reading it
and asking it. Changing it is approvals.policy_change (a loosening waits for a reviewer); its
rules and TOML are approvals.policy_rules."""

from __future__ import annotations

from approvals.models import ApprovalPolicy
from approvals.policy_rules import DEFAULT_POLICY, Policy, parse_policy


def policy_for(repository) -> Policy:
    """The repository's policy (its stored one, else the default)."""
    row = ApprovalPolicy.objects.filter(repository=repository).first()
    return parse_policy(row.text) if row is not None else DEFAULT_POLICY


def approval_required(repository, action: str) -> bool:
    """Whether `action` on `repository` must pass the approval gate."""
    return policy_for(repository).requires(action)
