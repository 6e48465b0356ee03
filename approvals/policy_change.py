"""Changing a repository's approval policy: the one action behind `inspect policy set` and the
settings page. A change that gates as much or more applies at once; one that gates less anywhere
(approvals.policy_rules.loosenings: an action no longer required, a protected branch or an
irreversible-command pattern removed) — even mixed with a tightening — does not: it becomes a
`loosen_policy` request that applies, as a whole, once a reviewer who is not the requester
approves it (four eyes). Otherwise one admin could drop `widen_egress` or `merge_pr` from the
policy and then do it alone. `loosen_policy` is always gated; no policy can drop it."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from accounts import access, roles
from approvals import audit, gate
from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.policy_rules import DEFAULT_POLICY, LOOSEN_POLICY, Policy, loosenings, parse_policy


@dataclass(frozen=True)
class PolicyChange:
    """What `policy_set` did: `applied`, or held back as the pending `approval`."""

    policy: Policy
    applied: bool
    approval: ApprovalRequest | None = None
    loosens: tuple[str, ...] = field(default=())


def _parsed(text: str) -> Policy:
    return parse_policy(text) if text else DEFAULT_POLICY


def _write(*, repository, before: str, text: str, by, data: dict | None = None) -> None:
    ApprovalPolicy.objects.update_or_create(
        repository=repository, defaults={"text": text, "updated_by": by}
    )
    audit.record(
        "policy.change",
        actor=by,
        repository=repository,
        object_type="repository",
        object_id=repository.pk,
        data={"before": before, "after": text, **(data or {})},
    )


def pending_loosenings(repository):
    """The repository's `loosen_policy` requests still waiting for a decision."""
    return ApprovalRequest.objects.filter(
        repository=repository, action=LOOSEN_POLICY, state=ApprovalRequest.State.PENDING
    )


def policy_set(*, repository, text: str, by) -> PolicyChange:
    """Replace the repository's policy (MANAGE_REPOSITORY needed); PolicyError if it does not
    parse, PermissionDenied without the right. A tightening is saved and audited with old and
    new text; a loosening is saved nowhere yet: it files (or finds, when the same change is
    already asked for) a pending `loosen_policy` request and returns it."""
    access.require_repo_permission(by, repository, roles.MANAGE_REPOSITORY)
    policy = parse_policy(text)
    with transaction.atomic():
        row = ApprovalPolicy.objects.select_for_update().filter(repository=repository).first()
        before = row.text if row is not None else ""
        loosens = loosenings(_parsed(before), policy)
        if not loosens:
            _write(repository=repository, before=before, text=text, by=by)
            return PolicyChange(policy=policy, applied=True)
    same = pending_loosenings(repository).filter(
        requested_by=by, payload__before=before, payload__after=text
    )
    approval = same.first() or gate.request_approval(
        action=LOOSEN_POLICY,
        repository=repository,
        requested_by=by,
        payload={"before": before, "after": text, "summary": "; ".join(loosens)},
    )
    return PolicyChange(policy=policy, applied=False, approval=approval, loosens=tuple(loosens))


def execute_loosen_policy(approval: ApprovalRequest) -> dict:
    """Apply an approved loosening: the text asked for, if the policy is still the one it was
    asked against (otherwise the approval would also undo whatever changed since)."""
    payload = approval.payload
    repository = approval.repository
    with transaction.atomic():
        row = ApprovalPolicy.objects.select_for_update().filter(repository=repository).first()
        current = row.text if row is not None else ""
        if current != payload["before"]:
            raise gate.ActionNoLongerApplies(
                "the policy changed after this loosening was asked for; ask again against "
                "the policy now in force"
            )
        _write(
            repository=repository,
            before=current,
            text=payload["after"],
            by=approval.requested_by,
            data={
                "approval": approval.pk,
                "approved_by": getattr(approval.decided_by, "username", None),
            },
        )
    return {"applied": payload["summary"]}


gate.register_executor(LOOSEN_POLICY, execute_loosen_policy)
