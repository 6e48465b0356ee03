"""Agent runtimes, chosen per session by name.

`validate_agent` is what session creation calls (an unknown name or a missing key is refused
before anything is queued); `get_runtime` builds the runtime for one turn, wrapped so that no
configured key can reach a stored event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from inspect_web.runtimes import AGENT_RUNTIMES
from sessions.agents.base import AgentError, AgentRuntime, TurnLimits

# `command` first: it is the one that needs nothing configured.
RUNTIME_NAMES = list(AGENT_RUNTIMES)
DEFAULT_MODELS = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-5"}
HOSTED_OPENAI = "api.openai.com"

__all__ = [
    "RUNTIME_NAMES",
    "AgentError",
    "AgentRuntime",
    "configured_secrets",
    "get_runtime",
    "llm_provider",
    "model_client",
    "turn_limits",
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
    _cli_env(name)


def get_runtime(
    name: str,
    *,
    command: str = "",
    model: str = "",
    options: Mapping[str, Any] | None = None,
) -> AgentRuntime:
    """The runtime for one turn. `model` overrides the configured model; `options` is kept
    for runtime-specific knobs (none are read yet)."""
    from django.conf import settings

    from sessions.agents.redaction import RedactingRuntime

    validate_agent(name, command, model=model)
    if name in settings.AGENT_MODELS:
        model = model or settings.AGENT_MODELS[name]
    runtime: AgentRuntime
    if name == "command":
        from sessions.agents.command import CommandAgent

        runtime = CommandAgent(command)
    elif name == "builtin":
        from sessions.agents.builtin import BuiltinAgent

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
        from sessions.agents.claude_code import ClaudeCodeAgent

        runtime = ClaudeCodeAgent(env=_cli_env(name), model=model)
    elif name == "codex":
        from sessions.agents.codex import CodexAgent

        runtime = CodexAgent(env=_cli_env(name), model=model, prices=settings.LLM_PRICES)
    else:
        from sessions.agents.opencode import OpenCodeAgent

        runtime = OpenCodeAgent(env=_cli_env(name), model=model)
    return RedactingRuntime(runtime, configured_secrets())


def configured_secrets() -> list[str]:
    """Every model key this deployment holds; none may appear in a stored event."""
    from django.conf import settings

    return [key for key in (settings.LLM_API_KEY, settings.ANTHROPIC_API_KEY) if key]


def turn_limits() -> TurnLimits:
    """The per-turn limits configured for this deployment (INSPECT_AGENT_MAX_*)."""
    from django.conf import settings

    return TurnLimits(
        steps=settings.AGENT_MAX_STEPS,
        tokens=settings.AGENT_MAX_TOKENS,
        cost_usd=settings.AGENT_MAX_COST_USD,
        wall_seconds=float(settings.AGENT_MAX_WALL_SECONDS),
    )


def llm_provider() -> str:
    """`openai` (any OpenAI-compatible endpoint) or `anthropic`, per INSPECT_LLM_PROVIDER;
    `auto` picks Anthropic only when its key is the one configured."""
    from django.conf import settings

    if settings.LLM_PROVIDER != "auto":
        return settings.LLM_PROVIDER
    if settings.ANTHROPIC_API_KEY and not settings.LLM_API_KEY:
        custom_endpoint = urlsplit(settings.LLM_BASE_URL).hostname != HOSTED_OPENAI
        return "openai" if custom_endpoint else "anthropic"
    return "openai"


def model_client(*, model: str = ""):
    """The built-in agent's model client; AgentError if its key is missing."""
    from django.conf import settings

    from sessions.agents.llm import AnthropicMessages, OpenAIChat

    provider = llm_provider()
    model = model or settings.LLM_MODEL or DEFAULT_MODELS[provider]
    if provider == "anthropic":
        if not settings.ANTHROPIC_API_KEY:
            raise AgentError(
                "the builtin agent is set to use Anthropic but ANTHROPIC_API_KEY is not set"
            )
        return AnthropicMessages(
            api_key=settings.ANTHROPIC_API_KEY, model=model, base_url=settings.ANTHROPIC_BASE_URL
        )
    base = settings.LLM_BASE_URL
    if urlsplit(base).scheme not in ("http", "https"):
        raise AgentError(f"INSPECT_LLM_BASE_URL {base!r} is not an http(s) URL")
    if urlsplit(base).hostname == HOSTED_OPENAI and not settings.LLM_API_KEY:
        raise AgentError(
            "the builtin agent needs a model: set INSPECT_LLM_API_KEY (for "
            f"{base}), point INSPECT_LLM_BASE_URL at an OpenAI-compatible server such as "
            "Ollama (http://127.0.0.1:11434/v1), or set ANTHROPIC_API_KEY"
        )
    return OpenAIChat(base_url=base, api_key=settings.LLM_API_KEY, model=model)


def _cli_env(name: str) -> dict[str, str]:
    """What a CLI agent's process gets: its key, base URL and provider settings, nothing else
    (each adapter's `process_env` says how its CLI reads them); AgentError names what to set."""
    if name == "claude-code":
        from sessions.agents.claude_code import process_env
    elif name == "codex":
        from sessions.agents.codex import process_env
    else:
        from sessions.agents.opencode import process_env
    return process_env()


def custom_openai_base() -> str:
    """INSPECT_LLM_BASE_URL when it is not OpenAI's own API ('' otherwise)."""
    from django.conf import settings

    base = settings.LLM_BASE_URL
    return base if urlsplit(base).hostname != HOSTED_OPENAI else ""


def custom_anthropic_base() -> str:
    """ANTHROPIC_BASE_URL when it is not Anthropic's own API ('' otherwise)."""
    from django.conf import settings

    base = settings.ANTHROPIC_BASE_URL.rstrip("/")
    return base if base != "https://api.anthropic.com" else ""
