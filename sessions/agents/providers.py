"""What this deployment configures for its agents, read from the settings: the model provider
and its endpoints, the default models, the keys no stored event may hold, and the per-turn
limits. The runtimes take these from here, never from the registry (`sessions.agents`), so
that no runtime imports another."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

from sessions.agents.base import AgentError, TurnLimits
from sessions.agents.llm import AnthropicMessages, ModelClient, OpenAIChat

DEFAULT_MODELS = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-5"}
HOSTED_OPENAI = "api.openai.com"


def configured_secrets() -> list[str]:
    """Every model key this deployment holds; none may appear in a stored event."""
    return [key for key in (settings.LLM_API_KEY, settings.ANTHROPIC_API_KEY) if key]


def turn_limits() -> TurnLimits:
    """The per-turn limits configured for this deployment (INSPECT_AGENT_MAX_*)."""
    return TurnLimits(
        steps=settings.AGENT_MAX_STEPS,
        tokens=settings.AGENT_MAX_TOKENS,
        cost_usd=settings.AGENT_MAX_COST_USD,
        wall_seconds=float(settings.AGENT_MAX_WALL_SECONDS),
    )


def llm_provider() -> str:
    """`openai` (any OpenAI-compatible endpoint) or `anthropic`, per INSPECT_LLM_PROVIDER;
    `auto` picks Anthropic only when its key is the one configured."""
    if settings.LLM_PROVIDER != "auto":
        return settings.LLM_PROVIDER
    if settings.ANTHROPIC_API_KEY and not settings.LLM_API_KEY:
        custom_endpoint = urlsplit(settings.LLM_BASE_URL).hostname != HOSTED_OPENAI
        return "openai" if custom_endpoint else "anthropic"
    return "openai"


def model_client(*, model: str = "") -> ModelClient:
    """The built-in agent's model client; AgentError if its key is missing."""
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


def custom_openai_base() -> str:
    """INSPECT_LLM_BASE_URL when it is not OpenAI's own API ('' otherwise)."""
    base = settings.LLM_BASE_URL
    return base if urlsplit(base).hostname != HOSTED_OPENAI else ""


def custom_anthropic_base() -> str:
    """ANTHROPIC_BASE_URL when it is not Anthropic's own API ('' otherwise)."""
    base = settings.ANTHROPIC_BASE_URL.rstrip("/")
    return base if base != "https://api.anthropic.com" else ""
