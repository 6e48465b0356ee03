"""Model keys never reach the event log: every event a runtime yields is scrubbed of them.

A CLI agent holds its key in its own process environment and may print it (a debug line, an
error echoing a header, a model asked to `env`); the built-in agent's model may repeat it. So
redaction sits between every runtime and the runner, in one place (`RedactingRuntime`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sessions.agents.base import AgentEvent, AgentRuntime, Turn

REDACTED = "[redacted]"
# Shorter values are not keys, and replacing them would shred ordinary text.
MIN_SECRET_LENGTH = 8


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every occurrence of each secret replaced, recursively through dicts and
    lists (keys included)."""
    found = sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
    if not found:
        return value
    return _redact(value, found)


def _redact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {_redact(k, secrets): _redact(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact(v, secrets) for v in value]
    return value


class RedactingRuntime(AgentRuntime):
    """Wraps a runtime so that no event it yields carries one of `secrets`, and so that an
    AgentError it raises does not either."""

    def __init__(self, inner: AgentRuntime, secrets: Iterable[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.honours_sync = inner.honours_sync
        self.secrets = [s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH]

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        from sessions.agents.base import AgentError

        try:
            for event in self.inner.run(turn):
                yield AgentEvent(event.kind, redact(event.data, self.secrets))
        except AgentError as exc:
            raise AgentError(redact(str(exc), self.secrets)) from None

    def stop(self) -> None:
        self.inner.stop()

    def process_command(self, turn: Turn) -> str | None:
        command = self.inner.process_command(turn)
        return None if command is None else redact(command, self.secrets)

    def __getattr__(self, name: str) -> Any:
        # Tests and the runner may look at the wrapped runtime's attributes (model, ...).
        return getattr(self.inner, name)
