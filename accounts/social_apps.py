"""The sign-in providers an admin may set at run time (inspect_web.site_settings): GitHub's OAuth
app (written by the GitHub App manifest flow) and single sign-on with OpenID Connect, with the
rules that go with it (allowed e-mail domains, the default role of a new user, local passwords
off). The environment's values win. allauth sees the apps through accounts.identity's adapter,
which asks `apps()` on every request, so a change needs no restart and secrets stay sealed."""

from __future__ import annotations

import logging
import re

import requests
from allauth.socialaccount.models import SocialApp
from django.conf import settings

from inspect_web import site_settings
from inspect_web.sealing import SecretsUnavailable

log = logging.getLogger(__name__)

OIDC = "openid_connect"
OIDC_PROVIDER_ID = "sso"  # the login URL is /accounts/oidc/sso/login/
GITHUB = "github"
DEFAULT_OIDC_NAME = "single sign-on"
DISCOVERY_TIMEOUT = 10  # seconds; the page waits for it
WELL_KNOWN = "/.well-known/openid-configuration"
DISCOVERY_FIELDS = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")
DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")

GITHUB_OAUTH_CLIENT_ID = site_settings.declare(
    "GITHUB_OAUTH_CLIENT_ID", label="GitHub OAuth client id (log in with GitHub)"
)
GITHUB_OAUTH_CLIENT_SECRET = site_settings.declare(
    "GITHUB_OAUTH_CLIENT_SECRET", label="GitHub OAuth client secret", secret=True
)
OIDC_NAME = site_settings.declare(
    "INSPECT_OIDC_NAME", label="Name on the login button", setting="OIDC_NAME"
)
OIDC_SERVER_URL = site_settings.declare(
    "INSPECT_OIDC_SERVER_URL", label="Issuer URL", setting="OIDC_SERVER_URL"
)
OIDC_CLIENT_ID = site_settings.declare(
    "INSPECT_OIDC_CLIENT_ID", label="Client id", setting="OIDC_CLIENT_ID"
)
OIDC_CLIENT_SECRET = site_settings.declare(
    "INSPECT_OIDC_CLIENT_SECRET", label="Client secret", secret=True, setting="OIDC_CLIENT_SECRET"
)
SSO_ALLOWED_DOMAINS = site_settings.declare(
    "INSPECT_SSO_ALLOWED_DOMAINS", label="Allowed e-mail domains", setting="SSO_ALLOWED_DOMAINS"
)
SSO_DEFAULT_ROLE = site_settings.declare(
    "INSPECT_SSO_DEFAULT_ROLE", label="Role of a new user", setting="SSO_DEFAULT_ROLE"
)
SSO_DEFAULT_REPOSITORIES = site_settings.declare(
    "INSPECT_SSO_DEFAULT_REPOSITORIES",
    label="Repositories a new user joins",
    setting="SSO_DEFAULT_REPOSITORIES",
)
LOCAL_PASSWORDS_OFF = site_settings.declare(
    "INSPECT_LOCAL_PASSWORDS_OFF", label="Local passwords off", setting="LOCAL_PASSWORDS_OFF"
)


class ProviderRefused(Exception):
    """The issuer URL does not lead to an OpenID provider; the message says why."""


def _app(provider: str, provider_id: str, name: str, client_id: str, secret: str, **extra):
    return SocialApp(
        provider=provider,
        provider_id=provider_id,
        name=name,
        client_id=client_id,
        secret=secret,
        settings=extra,
    )


def github_app() -> SocialApp | None:
    client_id = site_settings.value(GITHUB_OAUTH_CLIENT_ID.name)
    secret = site_settings.value(GITHUB_OAUTH_CLIENT_SECRET.name)
    if not (client_id and secret):
        return None
    return _app(GITHUB, "", "GitHub", client_id, secret)


def oidc_name() -> str:
    return site_settings.value(OIDC_NAME.name) or DEFAULT_OIDC_NAME


def oidc_app() -> SocialApp | None:
    server_url = site_settings.value(OIDC_SERVER_URL.name)
    client_id = site_settings.value(OIDC_CLIENT_ID.name)
    secret = site_settings.value(OIDC_CLIENT_SECRET.name)
    if not (server_url and client_id and secret):
        return None
    return _app(OIDC, OIDC_PROVIDER_ID, oidc_name(), client_id, secret, server_url=server_url)


def apps(provider: str | None = None, client_id: str | None = None) -> list[SocialApp]:
    """The configured sign-in apps, filtered as allauth's `list_apps` filters."""
    found = []
    for build in (github_app, oidc_app):
        try:
            app = build()
        except SecretsUnavailable:
            # A secret sealed under another key: that button goes, the login page stays up.
            log.warning("%s: a stored client secret cannot be decrypted", build.__name__)
            continue
        if app is not None:
            found.append(app)
    if provider:
        found = [app for app in found if provider in (app.provider, app.provider_id)]
    if client_id:
        found = [app for app in found if app.client_id == client_id]
    return found


def is_single_sign_on(provider: str) -> bool:
    """Whether a SocialAccount's `provider` is OpenID Connect (allauth stores the app's
    provider id there, "sso")."""
    return provider in (OIDC, OIDC_PROVIDER_ID)


def github_login_enabled() -> bool:
    return github_app() is not None


def allowed_domains() -> list[str]:
    return parse_domains(site_settings.value(SSO_ALLOWED_DOMAINS.name))


def parse_domains(text: str) -> list[str]:
    """Domains from text separated by commas, spaces or lines; ValueError names a bad one."""
    domains = []
    for raw in re.split(r"[\s,]+", text or ""):
        domain = raw.strip().lower().lstrip("@")
        if not domain:
            continue
        if not DOMAIN.match(domain):
            raise ValueError(f"{raw!r} is not a domain name (like example.com)")
        if domain not in domains:
            domains.append(domain)
    return domains


def domain_allowed(email: str, domains: list[str]) -> bool:
    domain = email.rpartition("@")[2].lower()
    return bool(domain) and domain in domains


def default_grant() -> tuple[str, list[str]]:
    """The role a new single sign-on user gets, and on which repositories ("" when none)."""
    role = site_settings.value(SSO_DEFAULT_ROLE.name)
    names = site_settings.value(SSO_DEFAULT_REPOSITORIES.name)
    repositories = [name for name in re.split(r"[\s,]+", names or "") if name]
    return (role, repositories) if role and repositories else ("", [])


def passwords_off() -> bool:
    return bool(site_settings.value(LOCAL_PASSWORDS_OFF.name))


def break_glass(user) -> bool:
    """Whether `user` may still use a password while local passwords are off: only active
    superusers, only when the deployment set INSPECT_LOCAL_LOGIN=superuser."""
    return bool(
        settings.LOCAL_LOGIN == "superuser"
        and user is not None
        and user.is_active
        and user.is_superuser
    )


def discovery_url(server_url: str) -> str:
    url = server_url.strip().rstrip("/")
    return url if "/.well-known/" in url else url + WELL_KNOWN


def check_openid_provider(server_url: str) -> dict:
    """Fetch the issuer's discovery document; ProviderRefused says why it is not an OpenID
    provider (unreachable, not JSON, fields missing, another issuer)."""
    url = discovery_url(server_url)
    if not url.startswith(("https://", "http://")):
        raise ProviderRefused("The issuer URL must start with https:// (or http:// for testing).")
    try:
        response = requests.get(url, timeout=DISCOVERY_TIMEOUT, allow_redirects=False)
    except requests.RequestException as exc:
        raise ProviderRefused(f"Could not reach {url}: {exc.__class__.__name__}.") from None
    if response.status_code != 200:
        raise ProviderRefused(
            f"{url} answered HTTP {response.status_code}, not a discovery document."
        )
    try:
        document = response.json()
    except ValueError:
        raise ProviderRefused(f"{url} did not answer JSON: it is not an OpenID provider.") from None
    if not isinstance(document, dict):
        raise ProviderRefused(f"{url} did not answer a discovery document.")
    missing = [name for name in DISCOVERY_FIELDS if not document.get(name)]
    if missing:
        raise ProviderRefused(f"{url} is not an OpenID provider: no {', '.join(missing)}.")
    issuer = str(document["issuer"]).rstrip("/")
    expected = url.removesuffix(WELL_KNOWN).rstrip("/")
    if issuer != expected:
        raise ProviderRefused(
            f"The provider calls itself {issuer}, not {expected}: use its issuer URL."
        )
    return document
