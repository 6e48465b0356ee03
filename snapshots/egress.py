"""Sandbox egress: one rule decides what is in force — the last approved policy.

A repository's approved egress (`Repository.approved_egress`) starts as `none`, the baseline.
Wider means: none < allowlist < open, or an allowlist gaining a domain it did not cover.
Whatever asks for a wider egress — a snapshot build reading the repository's own
`.inspect/environment.toml`, or the dashboard's override — keeps the approved policy and files
one `widen_egress` request; its approval records the wider policy and queues a rebuild.
Narrowing applies at once. Every change of the approved policy is audited.

The approved egress is the repository's, so this is snapshots' own action: the approval gate
(approvals.gate) only knows `widen_egress` by name, and `execute_widen_egress` registers itself
as its executor (snapshots.apps imports this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts import access, roles
from approvals import audit, gate
from approvals.models import ApprovalRequest
from approvals.policy import approval_required
from approvals.policy_rules import WIDEN_EGRESS
from snapshots.actions import snapshot_refresh_request
from snapshots.models import Repository
from snapshots.recipe import parse_recipe
from snapshots.sandbox import NetworkPolicy

_RANK = {"none": 0, "allowlist": 1, "open": 2}
State = ApprovalRequest.State


def widens(before: NetworkPolicy, after: NetworkPolicy) -> bool:
    """Whether `after` lets a sandbox reach something `before` did not."""
    if _RANK[after.mode] != _RANK[before.mode]:
        return _RANK[after.mode] > _RANK[before.mode]
    if after.mode != "allowlist":
        return False
    return any(not before.allows(domain.removeprefix("*.")) for domain in after.domains)


def describe(policy: NetworkPolicy) -> str:
    return policy.mode + (f" ({', '.join(policy.domains)})" if policy.domains else "")


def as_json(policy: NetworkPolicy) -> dict:
    return {"mode": policy.mode, "domains": list(policy.domains)}


def _policy(data: dict) -> NetworkPolicy:
    return NetworkPolicy(data.get("mode", "none"), tuple(data.get("domains", ())))


def approved_egress(repository: Repository) -> NetworkPolicy:
    """The repository's last approved egress, read from the database (never a stale object)."""
    data = Repository.objects.filter(pk=repository.pk).values_list("approved_egress", flat=True)
    return _policy(data.first() or {})


def egress_in_force(repository: Repository, asked: NetworkPolicy | None = None) -> NetworkPolicy:
    """The egress a sandbox of `repository` gets: the last approved policy, or what its recipe
    asks (`asked`) when that is narrower. A recipe never widens it: see `egress_for_build`."""
    approved = approved_egress(repository)
    if asked is None or widens(approved, asked):
        return approved
    return asked


def _record_approved(
    repository: Repository,
    policy: NetworkPolicy,
    *,
    before: NetworkPolicy,
    actor=None,
    why: str,
    approval: ApprovalRequest | None = None,
) -> None:
    with transaction.atomic():
        Repository.objects.filter(pk=repository.pk).update(
            approved_egress=as_json(policy), egress_approved_at=timezone.now()
        )
        repository.approved_egress = as_json(policy)
        audit.record(
            "repository.egress",
            actor=actor,
            repository=repository,
            object_type="repository",
            object_id=repository.pk,
            data={
                "egress_before": describe(before),
                "egress_after": describe(policy),
                "why": why,
                "approval": approval.pk if approval is not None else None,
            },
        )


@dataclass(frozen=True)
class BuildEgress:
    """The egress a build runs with, and what its log says about it (empty: nothing changed)."""

    policy: NetworkPolicy
    note: str = ""
    request: ApprovalRequest | None = None


def widening_requests(repository: Repository):
    """The open `widen_egress` requests of `repository` (pending and not expired, or approved
    and not yet carried out), newest first."""
    now = timezone.now()
    return ApprovalRequest.objects.filter(repository=repository, action=WIDEN_EGRESS).filter(
        Q(state=State.PENDING, expires_at__gt=now)
        | Q(state=State.PENDING, expires_at__isnull=True)
        | Q(state=State.APPROVED)
    )


def _widening_request(
    repository: Repository,
    before: NetworkPolicy,
    after: NetworkPolicy,
    *,
    source: str,
    authors: Sequence[str] = (),
) -> ApprovalRequest:
    """One request per widening: an open one for the same change, or one rejected since the
    approved egress last changed, is reused instead of asking again at every refresh.
    `authors`: addresses of whoever committed the recipe's changes (four eyes refuses them
    the decision); a reused pending request gains any new ones."""
    summary = f"egress {describe(before)} → {describe(after)}"
    since = Repository.objects.filter(pk=repository.pk).values_list(
        "egress_approved_at", flat=True
    )[0]
    rejected = ApprovalRequest.objects.filter(
        repository=repository, action=WIDEN_EGRESS, state=State.REJECTED
    )
    if since is not None:
        rejected = rejected.filter(created_at__gte=since)
    found = (
        (widening_requests(repository) | rejected)
        .filter(payload__summary=summary)
        .order_by("-created_at")
        .first()
    )
    if found is not None:
        known = set(found.payload.get("recipe_authors", []))
        if found.state == State.PENDING and not known.issuperset(authors):
            found.payload = {**found.payload, "recipe_authors": sorted(known | set(authors))}
            found.save(update_fields=["payload"])
        return found
    return gate.request_approval(
        action=WIDEN_EGRESS,
        repository=repository,
        payload={
            "summary": summary,
            "requester": source,
            "recipe_authors": sorted(set(authors)),
            "asked": describe(after),
            "before": as_json(before),
            "after": as_json(after),
        },
    )


def egress_for_build(
    repository: Repository,
    asked: NetworkPolicy,
    *,
    source: str,
    default_branch: bool = True,
    authors: Sequence[str] = (),
) -> BuildEgress:
    """Decide the egress a snapshot build (and so its sessions) runs with, given what the
    build's recipe asks for. Narrowing is recorded at once (by a build of the default branch;
    another branch only narrows its own build); widening keeps the approved policy and files a
    `widen_egress` request, unless the repository's approval policy does not gate it (then it
    is recorded and audited, as the policy allows)."""
    approved = approved_egress(repository)
    if asked == approved:
        return BuildEgress(approved)
    if not widens(approved, asked) and not default_branch:
        return BuildEgress(asked, f"{source} narrows egress to {describe(asked)} on this branch")
    if not widens(approved, asked):
        _record_approved(repository, asked, before=approved, why=f"{source} narrows it")
        return BuildEgress(
            asked, f"{source} narrows egress from {describe(approved)} to {describe(asked)}"
        )
    if not approval_required(repository, WIDEN_EGRESS):
        _record_approved(
            repository, asked, before=approved, why=f"{source}; widen_egress is not gated"
        )
        return BuildEgress(
            asked,
            f"{source} widens egress from {describe(approved)} to {describe(asked)} "
            "(this repository's approval policy does not gate widen_egress)",
        )
    request = _widening_request(repository, approved, asked, source=source, authors=authors)
    if request.state == State.REJECTED:
        why = (
            f"request {request.pk} to widen it was rejected; change the recipe, or ask again "
            "with `manage.py inspect recipe set`"
        )
    else:
        why = (
            f"until a reviewer approves widen_egress request {request.pk}; the snapshot is "
            "rebuilt with the wider egress once it is approved"
        )
    return BuildEgress(
        approved,
        f"{source} asks for egress {describe(asked)}; egress stays {describe(approved)} {why}",
        request,
    )


def recipe_override_set(*, repository, text: str, by) -> ApprovalRequest | None:
    """Set the repository's dashboard recipe (MANAGE_REPOSITORY needed). RecipeError if it does
    not parse. Returns None when applied, or the pending request when it widens egress."""
    access.require_repo_permission(by, repository, roles.MANAGE_REPOSITORY)
    new = parse_recipe(text, where="the recipe set in the dashboard") if text.strip() else None
    before = approved_egress(repository)
    after = new.egress if new is not None else NetworkPolicy()
    if approval_required(repository, WIDEN_EGRESS) and widens(before, after):
        return gate.request_approval(
            action=WIDEN_EGRESS,
            repository=repository,
            requested_by=by,
            payload={
                "summary": f"egress {describe(before)} → {describe(after)}",
                "asked": describe(after),
                "recipe_override": text,
                "previous_override": repository.recipe_override,
                "before": as_json(before),
                "after": as_json(after),
            },
        )
    _apply(repository, text, actor=by, before=before, after=after)
    return None


def _apply(
    repository, text: str, *, actor, before: NetworkPolicy, after: NetworkPolicy, approval=None
) -> None:
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
                "egress_before": describe(before),
                "egress_after": describe(after),
                "approval": approval.pk if approval is not None else None,
            },
        )
        if after != before:
            _record_approved(
                repository,
                after,
                before=before,
                actor=actor,
                why="the recipe set in the dashboard",
                approval=approval,
            )


def execute_widen_egress(approval: ApprovalRequest) -> dict:
    """The executor of an approved egress widening: records the wider policy (and the
    dashboard recipe that asked for it) and queues a snapshot rebuild — unless the approved
    egress or the recipe changed since (then the approval no longer applies)."""
    repository = approval.repository
    repository.refresh_from_db()
    payload = approval.payload
    before, after = _policy(payload["before"]), _policy(payload["after"])
    overridden = "recipe_override" in payload
    if overridden and repository.recipe_override == payload["recipe_override"]:
        raise gate.ActionNoLongerApplies("the recipe already is the one this request asked for")
    if overridden and repository.recipe_override != payload["previous_override"]:
        raise gate.ActionNoLongerApplies(
            "the repository's recipe changed after this request was made; ask again"
        )
    if repository.approved_network != before:
        raise gate.ActionNoLongerApplies(
            f"the repository's egress changed to {describe(repository.approved_network)} after "
            "this request was made; the next build asks again if its recipe still widens it"
        )
    # Carried out by the system on the reviewer's approval (the entries name the approval).
    if overridden:
        _apply(
            repository,
            payload["recipe_override"],
            actor=None,
            before=before,
            after=after,
            approval=approval,
        )
    else:
        _record_approved(
            repository,
            after,
            before=before,
            why=payload.get("requester", "the repository's recipe"),
            approval=approval,
        )
    snapshot_refresh_request(repository)
    return {"egress": describe(after), "refresh": "queued"}


gate.register_executor(WIDEN_EGRESS, execute_widen_egress)
