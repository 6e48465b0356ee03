"""Repository secrets never round-trip through a model: their values (plain and encoded) are
masked in what the gateway forwards upstream and in what it stores."""

from __future__ import annotations

from approvals.redaction import Redactor
from approvals.secrets import secret_values


def scrubber(repository_id: int) -> Redactor | None:
    """The redactor for this repository's secrets (None when it has none)."""
    values = tuple(v for v in secret_values(repository_id) if v)
    return Redactor.for_secrets(values) if values else None


def scrub_bytes(redactor: Redactor | None, data: bytes) -> bytes:
    """`data` with every secret masked (bytes that are not UTF-8 pass unchanged)."""
    if redactor is None or not data:
        return data
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data
    scrubbed = redactor(text)
    return data if scrubbed == text else scrubbed.encode()
