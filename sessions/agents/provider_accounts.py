"""The model providers' keys and addresses: declared once as run-time settings
(inspect_web.site_settings, keys sealed) under their environment variables' names, so a value
the deployer sets in the environment wins and one an admin sets on the Models page is used
without a restart. Every reader (the gateway's upstreams, the runtimes' configuration, the
doctor, the Slack classifier) goes through the accessors below, never Django's settings.

Three kinds of account share two upstreams: Anthropic (ANTHROPIC_*), and the gateway's
OpenAI route (INSPECT_LLM_*), which is either OpenAI itself (its base URL at OpenAI's) or one
OpenAI-compatible server (Ollama, vLLM, another gateway) named by its base URL."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from inspect_web import site_settings
from inspect_web.sealing import SecretsUnavailable

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
HOSTED_OPENAI = "api.openai.com"

OPENAI_KEY = site_settings.declare(
    "INSPECT_LLM_API_KEY", label="OpenAI (or OpenAI-compatible) API key", secret=True,
    setting="LLM_API_KEY",
)  # fmt: skip
OPENAI_BASE = site_settings.declare(
    "INSPECT_LLM_BASE_URL", label="OpenAI-compatible base URL", default=OPENAI_BASE_URL,
    setting="LLM_BASE_URL",
)  # fmt: skip
ANTHROPIC_KEY = site_settings.declare("ANTHROPIC_API_KEY", label="Anthropic API key", secret=True)
ANTHROPIC_BASE = site_settings.declare(
    "ANTHROPIC_BASE_URL", label="Anthropic base URL", default=ANTHROPIC_BASE_URL
)
LLM_MODEL = site_settings.declare(
    "INSPECT_LLM_MODEL", label="Default model of the built-in agent", setting="LLM_MODEL"
)

OPENAI = "openai"
ANTHROPIC = "anthropic"
COMPATIBLE = "compatible"
KINDS = {
    OPENAI: "OpenAI",
    ANTHROPIC: "Anthropic",
    COMPATIBLE: "OpenAI-compatible server",
}
UPSTREAM_OF = {OPENAI: "openai", COMPATIBLE: "openai", ANTHROPIC: "anthropic"}


def _secret(item: site_settings.Declared) -> str:
    """A key in force; '' (logged) when a stored one cannot be decrypted, so a changed
    INSPECT_SECRETS_KEY reads as "no key" rather than failing every turn."""
    try:
        return site_settings.value(item.name)
    except SecretsUnavailable as exc:
        log.warning("%s: %s", item.name, exc)
        return ""


def openai_key() -> str:
    return _secret(OPENAI_KEY)


def openai_base_url() -> str:
    return (site_settings.value(OPENAI_BASE.name) or OPENAI_BASE_URL).rstrip("/")


def anthropic_key() -> str:
    return _secret(ANTHROPIC_KEY)


def anthropic_base_url() -> str:
    return (site_settings.value(ANTHROPIC_BASE.name) or ANTHROPIC_BASE_URL).rstrip("/")


def default_model() -> str:
    """INSPECT_LLM_MODEL as in force ('' when none is set)."""
    return site_settings.value(LLM_MODEL.name)


def keys() -> list[str]:
    """Every provider key in force (none may appear in a stored event)."""
    return [key for key in (openai_key(), anthropic_key()) if key]


def custom_openai_base() -> str:
    """INSPECT_LLM_BASE_URL when it is not OpenAI's own API ('' otherwise)."""
    base = openai_base_url()
    return base if urlsplit(base).hostname != HOSTED_OPENAI else ""


def openai_kind() -> str:
    """Which account the OpenAI route is: OPENAI or COMPATIBLE."""
    return COMPATIBLE if custom_openai_base() else OPENAI


@dataclass(frozen=True)
class Account:
    """One provider account as the Models page and `inspect models provider list` show it.
    The key itself is never here: `key_hint` is its last four characters at most."""

    kind: str
    label: str
    configured: bool
    key_set: bool
    key_hint: str
    key_source: str
    base_url: str
    base_source: str
    error: str = ""  # a stored key that cannot be decrypted

    @property
    def upstream(self) -> str:
        return UPSTREAM_OF[self.kind]


def _hint(key: str) -> str:
    return "…" + key[-4:] if len(key) >= 12 else ""


def _key_state(item: site_settings.Declared) -> tuple[str, str, str]:
    """(key, source, error) of a key setting, never raising."""
    try:
        force = site_settings.in_force(item.name)
    except SecretsUnavailable as exc:
        return "", site_settings.SETTINGS_PAGE, str(exc)
    return force.value, force.source, ""


def accounts() -> list[Account]:
    """The three accounts. OpenAI and the OpenAI-compatible server are one upstream: whichever
    the base URL names is configured, the other is not."""
    base = site_settings.in_force(OPENAI_BASE.name)
    key, key_source, key_error = _key_state(OPENAI_KEY)
    kind = openai_kind()
    openai_like = [
        Account(
            kind=k,
            label=KINDS[k],
            configured=kind == k and (bool(key) if k == OPENAI else True),
            key_set=kind == k and bool(key),
            key_hint=_hint(key) if kind == k else "",
            key_source=key_source if kind == k and key else "",
            base_url=openai_base_url() if kind == k else "",
            base_source=base.source if kind == k else "",
            error=key_error if kind == k else "",
        )
        for k in (OPENAI, COMPATIBLE)
    ]
    a_base = site_settings.in_force(ANTHROPIC_BASE.name)
    a_key, a_source, a_error = _key_state(ANTHROPIC_KEY)
    anthropic = Account(
        kind=ANTHROPIC,
        label=KINDS[ANTHROPIC],
        configured=bool(a_key),
        key_set=bool(a_key),
        key_hint=_hint(a_key),
        key_source=a_source if a_key else "",
        base_url=anthropic_base_url(),
        base_source=a_base.source,
        error=a_error,
    )
    return [openai_like[0], anthropic, openai_like[1]]
