"""What this deployment configures for its agents, read from the settings: the model provider
and its endpoints, the default models, the keys no stored event may hold, and the per-turn
limits. The runtimes take these from here, never from the registry (`sessions.agents`), so
that no runtime imports another.

No runtime is given a provider key: each reaches the model gateway (gateway/) with its turn's
token (`sessions.model_access.GatewayRoute`), and the gateway forwards with the key it holds.
`require_upstream` checks that the gateway has the upstream a runtime needs."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

from sessions.agents import provider_accounts as accounts
from sessions.agents.base import AgentError, TurnLimits
from sessions.agents.llm import AnthropicMessages, ModelClient, OpenAIChat
from sessions.agents.provider_accounts import HOSTED_OPENAI, custom_openai_base
from sessions.model_access import GatewayRoute

DEFAULT_MODELS = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-5"}
WHERE = " (in the environment, or on Settings → Models)"


def configured_secrets() -> list[str]:
    """Every model key this deployment holds (the environment's or the Models page's); none
    may appear in a stored event."""
    return accounts.keys()


def model_configured() -> bool:
    """Whether any model provider is configured (a key, or an OpenAI-compatible URL)."""
    return bool(configured_secrets() or custom_openai_base())


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
    if accounts.anthropic_key() and not accounts.openai_key():
        return "openai" if custom_openai_base() else "anthropic"
    return "openai"


def require_upstream(runtime: str) -> None:
    """AgentError, naming the setting to add, when the gateway has no upstream (a provider
    key, or a local OpenAI-compatible server) for what `runtime` speaks."""
    if runtime == "builtin":
        _require_builtin_upstream()
    elif runtime == "claude-code" and not accounts.anthropic_key():
        raise AgentError("the claude-code agent needs ANTHROPIC_API_KEY to be set" + WHERE)
    elif runtime == "codex" and not accounts.openai_key():
        raise AgentError("the codex agent needs INSPECT_LLM_API_KEY (an OpenAI API key)" + WHERE)
    elif runtime == "opencode" and not (
        accounts.anthropic_key() or accounts.openai_key() or custom_openai_base()
    ):
        raise AgentError(
            "the opencode agent needs INSPECT_LLM_API_KEY or ANTHROPIC_API_KEY to be set" + WHERE
        )


def _require_builtin_upstream() -> None:
    if llm_provider() == "anthropic":
        if not accounts.anthropic_key():
            raise AgentError(
                "the builtin agent is set to use Anthropic but ANTHROPIC_API_KEY is not set" + WHERE
            )
        return
    base = accounts.openai_base_url()
    if urlsplit(base).scheme not in ("http", "https"):
        raise AgentError(f"INSPECT_LLM_BASE_URL {base!r} is not an http(s) URL")
    if urlsplit(base).hostname == HOSTED_OPENAI and not accounts.openai_key():
        raise AgentError(
            "the builtin agent needs a model: set INSPECT_LLM_API_KEY (for "
            f"{base}), point INSPECT_LLM_BASE_URL at an OpenAI-compatible server such as "
            "Ollama (http://127.0.0.1:11434/v1), or set ANTHROPIC_API_KEY" + WHERE
        )


def model_client(route: GatewayRoute, *, model: str = "") -> ModelClient:
    """The built-in agent's model client: the configured provider's wire format, sent to the
    gateway with the turn's token; AgentError if the gateway has no upstream for it."""
    _require_builtin_upstream()
    provider = llm_provider()
    model = model or accounts.default_model() or DEFAULT_MODELS[provider]
    if provider == "anthropic":
        return AnthropicMessages(api_key=route.token, model=model, base_url=route.anthropic_base)
    return OpenAIChat(base_url=route.openai_base, api_key=route.token, model=model)
