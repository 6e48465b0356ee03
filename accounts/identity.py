"""Accounts: allauth adapters and views, and the one rule for which e-mail address is a user's.

Local accounts are created by admins unless INSPECT_OPEN_SIGNUP is on. An address a user merely
typed in proves nothing: it becomes their primary address, authors their commits and matches
their Slack user only once it is verified (allauth's confirmation mail, a verified address from
GitHub, or an admin ticking "verified"). An address an administrator set on an account that has
never managed its own addresses (no allauth EmailAddress rows: created by an admin, by the
shell or by `ensure_admin`) counts as vouched for by that administrator.

Single sign-on (accounts.social_apps): the adapter below hands allauth the GitHub and OpenID
Connect apps configured now, refuses a social login whose verified e-mail is outside the allowed
domains, opens sign-up to OpenID Connect users (the company's directory decides who they are) and
gives a new one the default role. While local passwords are off, `PasswordsOffBackend` refuses
every password check (login page, /admin/, anything calling `authenticate`) except the
break-glass superuser.
"""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.models import EmailAddress
from allauth.account.views import EmailView
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from accounts import invitations, social_apps
from accounts.models import Membership

PASSWORDS_OFF_MESSAGE = "Password sign-in is off on this site: use the single sign-on button."


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request) -> bool:
        if social_apps.passwords_off():
            return False
        # Closed sign-up still lets in the holder of an open invitation link, once: when an
        # account has the invited address, that person signs in instead.
        if settings.OPEN_SIGNUP:
            return True
        invitation = invitations.open_in_session(request)
        return invitation is not None and not users_by_verified_email(invitation.email).exists()

    def authenticate(self, request: HttpRequest, **credentials):
        user = super().authenticate(request, **credentials)
        if user is None and "password" in credentials and social_apps.passwords_off():
            # Say why on the form, rather than "wrong password" for a right one.
            raise forms.ValidationError(PASSWORDS_OFF_MESSAGE)
        return user

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


class PasswordsOffBackend(BaseBackend):
    """First in AUTHENTICATION_BACKENDS: while local passwords are off, a password check stops
    here (PermissionDenied ends Django's `authenticate`), unless it is the break-glass
    superuser's (INSPECT_LOCAL_LOGIN=superuser), which this backend checks itself."""

    def authenticate(self, request, password=None, **credentials):
        if password is None or not social_apps.passwords_off():
            return None
        login = credentials.get("username") or credentials.get("email") or ""
        if login and settings.LOCAL_LOGIN == "superuser":
            candidates = get_user_model().objects.filter(
                Q(username__iexact=login) | Q(email__iexact=login), is_superuser=True
            )
            for user in candidates:
                if social_apps.break_glass(user) and user.check_password(password):
                    return user
        raise PermissionDenied(PASSWORDS_OFF_MESSAGE)

    def get_user(self, user_id):
        # A break-glass session names this backend; the user is loaded as Django's would be.
        return ModelBackend().get_user(user_id)


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def list_apps(self, request, provider=None, client_id=None):
        """The apps of accounts.social_apps (environment or settings page) before any the
        admin added as SocialApp rows, which they replace for the same provider."""
        configured = social_apps.apps(provider, client_id)
        providers = {app.provider for app in configured}
        rows = super().list_apps(request, provider=provider, client_id=client_id)
        return configured + [app for app in rows if app.provider not in providers]

    def is_open_for_signup(self, request, sociallogin) -> bool:
        if social_apps.is_single_sign_on(sociallogin.account.provider):
            return True
        return settings.OPEN_SIGNUP

    def pre_social_login(self, request, sociallogin) -> None:
        """Refuse a sign-in whose verified e-mail is outside the allowed domains: every
        OpenID Connect sign-in, and a new account from any provider."""
        domains = social_apps.allowed_domains()
        oidc = social_apps.is_single_sign_on(sociallogin.account.provider)
        if not domains or not (oidc or not sociallogin.is_existing):
            return
        verified = [address.email for address in sociallogin.email_addresses if address.verified]
        if any(social_apps.domain_allowed(email, domains) for email in verified):
            return
        shown = ", ".join(verified) if verified else "no verified e-mail address"
        messages.error(
            request,
            f"This site lets in only verified e-mail addresses at {', '.join(domains)}; "
            f"your sign-in gave {shown}. Ask an administrator if you should have access.",
        )
        raise ImmediateHttpResponse(redirect("account_login"))

    def save_user(self, request, sociallogin, form=None):
        user = super().save_user(request, sociallogin, form)
        if social_apps.is_single_sign_on(sociallogin.account.provider):
            grant_default_role(user)
        return user


def grant_default_role(user) -> list[Membership]:
    """Make a new single sign-on user a member of the default repositories with the default
    role (accounts.social_apps.default_grant); each membership is audited by its signal."""
    role, names = social_apps.default_grant()
    if not role:
        return []
    repositories = Membership.repository.field.related_model.objects.filter(name__in=names)
    return [
        Membership.objects.get_or_create(user=user, repository=repository, defaults={"role": role})[
            0
        ]
        for repository in repositories
    ]


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
