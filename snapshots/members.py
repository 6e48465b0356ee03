"""A repository's members: the one set of actions behind Settings › People and
`inspect member …`. Each validates, saves atomically and audits; a refusal (MemberRefused) says
why and saves nothing. A membership's own entries (`membership.add`, `.role`, `.remove`) are
written by approvals.signals on every save or delete, whoever makes it; the actions name their
actor for them (`audit.acting_as`). Invitations are audited here.

The rules: a repository always keeps an admin (removing or demoting the last one is refused);
inviting someone already a member says so; an invitation by e-mail to an address no account has
verified becomes a link (accounts.invitations) that signs the person up. A membership saved or
deleted here tells that user's open websockets to re-check at once (sessions.live_access listens
to Membership's signals), so a removed member's sockets close.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts import invitations
from accounts.identity import users_by_verified_email
from accounts.models import Invitation, Membership, Role
from approvals import audit
from snapshots.models import Repository


class MemberRefused(Exception):
    """The change cannot be made; the message says why. `field` names the input at fault
    ("who", "role", "user") for a form."""

    def __init__(self, message: str, *, field: str = "who") -> None:
        super().__init__(message)
        self.field = field


@dataclass
class Invited:
    """What an invitation did: a membership at once (an existing account), or an invitation
    whose `link` is shown once to whoever invited and mailed to the address."""

    membership: Membership | None = None
    invitation: Invitation | None = None
    link: str = ""


def members_of(repository: Repository) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(repository=repository)
        .select_related("user")
        .order_by("user__username")
    )


def pending_invitations(repository: Repository) -> QuerySet[Invitation]:
    return Invitation.objects.filter(
        repository=repository, accepted_at__isnull=True, expires__gt=timezone.now()
    ).select_related("invited_by")


def _role(role: str) -> str:
    if role not in Role.values:
        raise MemberRefused(
            f"unknown role {role!r}: choose one of {', '.join(Role.values)}", field="role"
        )
    return role


def _admins_left_without(repository: Repository, membership: Membership) -> int:
    """The admins the repository keeps once `membership` stops being one (read under
    `_membership`'s lock)."""
    admins = Membership.objects.filter(repository=repository, role=Role.ADMIN)
    return admins.exclude(pk=membership.pk).count()


def _audit(action: str, repository: Repository, by, object_id, data: dict) -> None:
    audit.record(
        action,
        actor=by,
        repository=repository,
        object_type="invitation",
        object_id=object_id,
        data=data,
    )


def member_add(repository: Repository, user, role: str, *, by) -> Membership:
    """Make `user` a member with `role`; refused if they already are. Audited
    `membership.add`."""
    role = _role(role)
    with transaction.atomic():
        existing = Membership.objects.filter(repository=repository, user=user).first()
        if existing is not None:
            raise MemberRefused(
                f"{user.get_username()} is already a member of {repository.name} "
                f"({existing.role}); change their role instead"
            )
        with audit.acting_as(by):  # approvals.signals writes `membership.add`
            membership = Membership.objects.create(repository=repository, user=user, role=role)
    return membership


def _membership(repository: Repository, user) -> Membership:
    """`user`'s membership, with the repository's row locked first: changes to one repository's
    members run one at a time, so two admins demoting each other at once cannot both succeed
    (and cannot deadlock)."""
    Repository.objects.select_for_update().filter(pk=repository.pk).first()
    membership = Membership.objects.filter(repository=repository, user=user).first()
    if membership is None:
        raise MemberRefused(
            f"{user.get_username()} is not a member of {repository.name}", field="user"
        )
    return membership


def member_set_role(repository: Repository, user, role: str, *, by) -> Membership:
    """Change a member's role; demoting the last admin is refused. Audited
    `membership.role`."""
    role = _role(role)
    with transaction.atomic():
        membership = _membership(repository, user)
        before = membership.role
        if before == role:
            return membership
        if before == Role.ADMIN and not _admins_left_without(repository, membership):
            raise MemberRefused(
                f"{user.get_username()} is the last admin of {repository.name}: make someone "
                "else an admin first",
                field="role",
            )
        membership.role = role
        # Its signals audit the change and close the sockets the new role no longer allows.
        with audit.acting_as(by):
            membership.save(update_fields=["role"])
    return membership


def member_remove(repository: Repository, user, *, by) -> None:
    """Remove a member; removing the last admin is refused. Their open websockets on the
    repository's sessions close at once. Audited `membership.remove`."""
    with transaction.atomic():
        membership = _membership(repository, user)
        if membership.role == Role.ADMIN and not _admins_left_without(repository, membership):
            raise MemberRefused(
                f"{user.get_username()} is the last admin of {repository.name}: make someone "
                "else an admin first",
                field="user",
            )
        # Its signals audit the removal and tell the user's sockets to re-check.
        with audit.acting_as(by):
            membership.delete()


def invite(repository: Repository, who: str, role: str, *, by, base_url: str = "") -> Invited:
    """Invite by username or e-mail address. A username, or an address an account has
    verified, becomes a membership at once; any other address gets an invitation link (mailed,
    and returned once for whoever invited), replacing a pending one to the same address.
    Audited as `membership.add` or `invitation.create` (never with the token)."""
    who = (who or "").strip()
    role = _role(role)
    if not who:
        raise MemberRefused("enter a username or an e-mail address")
    if repository.archived_at is not None:
        raise MemberRefused(f"{repository.name} is archived; unarchive it first")
    if "@" not in who:
        user = get_user_model().objects.filter(username=who, is_active=True).first()
        if user is None:
            raise MemberRefused(
                f"no user named {who!r}; to invite someone without an account, enter their "
                "e-mail address"
            )
        return Invited(membership=member_add(repository, user, role, by=by))
    try:
        validate_email(who)
    except Exception:
        raise MemberRefused(f"{who!r} is not an e-mail address") from None
    user = users_by_verified_email(who).order_by("pk").first()
    if user is not None:
        return Invited(membership=member_add(repository, user, role, by=by))
    token = invitations.new_token()
    with transaction.atomic():
        replaced = Invitation.objects.filter(
            repository=repository, email__iexact=who, accepted_at__isnull=True
        ).delete()[0]
        invitation = Invitation.objects.create(
            repository=repository,
            email=who,
            role=role,
            token_hash=invitations.token_hash(token),
            invited_by=by if getattr(by, "is_authenticated", False) else None,
            expires=timezone.now() + invitations.LIFETIME,
        )
        _audit(
            "invitation.create",
            repository,
            by,
            invitation.pk,
            {"email": who, "role": role, "replaced": replaced, "expires": invitation.expires},
        )
    link = f"{(base_url or settings.PUBLIC_URL).rstrip('/')}/invitations/{token}/"
    inviter = by.get_username() if getattr(by, "is_authenticated", False) else "An admin"
    transaction.on_commit(
        lambda: send_mail(
            f"You are invited to {repository.name} on Inspect",
            f"{inviter} invited you to join {repository.name} as {role}.\n\n"
            f"Open this link to accept (it works once, until "
            f"{invitation.expires:%Y-%m-%d %H:%M} UTC):\n{link}\n",
            None,
            [who],
            fail_silently=True,  # the link is shown to whoever invited, to pass on by hand
        )
    )
    return Invited(invitation=invitation, link=link)


def invitation_accept(token: str, user) -> Membership:
    """`user` accepts the invitation of `token` and becomes a member with its role (already a
    member: they keep their role). The link then stops working. Audited `invitation.accept`."""
    with transaction.atomic():
        found = invitations.find(token)
        invitation = (
            Invitation.objects.select_for_update().select_related("repository").get(pk=found.pk)
            if found is not None
            else None
        )
        if (closed := invitations.why_closed(invitation)) is not None:
            raise MemberRefused(closed, field="token")
        repository = invitation.repository
        membership = Membership.objects.filter(repository=repository, user=user).first()
        joined = membership is None
        if joined:
            with audit.acting_as(user):  # approvals.signals writes `membership.add`
                membership = Membership.objects.create(
                    repository=repository, user=user, role=invitation.role
                )
        invitation.accepted_at = timezone.now()
        invitation.accepted_by = user
        invitation.save(update_fields=["accepted_at", "accepted_by"])
        _audit(
            "invitation.accept",
            repository,
            user,
            invitation.pk,
            {
                "email": invitation.email,
                "user": user.get_username(),
                "role": membership.role,
                "joined": joined,
            },
        )
    return membership
