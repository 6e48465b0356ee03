"""The GitHub App's run-time settings (inspect_web.site_settings): set by the environment, or
stored by "Connect GitHub" (the manifest flow). Every reader goes through here, so the
environment still wins and an App stored by the flow is used without a restart."""

from __future__ import annotations

from dataclasses import dataclass

from inspect_web import site_settings
from inspect_web.sealing import SecretsUnavailable

GITHUB_COM = "https://github.com"
GITHUB_COM_API = "https://api.github.com"

APP_ID = site_settings.declare("GITHUB_APP_ID", label="GitHub App id")
APP_PRIVATE_KEY = site_settings.declare(
    "GITHUB_APP_PRIVATE_KEY", label="GitHub App private key", secret=True
)
WEBHOOK_SECRET = site_settings.declare(
    "GITHUB_WEBHOOK_SECRET", label="GitHub App webhook secret", secret=True
)
APP_SLUG = site_settings.declare("GITHUB_APP_SLUG", label="GitHub App slug", default="inspect-web")
API_URL = site_settings.declare("GITHUB_API_URL", label="GitHub API URL", default=GITHUB_COM_API)
WEB_URL = site_settings.declare("GITHUB_WEB_URL", label="GitHub web URL", default=GITHUB_COM)

# What the page shows, in order (never the values of secret ones).
SHOWN = [APP_ID, APP_SLUG, WEB_URL, API_URL, APP_PRIVATE_KEY, WEBHOOK_SECRET]


def app_id() -> str:
    return site_settings.value(APP_ID.name)


def private_key() -> str:
    return site_settings.value(APP_PRIVATE_KEY.name)


def webhook_secret() -> str:
    return site_settings.value(WEBHOOK_SECRET.name)


def app_slug() -> str:
    return site_settings.value(APP_SLUG.name)


def web_url() -> str:
    return site_settings.value(WEB_URL.name).rstrip("/")


def api_url_for(web: str) -> str:
    """GitHub's API beside a web address: api.github.com, or GHES's `https://HOST/api/v3`."""
    web = web.rstrip("/")
    return GITHUB_COM_API if web == GITHUB_COM else f"{web}/api/v3"


def api_url() -> str:
    """The API in force; when only the web address is set (GHES), its `/api/v3`."""
    current = site_settings.in_force(API_URL.name)
    if current.source == site_settings.DEFAULT:
        return api_url_for(web_url())
    return current.value.rstrip("/")


def api_url_to_connect(web: str) -> str:
    """The API a new App at `web` is converted with: the environment's when it pins one."""
    current = site_settings.in_force(API_URL.name)
    if current.source == site_settings.ENVIRONMENT:
        return current.value.rstrip("/")
    return api_url_for(web)


def app_configured() -> bool:
    return bool(app_id() and private_key())


@dataclass(frozen=True)
class Shown:
    name: str
    label: str
    value: str  # "set" for a secret, never its value
    source: str


def shown() -> list[Shown]:
    """Each App setting with the source in force, for the settings page."""
    rows = []
    for item in SHOWN:
        try:
            current = site_settings.in_force(item.name)
        except SecretsUnavailable as exc:
            rows.append(Shown(item.name, item.label, f"stored, unreadable: {exc}", "settings page"))
            continue
        value, source = current.value, current.source
        if item is API_URL:
            value = api_url()
            if source == site_settings.DEFAULT and value != GITHUB_COM_API:
                source = "default (the web URL's /api/v3)"
        if item.secret:
            value = "set" if value else "not set"
        rows.append(Shown(item.name, item.label, value, source))
    return rows
