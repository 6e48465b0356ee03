"""The `command` runtime: a shell command in the sandbox is the agent.

The prompt reaches it as $INSPECT_PROMPT (and its author as $INSPECT_AUTHOR); each output line
is an event. Useful for scripted changes, for tests, and as the simplest conformance subject.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from sessions.agents.base import AgentError, AgentEvent, AgentRuntime, Turn
from snapshots.sandbox import ExecHandle


class CommandAgent(AgentRuntime):
    name = "command"

    def __init__(self, command: str) -> None:
        if not command.strip():
            raise AgentError("the command agent needs a command (--agent-command)")
        self.command = command
        self._handle: ExecHandle | None = None
        self._stopped = threading.Event()

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        env = {
            **turn.env,
            "INSPECT_PROMPT": turn.prompt,
            "INSPECT_AUTHOR": turn.author.username,
            "INSPECT_AUTHOR_EMAIL": turn.author.email,
        }
        self._handle = turn.sandbox.exec(
            self.command, env=env, cwd="/workspace", timeout=turn.limits.wall_seconds
        )
        if self._stopped.is_set():
            self._handle.kill()
        for line in self._handle:
            yield AgentEvent("output", {"stream": line.stream, "text": line.text})
        result = self._handle.wait()
        if self._stopped.is_set():
            yield AgentEvent("done", {"stopped": True, "exit_code": result.exit_code})
            return
        if result.limit_hit:
            yield AgentEvent("error", {"message": f"the agent hit its {result.limit_hit} limit"})
        elif result.exit_code != 0:
            yield AgentEvent(
                "error", {"message": f"the agent command exited with status {result.exit_code}"}
            )
        yield AgentEvent("done", {"exit_code": result.exit_code})

    def stop(self) -> None:
        self._stopped.set()
        if self._handle is not None:
            self._handle.kill()
