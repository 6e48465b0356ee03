"""Agent runtimes, chosen per session by name: the registry of which runtime runs for which
name. What the runtimes are configured with (providers, keys, limits) is in `providers`.

`validate_agent` is what session creation calls (an unknown name or a missing key is refused
before anything is queued); `get_runtime` builds the runtime for one turn, wrapped so that no
configured key can reach a stored event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings

from inspect_web.runtimes import AGENT_RUNTIMES
from sessions.agents import claude_code, codex, opencode
from sessions.agents.base import AgentError, AgentRuntime
from sessions.agents.builtin import BuiltinAgent
from sessions.agents.command import CommandAgent
from sessions.agents.providers import configured_secrets, model_client
from sessions.agents.redaction import RedactingRuntime

# `command` first: it is the one that needs nothing configured.
RUNTIME_NAMES = list(AGENT_RUNTIMES)
# How each CLI runtime's process environment is made (its key, base URL and provider).
CLI_ENVIRONMENTS: dict[str, Callable[[], dict[str, str]]] = {
    "claude-code": claude_code.process_env,
    "codex": codex.process_env,
    "opencode": opencode.process_env,
}

__all__ = [
    "RUNTIME_NAMES",
    "AgentError",
    "AgentRuntime",
    "cli_env",
    "get_runtime",
    "validate_agent",
]


def validate_agent(name: str, command: str = "", *, model: str = "") -> None:
    """Raise AgentError for an unknown agent or one missing what it needs (a command, a
    key); the message says which setting to add."""
    if name not in RUNTIME_NAMES:
        raise AgentError(f"unknown agent {name!r}; available: {', '.join(RUNTIME_NAMES)}")
    if name == "command":
        if not command.strip():
            raise AgentError("the command agent needs a command (--agent-command)")
        return
    if name == "builtin":
        model_client(model=model)  # raises for a missing key
        return
    cli_env(name)


def get_runtime(
    name: str,
    *,
    command: str = "",
    model: str = "",
    options: Mapping[str, Any] | None = None,
) -> AgentRuntime:
    """The runtime for one turn. `model` overrides the configured model; `options` is kept
    for runtime-specific knobs (none are read yet)."""
    validate_agent(name, command, model=model)
    if name in settings.AGENT_MODELS:
        model = model or settings.AGENT_MODELS[name]
    runtime: AgentRuntime
    if name == "command":
        runtime = CommandAgent(command)
    elif name == "builtin":
        runtime = BuiltinAgent(
            model_client(model=model),
            retries=settings.LLM_RETRIES,
            request_timeout=settings.LLM_TIMEOUT,
            malformed_limit=settings.AGENT_MALFORMED_RETRIES,
            command_timeout=settings.AGENT_COMMAND_TIMEOUT,
            prices=settings.LLM_PRICES,
            context_tokens=settings.LLM_CONTEXT_TOKENS,
        )
    elif name == "claude-code":
        runtime = claude_code.ClaudeCodeAgent(env=cli_env(name), model=model)
    elif name == "codex":
        runtime = codex.CodexAgent(env=cli_env(name), model=model, prices=settings.LLM_PRICES)
    else:
        runtime = opencode.OpenCodeAgent(env=cli_env(name), model=model)
    return RedactingRuntime(runtime, configured_secrets())


def cli_env(name: str) -> dict[str, str]:
    """What a CLI agent's process gets: its key, base URL and provider settings, nothing else
    (each adapter's `process_env` says how its CLI reads them); AgentError names what to set."""
    return CLI_ENVIRONMENTS[name]()
