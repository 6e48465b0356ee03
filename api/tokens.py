"""API token actions: create (the only time the token is seen), authenticate, revoke.

A token is `insp_` + 43 URL-safe characters (256 bits); the prefix makes a leaked token easy
to recognise (secret scanners, logs). At rest only its sha256 is kept: with that much entropy a
slow hash buys nothing, and a lookup by hash is one indexed query.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from api.models import ApiToken
from inspect_web.redis_client import get_redis

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


# Stream tickets: for the two clients that cannot send an `Authorization` header (a browser's
# EventSource and WebSocket), a token is traded for a ticket that goes in the address instead.
# A ticket opens one stream, once, within TICKET_SECONDS: an address that ends up in a log, a
# proxy or the browser's history is spent by then.
TICKET_PREFIX = "inspt_"
TICKET_SECONDS = 60


def _ticket_key(raw: str) -> str:
    return f"inspect:stream-ticket:{_digest(raw)}"


def stream_ticket_create(*, user) -> str:
    """A single-use ticket for `user`, valid TICKET_SECONDS (kept in Redis as its hash)."""
    raw = TICKET_PREFIX + secrets.token_urlsafe(32)
    get_redis().set(_ticket_key(raw), str(user.pk), ex=TICKET_SECONDS, nx=True)
    return raw


def stream_ticket_redeem(raw: str):
    """The active user a ticket was made for, spending it; None if unknown, spent or expired."""
    if not raw or not raw.startswith(TICKET_PREFIX) or len(raw) > 200:
        return None
    with get_redis().pipeline(transaction=True) as pipe:  # GET + DEL at once: one use only
        user_id, _ = pipe.get(_ticket_key(raw)).delete(_ticket_key(raw)).execute()
    if user_id is None:
        return None
    return get_user_model().objects.filter(pk=int(user_id), is_active=True).first()
