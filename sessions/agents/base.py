"""The agent runtime protocol: a turn in, a stream of typed agent events out.

Every runtime (the built-in agent, OpenCode, Claude Code, Codex, a plain command) maps its own
output onto `AgentEvent`s; the session runner turns them into Event rows. Runtimes run their tools
through the sandbox: nothing executes on the worker host.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from snapshots.sandbox import Sandbox

AgentEventKind = Literal[
    "message", "reasoning", "tool_call", "tool_result", "file_edit", "output", "usage", "error",
    "notice", "done",
]  # fmt: skip

# How agent events are stored in the session's log.
EVENT_KIND = {
    "message": "agent_message",
    "reasoning": "reasoning",
    "tool_call": "tool_call",
    "tool_result": "tool_result",
    "file_edit": "file_edit",
    "output": "output",
    "usage": "usage",
    "error": "error",
    "notice": "notice",  # a warning the agent printed on a turn that goes on (a retry, a fallback)
}


@dataclass(frozen=True)
class Author:
    username: str
    name: str
    email: str


@dataclass(frozen=True)
class TurnLimits:
    steps: int = 50
    tokens: int = 500_000
    cost_usd: float = 5.0
    wall_seconds: float = 1800.0


class ChildSessions(ABC):
    """What the built-in agent's `spawn_session` / `session_status` tools call (see
    sessions/agents/children.py). Methods return JSON-able dicts for the model and raise
    AgentError with a message the model (and the user) can act on."""

    @abstractmethod
    def spawn(self, repository: str, prompt: str) -> dict[str, Any]: ...

    @abstractmethod
    def status(self, session_id: int) -> dict[str, Any]: ...


class ApprovalGate(ABC):
    """What a tool asks before an irreversible command (see sessions/agents/approvals.py):
    whether the command needs a reviewer, then a decision (waiting for it), then the result to
    record."""

    @abstractmethod
    def needs_approval(self, command: str) -> bool: ...

    @abstractmethod
    def wait_for_approval(self, command: str, stopped: threading.Event) -> tuple[bool, str, Any]:
        """Block until decided; (approved, a line for the model, a handle for `record`)."""

    @abstractmethod
    def record(self, handle: Any, *, ok: bool, result: dict[str, Any]) -> None: ...


@dataclass
class Conversation:
    """What a session's agent remembers between turns; the runner loads it before a turn and
    stores it after (sessions.models.AgentConversation), whatever way the turn ended.

    `resume_id`: a CLI's own session (thread) id, which its next turn resumes. `messages`: the
    built-in agent's transcript (llm.Entry dicts, user entries with their author), and
    `summary`: its compaction of the turns before `messages`. Runtimes update it in place."""

    resume_id: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""


@dataclass(frozen=True)
class Image:
    """A picture attached to the prompt: its name and bytes, for runtimes that send images."""

    name: str
    media_type: str
    data: bytes


@dataclass
class Turn:
    sandbox: Sandbox
    prompt: str
    author: Author
    instructions: str = ""
    limits: TurnLimits = field(default_factory=TurnLimits)
    env: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    # Set by the runner when the drift sync finishes; None means the workspace is in sync.
    # Runtimes may read and search before it is set, but must not write (edits wait).
    sync_done: threading.Event | None = None
    # The session's children, for agents that can fan work out; None disables the tools.
    children: ChildSessions | None = None
    # The approval gate for irreversible commands; None: nothing is gated.
    approvals: ApprovalGate | None = None
    # The session's conversation so far (see Conversation); runtimes continue it.
    conversation: Conversation = field(default_factory=Conversation)
    # Images attached to this prompt (their links are in `prompt` too).
    images: tuple[Image, ...] = ()


def attributed(prompt: str, author: Author) -> str:
    """A prompt as an agent is given it in a shared session: who asked comes first, so in a
    conversation several people continue, the model knows whose follow-up it is."""
    return f"Request from {author.name} ({author.username}):\n\n{prompt}"


@dataclass(frozen=True)
class AgentEvent:
    kind: AgentEventKind
    data: dict[str, Any] = field(default_factory=dict)


class AgentError(Exception):
    """The runtime cannot run this turn (misconfigured, unknown model, …); shown to users."""


class AgentRuntime(ABC):
    name: str
    # True if the runtime holds its writes until Turn.sync_done is set; the runner must finish
    # the drift sync before starting any other runtime.
    honours_sync: bool = False

    @abstractmethod
    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        """Run one turn, yielding events as they happen; ends with a `done` event. A turn that
        failed (the model or CLI refused, the CLI exited non-zero) says so in `done`'s data as
        `{"failed": "<the CLI's or API's own message>"}`: the runner keeps its work and ends
        the turn `failed` with that message. Warnings are `notice` events, not errors."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the running turn: the agent and the processes it started go away. Idempotent;
        callable from another thread."""

    def process_command(self, turn: Turn) -> str | None:
        """The command line of the process this runtime runs in the sandbox for `turn` (the
        runner audits it with the exit code from `done`); None when it runs none."""
        return None
