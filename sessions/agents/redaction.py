"""Model keys never reach the event log: every event a runtime yields is scrubbed of them.

A CLI agent holds its key in its own process environment and may print it (a debug line, an
error echoing a header, a model asked to `env`); the built-in agent's model may repeat it. So
redaction sits between every runtime and the runner, in one place (`RedactingRuntime`).
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote, quote_plus

from sessions.agents.base import AgentEvent, AgentRuntime, Turn

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


class RedactingRuntime(AgentRuntime):
    """Wraps a runtime so that no event it yields carries one of `secrets`, and so that an
    AgentError it raises does not either."""

    def __init__(self, inner: AgentRuntime, secrets: Iterable[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.honours_sync = inner.honours_sync
        self.redactor = Redactor(secrets)

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        from sessions.agents.base import AgentError

        try:
            for event in self.inner.run(turn):
                yield AgentEvent(event.kind, self.redactor(event.data))
        except AgentError as exc:
            raise AgentError(self.redactor(str(exc))) from None
        finally:
            self._redact_conversation(turn)

    def _redact_conversation(self, turn: Turn) -> None:
        """The conversation the runner stores after the turn holds no key either (a runtime
        may have written a tool's output or the model's words into it). Done once the turn
        has ended: the entries are replaced by redacted copies."""
        conversation = getattr(turn, "conversation", None)
        if conversation is None or not self.redactor.forms:
            return
        conversation.messages[:] = self.redactor(conversation.messages)
        conversation.summary = self.redactor(conversation.summary)
        conversation.resume_id = self.redactor(conversation.resume_id)

    def stop(self) -> None:
        self.inner.stop()

    def process_command(self, turn: Turn) -> str | None:
        command = self.inner.process_command(turn)
        return None if command is None else self.redactor(command)

    def __getattr__(self, name: str) -> Any:
        # Tests and the runner may look at the wrapped runtime's attributes (model, ...).
        return getattr(self.inner, name)
