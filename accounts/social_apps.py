"""The sign-in providers' credentials that an admin may set at run time (inspect_web.site_settings):
GitHub's OAuth app (written by the GitHub App manifest flow) and, later, OpenID Connect. The
environment's values win (inspect_web/settings.py builds allauth's providers from them)."""

from __future__ import annotations

from inspect_web import site_settings

GITHUB_OAUTH_CLIENT_ID = site_settings.declare(
    "GITHUB_OAUTH_CLIENT_ID", label="GitHub OAuth client id (log in with GitHub)"
)
GITHUB_OAUTH_CLIENT_SECRET = site_settings.declare(
    "GITHUB_OAUTH_CLIENT_SECRET", label="GitHub OAuth client secret", secret=True
)
