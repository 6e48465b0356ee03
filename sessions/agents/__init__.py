"""Agent runtimes, chosen per session by name: the registry of which runtime runs for which
name. What the runtimes are configured with (providers, keys, limits) is in `providers`.

`validate_agent` is what session creation calls (an unknown name, a missing key or a gateway
the session's sandboxes cannot reach is refused before anything is queued); `get_runtime`
builds the runtime for one turn, pointed at the model gateway with the turn's token
(`sessions.model_access.GatewayRoute`), wrapped so that neither a configured key nor the
token can reach a stored event.
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
from sessions.agents.providers import configured_secrets, model_client, require_upstream
from sessions.agents.redaction import RedactingRuntime
from sessions.model_access import GatewayRoute, gateway_unreachable

# `command` first: it is the one that needs nothing configured.
RUNTIME_NAMES = list(AGENT_RUNTIMES)
# How each CLI runtime's process environment is made from its route to the gateway (the
# turn's token, the base URL and provider it reads).
CLI_ENVIRONMENTS: dict[str, Callable[[GatewayRoute], dict[str, str]]] = {
    "claude-code": claude_code.process_env,
    "codex": codex.process_env,
    "opencode": opencode.process_env,
}

# Whether each runtime holds its writes until the drift sync is done (see AgentRuntime).
HONOURS_SYNC = {
    "command": CommandAgent.honours_sync,
    "builtin": BuiltinAgent.honours_sync,
    "claude-code": claude_code.ClaudeCodeAgent.honours_sync,
    "codex": codex.CodexAgent.honours_sync,
    "opencode": opencode.OpenCodeAgent.honours_sync,
}

__all__ = [
    "RUNTIME_NAMES",
    "AgentError",
    "AgentRuntime",
    "cli_env",
    "require_upstream",
    "get_runtime",
    "honours_sync",
    "validate_agent",
]


def validate_agent(name: str, command: str = "", *, model: str = "", backend: str = "") -> None:
    """Raise AgentError for an unknown agent or one missing what it needs (a command, an
    upstream key for the gateway, a gateway its sandboxes on `backend` can reach); the
    message says which setting to add."""
    if name not in RUNTIME_NAMES:
        raise AgentError(f"unknown agent {name!r}; available: {', '.join(RUNTIME_NAMES)}")
    if name == "command":
        if not command.strip():
            raise AgentError("the command agent needs a command (--agent-command)")
        return
    require_upstream(name)
    # The built-in agent calls the gateway from the worker; a CLI from inside the sandbox.
    unreachable = gateway_unreachable(backend) if name in CLI_ENVIRONMENTS else ""
    if unreachable:
        raise AgentError(unreachable)


def get_runtime(
    name: str,
    *,
    route: GatewayRoute,
    command: str = "",
    model: str = "",
    backend: str = "",
    options: Mapping[str, Any] | None = None,
) -> AgentRuntime:
    """The runtime for one turn, reaching models through the gateway at `route` with its
    token. `model` overrides the configured model; `backend` is the sandbox backend's name
    (see `validate_agent`); `options` is kept for runtime-specific knobs (none are read yet)."""
    validate_agent(name, command, model=model, backend=backend)
    if name in settings.AGENT_MODELS:
        model = model or settings.AGENT_MODELS[name]
    runtime: AgentRuntime
    if name == "command":
        runtime = CommandAgent(command, route=route)
    elif name == "builtin":
        runtime = BuiltinAgent(
            model_client(route, model=model),
            retries=settings.LLM_RETRIES,
            request_timeout=settings.LLM_TIMEOUT,
            malformed_limit=settings.AGENT_MALFORMED_RETRIES,
            command_timeout=settings.AGENT_COMMAND_TIMEOUT,
            prices=settings.LLM_PRICES,
            context_tokens=settings.LLM_CONTEXT_TOKENS,
        )
    elif name == "claude-code":
        runtime = claude_code.ClaudeCodeAgent(env=cli_env(name, route), model=model)
    elif name == "codex":
        runtime = codex.CodexAgent(
            env=cli_env(name, route), model=model, prices=settings.LLM_PRICES
        )
    else:
        runtime = opencode.OpenCodeAgent(env=cli_env(name, route), model=model)
    return RedactingRuntime(runtime, [*configured_secrets(), route.token])


def honours_sync(name: str) -> bool:
    """Whether runtime `name` may start while the drift sync runs (it holds its writes)."""
    return HONOURS_SYNC.get(name, False)


def cli_env(name: str, route: GatewayRoute) -> dict[str, str]:
    """What a CLI agent's process gets: the turn's token as its key, the gateway as its base
    URL and its provider settings, nothing else (each adapter's `process_env` says how its CLI
    reads them); AgentError names what to set."""
    require_upstream(name)
    return CLI_ENVIRONMENTS[name](route)
