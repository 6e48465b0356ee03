"""Invitation links: the token and its hash, and the one rule for which link still opens.

Only a token's SHA-256 is stored (accounts.models.Invitation.token_hash), so a copy of the
database holds no working link. Creating and accepting invitations (with their audit entries)
is snapshots.members, a layer above; the sign-up adapter (accounts.identity) asks this module
whether the visitor holds an open invitation.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.http import HttpRequest
from django.utils import timezone

from accounts.models import Invitation

LIFETIME = timedelta(days=7)
# The token of the invitation a logged-out visitor opened, kept in their session for sign-up.
SESSION_KEY = "inspect_invitation"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def find(token: str) -> Invitation | None:
    """The invitation of `token` in any state (None for an unknown token)."""
    if not token or len(token) > 200:
        return None
    return (
        Invitation.objects.select_related("repository").filter(token_hash=token_hash(token)).first()
    )


def why_closed(invitation: Invitation | None) -> str | None:
    """Why the link no longer opens (None while it does)."""
    if invitation is None:
        return (
            "This invitation link is not valid: it may have been mistyped or replaced by a "
            "newer one."
        )
    if invitation.accepted_at is not None:
        return (
            "This invitation has already been used. Sign in, or ask a repository admin for a "
            "new one."
        )
    if invitation.expires <= timezone.now():
        return "This invitation has expired. Ask a repository admin to invite you again."
    if invitation.repository.archived_at is not None:
        return f"{invitation.repository.name} has been archived since you were invited."
    return None


def open_in_session(request: HttpRequest) -> Invitation | None:
    """The still-open invitation whose link this visitor opened (None if none)."""
    session = getattr(request, "session", None)
    token = session.get(SESSION_KEY) if session is not None else None
    invitation = find(token) if token else None
    return invitation if invitation is not None and why_closed(invitation) is None else None
