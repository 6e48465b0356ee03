"""Agent runtimes, chosen per session by name."""

from __future__ import annotations

from sessions.agents.base import AgentError, AgentRuntime

RUNTIME_NAMES = ["command"]


def validate_agent(name: str, command: str = "") -> None:
    """Raise AgentError for an unknown agent or one missing what it needs."""
    if name not in RUNTIME_NAMES:
        raise AgentError(f"unknown agent {name!r}; available: {', '.join(RUNTIME_NAMES)}")
    if name == "command" and not command.strip():
        raise AgentError("the command agent needs a command (--agent-command)")


def get_runtime(name: str, *, command: str = "") -> AgentRuntime:
    validate_agent(name, command)
    from sessions.agents.command import CommandAgent

    return CommandAgent(command)
