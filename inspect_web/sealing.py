"""Encryption at rest: the one home of the Fernet keys (INSPECT_SECRETS_KEY; comma-separated
keys rotate: the first encrypts, all decrypt). Repository secrets, stored OAuth tokens and the
secret site settings (provider keys, the GitHub App's key) are all sealed with it."""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

SEALED_PREFIX = "fernet:"


class SecretsUnavailable(Exception):
    """Secrets cannot be used: no key configured, or a value the key cannot decrypt."""


def fernet() -> MultiFernet:
    raw = getattr(settings, "SECRETS_KEY", "")
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    if not keys:
        raise SecretsUnavailable(
            "INSPECT_SECRETS_KEY is not set, so repository secrets cannot be used; generate "
            "one with `python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'`, set it for the web and worker processes "
            "and restart them"
        )
    try:
        return MultiFernet([Fernet(k.encode()) for k in keys])
    except ValueError:
        raise SecretsUnavailable(
            "INSPECT_SECRETS_KEY is not a valid Fernet key (32 url-safe base64-encoded bytes)"
        ) from None


def seal(value: str) -> str:
    """`value` encrypted with INSPECT_SECRETS_KEY, marked so it is never sealed twice.
    SecretsUnavailable without a key (nothing secret is ever stored in plain text)."""
    if not value or value.startswith(SEALED_PREFIX):
        return value
    return SEALED_PREFIX + fernet().encrypt(value.encode()).decode()


def unseal(value: str) -> str:
    """The plain text of a `seal`ed value (an unsealed one is returned as is).
    SecretsUnavailable when no configured key decrypts it."""
    if not value.startswith(SEALED_PREFIX):
        return value
    try:
        return fernet().decrypt(value.removeprefix(SEALED_PREFIX).encode()).decode()
    except InvalidToken:
        raise SecretsUnavailable(
            "a stored value cannot be decrypted with INSPECT_SECRETS_KEY (was the key changed? "
            "keep the old one after the new, comma-separated)"
        ) from None
