"""Accounts: allauth adapters and views, and the one rule for which e-mail address is a user's.

Local accounts are created by admins unless INSPECT_OPEN_SIGNUP is on. An address a user merely
typed in proves nothing: it becomes their primary address, authors their commits and matches
their Slack user only once it is verified (allauth's confirmation mail, a verified address from
GitHub, or an admin ticking "verified"). An address an administrator set on an account that has
never managed its own addresses (no allauth EmailAddress rows: created by an admin, by the
shell or by `ensure_admin`) counts as vouched for by that administrator.
"""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.models import EmailAddress
from allauth.account.views import EmailView
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse

from accounts import invitations


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request) -> bool:
        # Closed sign-up still lets in the holder of an open invitation link, once: when an
        # account has the invited address, that person signs in instead.
        if settings.OPEN_SIGNUP:
            return True
        invitation = invitations.open_in_session(request)
        return invitation is not None and not users_by_verified_email(invitation.email).exists()

    def save_user(self, request, user, form, commit: bool = True):
        user = super().save_user(request, user, form, commit=False)
        invitation = invitations.open_in_session(request)
        if invitation is not None:
            # The account gets the address the invitation was sent to, whatever was typed.
            user.email = invitation.email
        if commit:
            user.save()
        return user

    def is_email_verified(self, request, email: str) -> bool:
        # The invitation link was mailed to that address by an admin, who vouches for it.
        invitation = invitations.open_in_session(request)
        if invitation is not None and invitation.email.lower() == (email or "").lower():
            return True
        return super().is_email_verified(request, email)


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request, sociallogin) -> bool:
        return settings.OPEN_SIGNUP


class VerifiedPrimaryEmailView(EmailView):
    """Account › E-mail, where only a verified address can be made primary (allauth allows an
    unverified one while the user has no verified address, which with verification off is
    always)."""

    def _action_primary(self, request: HttpRequest, *args, **kwargs) -> HttpResponse | None:
        address = self._get_email_address(request)
        if address is not None and not address.verified:
            messages.error(
                request,
                f"{address.email} is not verified, so it cannot be your primary address: "
                "verify it first (the confirmation link sent to it), or ask an administrator.",
            )
            return None
        return super()._action_primary(request, *args, **kwargs)


def verified_email(user) -> str:
    """`user`'s primary address if it is verified (or set by an administrator), else ""."""
    email = (getattr(user, "email", "") or "").strip()
    if not email:
        return ""
    own = EmailAddress.objects.filter(user=user)
    if not own.exists() or own.filter(email__iexact=email, verified=True).exists():
        return email
    return ""


def users_by_verified_email(email: str) -> QuerySet:
    """Active users for whom `email` is a verified address (or one an administrator set)."""
    email = (email or "").strip()
    users = get_user_model().objects.filter(is_active=True)
    if not email:
        return users.none()
    verified = EmailAddress.objects.filter(user=OuterRef("pk"), email__iexact=email, verified=True)
    managed = EmailAddress.objects.filter(user=OuterRef("pk"))
    return users.filter(
        Q(Exists(verified)) | (Q(email__iexact=email) & ~Q(Exists(managed)))
    ).distinct()


def user_named(name: str | None):
    """The user the command line acts as: the one called `name`, else the first active site
    admin. CommandError says who is missing."""
    users = get_user_model()
    if name:
        user = users.objects.filter(username=name).first()
        if user is None:
            raise CommandError(f"no user named {name!r}")
        return user
    user = users.objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
    if user is None:
        raise CommandError("no admin account exists; pass --as USER")
    return user
