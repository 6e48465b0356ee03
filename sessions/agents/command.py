"""The `command` runtime: a shell command in the sandbox is the agent.

The prompt reaches it as $INSPECT_PROMPT and on stdin (the sandbox's exec has no stdin of its
own, so a wrapper shell pipes $INSPECT_PROMPT in); its author is $INSPECT_AUTHOR. The session's
conversation so far — every prompt with its author and every message the agent sent, this
turn's prompt last — is in the JSON Lines file $INSPECT_CONVERSATION, so a follow-up can refer
to earlier turns. A command that calls a model finds the model gateway and the turn's token in
the variables the providers' SDKs read (ANTHROPIC_BASE_URL + ANTHROPIC_API_KEY,
OPENAI_BASE_URL + OPENAI_API_KEY); no provider key is ever given. Each output
line is an `output` event, except that a stdout line holding a JSON object in the built-in
event shape — ``{"kind": "message", "data": {"text": "…"}}`` — becomes that event. Useful for
scripted changes, in-house agents, tests, and as the simplest conformance subject.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any, get_args

from sessions.agents.base import AgentError, AgentEvent, AgentEventKind, AgentRuntime, Turn
from sessions.model_access import GatewayRoute
from snapshots.sandbox import ExecHandle

# The agent's own command line is in $INSPECT_AGENT_COMMAND, so no quoting is needed.
WITH_PROMPT_ON_STDIN = 'printf "%s\\n" "$INSPECT_PROMPT" | /bin/sh -c "$INSPECT_AGENT_COMMAND"'
CONVERSATION_FILE = ".git/inspect-agent/command/conversation.jsonl"
# `done` is the runtime's own to send.
PARSED_KINDS = frozenset(get_args(AgentEventKind)) - {"done"}


def parse_event_line(text: str) -> AgentEvent | None:
    """The AgentEvent a `{"kind": ..., "data": {...}}` line stands for, or None."""
    if not text.startswith("{"):
        return None
    try:
        obj: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("kind") not in PARSED_KINDS:
        return None
    data = obj.get("data", {})
    if not isinstance(data, dict):
        return None
    return AgentEvent(obj["kind"], data)


def model_env(route: GatewayRoute | None) -> dict[str, str]:
    """What a command needs to call a model through the gateway (nothing when the sandbox
    cannot reach one: a Modal sandbox with no public gateway URL)."""
    if route is None or not route.openai_base.startswith(("http://", "https://")):
        return {}
    return {
        "ANTHROPIC_BASE_URL": route.anthropic_base,
        "ANTHROPIC_API_KEY": route.token,
        "OPENAI_BASE_URL": route.openai_base,
        "OPENAI_API_KEY": route.token,
    }


class CommandAgent(AgentRuntime):
    name = "command"

    def __init__(self, command: str, *, route: GatewayRoute | None = None) -> None:
        if not command.strip():
            raise AgentError("the command agent needs a command (--agent-command)")
        self.command = command
        self.process_env = model_env(route)
        self._handle: ExecHandle | None = None
        self._stopped = threading.Event()

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        said = turn.conversation.messages
        said.append({"role": "user", "author": turn.author.username, "text": turn.prompt})
        turn.sandbox.write_file(
            CONVERSATION_FILE, "".join(json.dumps(entry) + "\n" for entry in said).encode()
        )
        env = {
            "INSPECT_PROMPT": turn.prompt,
            "INSPECT_AUTHOR": turn.author.username,
            "INSPECT_AUTHOR_EMAIL": turn.author.email,
            "INSPECT_AGENT_COMMAND": self.command,
            "INSPECT_CONVERSATION": f"/workspace/{CONVERSATION_FILE}",
        }
        self._handle = turn.sandbox.exec(
            ["/bin/sh", "-c", WITH_PROMPT_ON_STDIN],
            env=env,
            # The turn's token and the agent-scoped repository secrets: contained.
            secrets={**turn.env, **self.process_env},
            cwd="/workspace",
            timeout=turn.limits.wall_seconds,
        )
        if self._stopped.is_set():
            self._handle.kill()
        for line in self._handle:
            parsed = parse_event_line(line.text) if line.stream == "stdout" else None
            if parsed is not None and parsed.kind == "message":
                said.append({"role": "agent", "text": str(parsed.data.get("text") or "")})
            yield parsed or AgentEvent("output", {"stream": line.stream, "text": line.text})
        result = self._handle.wait()
        if self._stopped.is_set():
            yield AgentEvent("done", {"stopped": True, "exit_code": result.exit_code})
            return
        if result.limit_hit:
            yield AgentEvent(
                "error",
                {
                    "message": f"the agent hit its {result.limit_hit} limit",
                    "limit": result.limit_hit,
                },
            )
        elif result.exit_code != 0:
            failed = f"the agent command exited with status {result.exit_code}"
            yield AgentEvent("error", {"message": failed})
            yield AgentEvent("done", {"exit_code": result.exit_code, "failed": failed})
            return
        yield AgentEvent("done", {"exit_code": result.exit_code})

    def process_command(self, turn: Turn) -> str | None:
        return self.command

    def stop(self) -> None:
        self._stopped.set()
        if self._handle is not None:
            self._handle.kill()
