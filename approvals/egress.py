"""Changing a repository's recipe: a change that widens sandbox egress waits for approval.

The effective egress today is the dashboard override's, else that of the newest ready snapshot's
recipe (the repository's own file), else `none`. Wider means: none < allowlist < open, or an
allowlist gaining a domain it did not cover. Narrowing or keeping egress applies at once; either
way the change is audited.
"""

from __future__ import annotations

from django.db import transaction

from approvals import audit, gate
from approvals.models import ApprovalRequest
from approvals.policy import WIDEN_EGRESS, approval_required
from snapshots.recipe import Recipe, parse_recipe
from snapshots.sandbox import NetworkPolicy

_RANK = {"none": 0, "allowlist": 1, "open": 2}


def widens(before: NetworkPolicy, after: NetworkPolicy) -> bool:
    """Whether `after` lets a sandbox reach something `before` did not."""
    if _RANK[after.mode] != _RANK[before.mode]:
        return _RANK[after.mode] > _RANK[before.mode]
    if after.mode != "allowlist":
        return False
    return any(not before.allows(domain.removeprefix("*.")) for domain in after.domains)


def current_recipe(repository) -> Recipe:
    from snapshots.models import Snapshot
    from snapshots.restore import recipe_of

    if repository.recipe_override.strip():
        return parse_recipe(repository.recipe_override, where="the recipe set in the dashboard")
    snapshot = (
        Snapshot.objects.filter(repository=repository, state=Snapshot.State.READY)
        .order_by("-created_at")
        .first()
    )
    return recipe_of(snapshot) if snapshot is not None else Recipe()


def _describe(policy: NetworkPolicy) -> str:
    return policy.mode + (f" ({', '.join(policy.domains)})" if policy.domains else "")


def recipe_override_set(*, repository, text: str, by) -> ApprovalRequest | None:
    """Set the repository's dashboard recipe (MANAGE_REPOSITORY needed). RecipeError if it does
    not parse. Returns None when applied, or the pending request when it widens egress."""
    from inspect_web import access, roles

    access.require_repo_permission(by, repository, roles.MANAGE_REPOSITORY)
    new = parse_recipe(text, where="the recipe set in the dashboard") if text.strip() else None
    before = current_recipe(repository).egress
    after = new.egress if new is not None else NetworkPolicy()
    if approval_required(repository, WIDEN_EGRESS) and widens(before, after):
        return gate.request_approval(
            action=WIDEN_EGRESS,
            repository=repository,
            requested_by=by,
            payload={
                "summary": f"egress {_describe(before)} → {_describe(after)}",
                "recipe_override": text,
                "previous_override": repository.recipe_override,
                "before": {"mode": before.mode, "domains": list(before.domains)},
                "after": {"mode": after.mode, "domains": list(after.domains)},
            },
        )
    _apply(repository, text, actor=by, before=before, after=after)
    return None


def _apply(
    repository, text: str, *, actor, before: NetworkPolicy, after: NetworkPolicy, approval=None
) -> None:
    from snapshots.models import Repository

    with transaction.atomic():
        Repository.objects.filter(pk=repository.pk).update(recipe_override=text)
        repository.recipe_override = text
        audit.record(
            "repository.recipe",
            actor=actor,
            repository=repository,
            object_type="repository",
            object_id=repository.pk,
            data={
                "egress_before": _describe(before),
                "egress_after": _describe(after),
                "approval": approval.pk if approval is not None else None,
            },
        )


def execute_widen_egress(approval: ApprovalRequest) -> dict:
    """The executor of an approved egress widening: applies the recipe it was asked for, unless
    the recipe changed since (then the approval no longer applies)."""
    repository = approval.repository
    repository.refresh_from_db()
    payload = approval.payload
    if repository.recipe_override == payload["recipe_override"]:
        raise gate.ActionNoLongerApplies("the recipe already is the one this request asked for")
    if repository.recipe_override != payload["previous_override"]:
        raise gate.ActionNoLongerApplies(
            "the repository's recipe changed after this request was made; ask again"
        )
    before = NetworkPolicy(payload["before"]["mode"], tuple(payload["before"]["domains"]))
    after = NetworkPolicy(payload["after"]["mode"], tuple(payload["after"]["domains"]))
    # Carried out by the system on the reviewer's approval (the entry names the approval).
    _apply(
        repository,
        payload["recipe_override"],
        actor=None,
        before=before,
        after=after,
        approval=approval,
    )
    return {"egress": _describe(after)}


gate.register_executor(WIDEN_EGRESS, execute_widen_egress)
