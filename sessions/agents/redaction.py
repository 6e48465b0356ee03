"""Model keys and turn tokens never reach the event log: every event a runtime yields is scrubbed
of them.

No runtime holds a provider key (the model gateway does), but a CLI agent holds its turn's token
in its own process environment and may print it (a debug line, an error echoing a header, a
model asked to `env`); the built-in agent's model may repeat it; and a provider key must stay
out of the log even if something echoed one. So
redaction sits between every runtime and the runner, in one place (`RedactingRuntime`); what a
secret looks like when printed is the controls' (approvals.redaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from approvals.redaction import Redactor
from sessions.agents.base import AgentError, AgentEvent, AgentRuntime, Turn


class RedactingRuntime(AgentRuntime):
    """Wraps a runtime so that no event it yields carries one of `secrets`, and so that an
    AgentError it raises does not either."""

    def __init__(self, inner: AgentRuntime, secrets: Iterable[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.honours_sync = inner.honours_sync
        self.redactor = Redactor(secrets)

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
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
