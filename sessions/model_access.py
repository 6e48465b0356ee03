"""Per-turn model access: the token a turn's runtime holds instead of a provider key, and where
that runtime finds the model gateway (docs/model-gateway.md).

A token is minted when a turn's agent starts, bound to its session, turn, repository and user,
and revoked when the turn ends (or its sandbox does); `expires_at` bounds it even if a worker
dies before revoking. Only its SHA-256 is stored. The gateway (`gateway/`) looks tokens up
with `active`.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from sessions.models import ModelAccess, Prompt, Session
from snapshots.sandbox import GATEWAY_PORT

TOKEN_PREFIX = "iwt_"  # noqa: S105 - a prefix, so a leaked token is recognisable
# A turn is bounded by its wall-clock limit; the margin covers verify and the snapshot.
EXPIRY_MARGIN = timedelta(minutes=10)


@dataclass(frozen=True)
class GatewayRoute:
    """What a runtime is given: the gateway's base URLs as its sandbox reaches them, and the
    turn's token (the runtime's "API key")."""

    anthropic_base: str  # ANTHROPIC_BASE_URL (no /v1)
    openai_base: str  # OPENAI_BASE_URL (with /v1)
    token: str


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def gateway_base(backend_name: str) -> str:
    """The gateway's root URL as a sandbox of `backend_name` reaches it: its own loopback door
    for a local sandbox, INSPECT_GATEWAY_PUBLIC_URL for Modal ('' when that is unset)."""
    if backend_name == "modal":
        return settings.GATEWAY_PUBLIC_URL
    return f"http://127.0.0.1:{GATEWAY_PORT}"


def gateway_unreachable(backend_name: str) -> str:
    """Why a runtime in a sandbox of `backend_name` could not reach the gateway ('' if it
    can): a local sandbox always has its door; a Modal one needs INSPECT_GATEWAY_PUBLIC_URL."""
    if backend_name != "modal":
        return ""
    url = settings.GATEWAY_PUBLIC_URL
    if not url:
        return (
            "Modal sandboxes reach the model gateway at INSPECT_GATEWAY_PUBLIC_URL, which is "
            "not set: set it to the https URL routed to the gateway (docs/model-gateway.md), "
            "or run sessions on the local backend."
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            f"INSPECT_GATEWAY_PUBLIC_URL={url!r} is not a URL Modal sandboxes can call: "
            "give it as https://host[:port] (docs/model-gateway.md)."
        )
    return ""


def host_gateway_base() -> str:
    """The gateway's root URL from a platform process (the built-in agent runs on the worker)."""
    return f"http://{settings.GATEWAY_HOST}:{settings.GATEWAY_PORT}"


def route_for(base: str, token: str) -> GatewayRoute:
    return GatewayRoute(
        anthropic_base=base + "/anthropic", openai_base=base + "/openai/v1", token=token
    )


def mint(session: Session, prompt: Prompt, runtime: str) -> str:
    """A new token for this turn of `session` (the plaintext is returned once, never stored)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = timezone.now()
    ModelAccess.objects.create(
        token_sha256=token_hash(token),
        session=session,
        prompt=prompt,
        user=prompt.author,
        repository_id=session.repository_id,
        runtime=runtime,
        created_at=now,
        expires_at=now + timedelta(seconds=settings.AGENT_MAX_WALL_SECONDS) + EXPIRY_MARGIN,
    )
    return token


def revoke(session_id: int, *, prompt_id: int | None = None) -> int:
    """End the model access of a session's turns (of one turn, given `prompt_id`); returns how
    many tokens this revoked."""
    live = ModelAccess.objects.filter(session_id=session_id, revoked_at__isnull=True)
    if prompt_id is not None:
        live = live.filter(prompt_id=prompt_id)
    return live.update(revoked_at=timezone.now())


def active(token: str) -> ModelAccess | None:
    """The live access `token` grants (None if unknown, revoked or expired)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    return (
        ModelAccess.objects.select_related("session", "repository", "user")
        .filter(
            token_sha256=token_hash(token),
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
        )
        .first()
    )
