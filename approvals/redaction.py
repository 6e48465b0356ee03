"""Redaction: every form a secret is commonly printed in (plain, percent-encoded, hex,
base64), replaced by "[redacted]". A control: repository secrets (approvals.secrets), model keys
(every agent runtime is wrapped by sessions.agents.redaction) and build logs all go through it.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
# Shorter values are not keys, and replacing them would shred ordinary text.
MIN_SECRET_LENGTH = 8
_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def encoded_forms(secret: str) -> set[str]:
    """The secret as code commonly prints it: itself, percent-encoded (``quote`` with and
    without ``/`` kept, ``quote_plus``; upper- and lower-case escapes), hex (both cases), and
    the part of its base64 (standard and URL-safe) that depends on the secret alone, for each
    of the three byte offsets it can have inside a longer base64 string (``user:secret`` in
    an HTTP Basic header, a JSON blob, ...). Base64 wrapped across lines is not caught."""
    raw = secret.encode()
    forms = {secret, raw.hex(), raw.hex().upper()}
    for encoded in (quote(secret), quote(secret, safe=""), quote_plus(secret)):
        forms.add(encoded)
        forms.add(_ESCAPE.sub(lambda m: m.group(0).lower(), encoded))
    for offset in range(3):
        # Characters [first, last) of the encoding carry only bits of the secret itself.
        first, last = -(-8 * offset // 6), 8 * (offset + len(raw)) // 6
        core = base64.b64encode(bytes(offset) + raw).decode()[first:last]
        forms.add(core)
        forms.add(core.translate(str.maketrans("+/", "-_")))
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


class Redactor:
    """Replaces every known form of a set of secrets; the forms are worked out once."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
        forms = set().union(*(encoded_forms(v) for v in values)) if values else set()
        # Longest first: a form that contains another is replaced whole.
        self.forms = sorted(forms, key=len, reverse=True)

    @classmethod
    def for_secrets(cls, secrets: Iterable[str]) -> Redactor:
        """A shared redactor for this set of secrets (event inserts and build logs call
        ``redact`` per line with the same few secrets)."""
        return _redactor(frozenset(secrets))

    def found_in(self, text: str) -> bool:
        return any(form in text for form in self.forms)

    def __call__(self, value: Any) -> Any:
        """`value` with every form replaced, recursively through dicts and lists (keys too)."""
        if isinstance(value, str):
            for form in self.forms:
                if form in value:
                    value = value.replace(form, REDACTED)
            return value
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        return value


@functools.lru_cache(maxsize=256)
def _redactor(secrets: frozenset[str]) -> Redactor:
    return Redactor(secrets)


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every occurrence of each secret, plain or encoded (``encoded_forms``),
    replaced, recursively through dicts and lists (keys included)."""
    redactor = Redactor.for_secrets(secrets)
    return redactor(value) if redactor.forms else value
