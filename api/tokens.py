"""API token actions: create (the only time the token is seen), authenticate, revoke.

A token is `insp_` + 43 URL-safe characters (256 bits); the prefix makes a leaked token easy
to recognise (secret scanners, logs). At rest only its sha256 is kept: with that much entropy a
slow hash buys nothing, and a lookup by hash is one indexed query.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.utils import timezone

from api.models import ApiToken

PREFIX = "insp_"
EXPIRY_DAYS = (7, 30, 90, 365)
DEFAULT_EXPIRY_DAYS = 90
LAST_USED_EVERY = timedelta(minutes=1)  # at most one write per token per minute


class TokenError(Exception):
    """A token request that cannot be honoured; the message says why."""


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(
    *, user, name: str, expires_in_days: int = DEFAULT_EXPIRY_DAYS
) -> tuple[ApiToken, str]:
    """A new token for `user`; returns the row and the token itself (never stored)."""
    name = (name or "").strip()
    if not name:
        raise TokenError("give the token a name, e.g. 'laptop CLI', so you can tell it apart later")
    if len(name) > 100:
        raise TokenError("the token's name is longer than 100 characters")
    if expires_in_days not in EXPIRY_DAYS:
        raise TokenError(f"a token expires after one of {', '.join(map(str, EXPIRY_DAYS))} days")
    raw = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=raw[: len(PREFIX) + 6],
        token_hash=_digest(raw),
        expires_at=timezone.now() + timedelta(days=expires_in_days),
    )
    return token, raw


def token_authenticate(raw: str) -> ApiToken | None:
    """The active token `raw` is, with its user; None if unknown, revoked, expired or the
    user is inactive. Records when it was last used."""
    if not raw or not raw.startswith(PREFIX) or len(raw) > 200:
        return None
    now = timezone.now()
    token = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=_digest(raw), revoked_at=None, expires_at__gt=now, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def token_revoke(*, token: ApiToken, user) -> bool:
    """Revoke `user`'s own token; False if it was already revoked."""
    if token.user_id != user.pk:
        raise TokenError("you can only revoke your own tokens")
    return bool(
        ApiToken.objects.filter(pk=token.pk, revoked_at=None).update(revoked_at=timezone.now())
    )


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer …` header value ('' if it is not one)."""
    scheme, _, value = (authorization or "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""
