"""Connect GitHub: create the GitHub App from a manifest (GitHub's "Registering a GitHub App from
a manifest") and keep what GitHub hands back.

The settings page posts `manifest_for(...)` to `new_app_url(...)`; GitHub creates the App and
redirects back with a one-time code; `connect_app` converts the code (`POST
/app-manifests/{code}/conversions`) and stores the App's id, slug, private key, webhook secret
and OAuth client as run-time settings (secrets sealed), audited without any secret. The page
binds the flow to the admin's session (the `state`); this module trusts its caller for that.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlencode

import httpx
from django.db import transaction

from accounts import social_apps
from approvals import audit
from inspect_web import site_settings
from inspect_web.sealing import SecretsUnavailable
from integrations.github import app_settings
from integrations.github.codehost import GitHubHost

# What the product does with GitHub: push branches and open, update and merge pull requests
# (contents, pull requests), read comments that ask the agent for more (issues), and report
# and follow checks and statuses.
PERMISSIONS = {
    "contents": "write",
    "pull_requests": "write",
    "metadata": "read",
    "checks": "write",
    "statuses": "read",
    "issues": "write",
}
# GitHub sends `installation` events to every App without a subscription.
EVENTS = [
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "issue_comment",
    "push",
    "check_suite",
    "check_run",
    "status",
]
CONVERSION_SECONDS = 30
API_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}


class ConnectRefused(Exception):
    """The App could not be created or converted; the message says why, for the page."""


@dataclass(frozen=True)
class ConnectedApp:
    id: int
    slug: str
    name: str
    owner: str
    html_url: str
    install_url: str
    overridden: list[str]  # settings the environment still pins (the stored ones are unused)


def manifest_for(*, name: str, site_url: str, redirect_url: str, setup_url: str) -> dict:
    """The App manifest: this site's webhook, callback and login URLs, and what it needs."""
    site_url = site_url.rstrip("/")
    return {
        "name": name,
        "url": site_url,
        "description": "Inspect Web: background coding agents that open pull requests.",
        "hook_attributes": {"url": f"{site_url}/webhooks/github/", "active": True},
        "redirect_url": redirect_url,
        "callback_urls": [f"{site_url}/accounts/github/login/callback/"],
        "setup_url": setup_url,
        "setup_on_update": True,
        "public": True,
        "default_permissions": PERMISSIONS,
        "default_events": EVENTS,
    }


def new_app_url(*, web_url: str, state: str, organization: str = "") -> str:
    """Where the manifest form is posted: the user's new-App page, or an organization's."""
    web_url = web_url.rstrip("/")
    query = urlencode({"state": state})
    if organization:
        return f"{web_url}/organizations/{quote(organization, safe='')}/settings/apps/new?{query}"
    return f"{web_url}/settings/apps/new?{query}"


def install_url(*, web_url: str, slug: str) -> str:
    return f"{web_url.rstrip('/')}/apps/{quote(slug, safe='')}/installations/new"


REQUIRED = ("id", "slug", "pem", "webhook_secret", "client_id", "client_secret")


def convert(code: str, *, api_url: str) -> dict:
    """GitHub's conversion of a manifest code: the new App with its key and secrets.
    ConnectRefused when GitHub refuses (the code is single use and expires after an hour)."""
    if not code or not code.replace("-", "").replace("_", "").isalnum():
        raise ConnectRefused("GitHub sent no usable code back; start Connect GitHub again")
    url = f"{api_url.rstrip('/')}/app-manifests/{quote(code, safe='')}/conversions"
    try:
        response = httpx.post(url, headers=API_HEADERS, timeout=CONVERSION_SECONDS)
    except httpx.HTTPError as exc:
        raise ConnectRefused(f"GitHub could not be reached at {api_url}: {exc}") from None
    if response.status_code != 201:
        raise ConnectRefused(
            f"GitHub refused to hand over the new App ({response.status_code}: "
            f"{_message(response)}); the code is used once and expires after an hour — start "
            "Connect GitHub again"
        )
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict) or any(not data.get(key) for key in REQUIRED):
        raise ConnectRefused(
            f"GitHub's answer from {url} is not an App conversion (missing "
            f"{', '.join(k for k in REQUIRED if not isinstance(data, dict) or not data.get(k))})"
        )
    return data


def store_app(app: dict, *, web_url: str, api_url: str, by) -> ConnectedApp:
    """Keep a converted App as the site's GitHub App (secrets sealed), audited."""
    web_url = web_url.rstrip("/")
    api_url = api_url.rstrip("/")
    values = {
        app_settings.APP_ID.name: str(app["id"]),
        app_settings.APP_SLUG.name: app["slug"],
        app_settings.APP_PRIVATE_KEY.name: app["pem"],
        app_settings.WEBHOOK_SECRET.name: app["webhook_secret"],
        social_apps.GITHUB_OAUTH_CLIENT_ID.name: app["client_id"],
        social_apps.GITHUB_OAUTH_CLIENT_SECRET.name: app["client_secret"],
        # Defaults are not stored, so a later change of default still applies.
        app_settings.WEB_URL.name: "" if web_url == app_settings.GITHUB_COM else web_url,
        app_settings.API_URL.name: "" if api_url == app_settings.api_url_for(web_url) else api_url,
    }
    owner = (app.get("owner") or {}).get("login", "")
    with transaction.atomic():
        for name, value in values.items():
            site_settings.store(name, value, by=by)
        audit.record(
            "github.app_connect",
            actor=by,
            object_type="github_app",
            object_id=app["id"],
            data={
                "id": app["id"],
                "slug": app["slug"],
                "name": app.get("name", ""),
                "owner": owner,
                "html_url": app.get("html_url", ""),
                "web_url": web_url,
                "api_url": api_url,
                "permissions": app.get("permissions", {}),
                "events": app.get("events", []),
                "stored": sorted(values),
            },
        )
    GitHubHost._tokens.clear()  # tokens of a previous App are of no use to this one
    return ConnectedApp(
        id=int(app["id"]),
        slug=app["slug"],
        name=app.get("name", app["slug"]),
        owner=owner,
        html_url=app.get("html_url", ""),
        install_url=install_url(web_url=app_settings.web_url(), slug=app_settings.app_slug()),
        overridden=overridden(),
    )


def connect_app(code: str, *, web_url: str, api_url: str, by) -> ConnectedApp:
    """Convert GitHub's code and store the App; ConnectRefused, with nothing stored, when GitHub
    refuses."""
    app = convert(code, api_url=api_url)
    try:
        return store_app(app, web_url=web_url, api_url=api_url, by=by)
    except SecretsUnavailable as exc:
        raise ConnectRefused(
            f"GitHub created the App {app['slug']} but its key and secrets cannot be stored "
            f"encrypted here ({exc}); fix that, delete the App on GitHub "
            f"({app.get('html_url') or app['slug']}) and connect again"
        ) from None


def overridden() -> list[str]:
    """The App's settings the environment pins (a stored value for them is not used)."""
    names = [item.name for item in app_settings.SHOWN] + [
        social_apps.GITHUB_OAUTH_CLIENT_ID.name,
        social_apps.GITHUB_OAUTH_CLIENT_SECRET.name,
    ]
    return [n for n in names if _from_environment(n)]


def _from_environment(name: str) -> bool:
    try:
        return site_settings.in_force(name).source == site_settings.ENVIRONMENT
    except SecretsUnavailable:  # stored but unreadable: so not the environment's
        return False


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    return str(data.get("message", "")) if isinstance(data, dict) else str(data)[:200]
