"""A repository's approval policy as stored (`ApprovalPolicy`; absent: the default): reading
it, asking it, and changing it (audited). Its rules and TOML are approvals.policy_rules."""

from __future__ import annotations

from django.db import transaction

from accounts import access, roles
from approvals import audit
from approvals.models import ApprovalPolicy
from approvals.policy_rules import DEFAULT_POLICY, Policy, parse_policy


def policy_for(repository) -> Policy:
    """The repository's policy (its stored one, else the default)."""
    row = ApprovalPolicy.objects.filter(repository=repository).first()
    return parse_policy(row.text) if row is not None else DEFAULT_POLICY


def approval_required(repository, action: str) -> bool:
    """Whether `action` on `repository` must pass the approval gate."""
    return policy_for(repository).requires(action)


def policy_set(*, repository, text: str, by) -> Policy:
    """Replace the repository's policy (MANAGE_REPOSITORY needed); PolicyError if it does not
    parse, PermissionDenied without the right. The change is audited with old and new text."""
    access.require_repo_permission(by, repository, roles.MANAGE_REPOSITORY)
    policy = parse_policy(text)
    with transaction.atomic():
        row = ApprovalPolicy.objects.select_for_update().filter(repository=repository).first()
        before = row.text if row is not None else ""
        ApprovalPolicy.objects.update_or_create(
            repository=repository, defaults={"text": text, "updated_by": by}
        )
        audit.record(
            "policy.change",
            actor=by,
            repository=repository,
            object_type="repository",
            object_id=repository.pk,
            data={"before": before, "after": text},
        )
    return policy
